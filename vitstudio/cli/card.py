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
    from ..core.models.modelcard import model_card

    loaded = load_model_from_args(args)
    if loaded is None:
        return EXIT_USAGE
    card = model_card(loaded)
    if args.json:
        print(json.dumps(card.as_dict()))
    else:
        width = max(len(k) for k, _ in card.lines())
        for key, value in card.lines():
            print(f"{key:<{width}}  {value}")
    return EXIT_OK
