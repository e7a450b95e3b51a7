"""`vitstudio card`: the model card of a model (architecture, sizes, preprocessing, labels, provenance)."""

from __future__ import annotations

import json

from .common import EXIT_OK, EXIT_USAGE, add_model_args, load_model_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("card", help="show the model card of a model")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help="the card as one JSON object")
    p.set_defaults(handler=card_cmd)


def card_cmd(args) -> int:
    """The card, then where this installation keeps its files (a user moving one folder sees what moved)."""
    from ..core.files import app_folders
    from ..core.models.modelcard import model_card

    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    card = model_card(loaded)
    folders = app_folders()
    if args.json:
        print(json.dumps({**card.as_dict(), "folders": {what.split()[0].lower(): str(where)
                                                        for what, where, _ in folders}}))
    else:
        lines = [*card.lines(), *((what, f"{where}  ({moved_by})") for what, where, moved_by in folders)]
        width = max(len(k) for k, _ in lines)
        for key, value in lines:
            print(f"{key:<{width}}  {value}")
    return EXIT_OK
