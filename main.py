"""Launch the ViT Studio desktop app."""

from vitstudio.gui.app import main

raise SystemExit(main())
