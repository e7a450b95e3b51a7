"""`python -m vitstudio ...` runs the CLI."""

from vitstudio.cli import main

raise SystemExit(main())
