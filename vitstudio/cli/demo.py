"""`vitstudio demo-model`: train the bundled demo model (scikit-learn digits) from scratch."""

from __future__ import annotations

import sys
from pathlib import Path

from .common import EXIT_OK, EXIT_USAGE, drain


def register(subparsers) -> None:
    p = subparsers.add_parser("demo-model", help="train the bundled demo model (scikit-learn digits) from scratch")
    p.add_argument("--out", default="models/digits-vit", help="run folder to write (default models/digits-vit)")
    p.add_argument("--epochs", type=int, default=40, help="epochs (default 40)")
    p.set_defaults(handler=demo_cmd)


def demo_cmd(args) -> int:
    import tempfile

    from ..core.models.demo import render_digits
    from ..core.train.demo_recipe import demo_config
    from ..core.train.engine import fine_tune

    with tempfile.TemporaryDirectory() as tmp:
        data = render_digits(Path(tmp) / "digits")
        try:
            result = drain(fine_tune(demo_config(data, args.out, args.epochs)), quiet=False)
        except FileExistsError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
    print(f"demo model: val accuracy {result.best_val_acc:.4f} -> {result.out_dir}")
    return EXIT_OK
