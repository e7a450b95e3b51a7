"""`python -m vitstudio.cli ...` runs the CLI (as `python -m vitstudio ...` does)."""

from vitstudio.cli import main

raise SystemExit(main())
