"""`vitstudio models`: the ViT-family models of the catalog, local ones first."""

from __future__ import annotations

import json
import sys

from ..core.files import counted
from .common import EXIT_OK

FAMILIES = ["vit", "deit", "hybrid", "vitamin", "eva", "beit", "relpos", "cait", "swin", "naflexvit", "open_clip"]


def register(subparsers) -> None:
    p = subparsers.add_parser("models", help="list ViT-family models (local ones first)")
    p.add_argument("--filter", help="substring or glob on the name, e.g. 'deit*' or 'dinov2'")
    p.add_argument("--local", action="store_true", help="only models whose weights are available offline")
    p.add_argument("--family", choices=FAMILIES,
                   help="only one family (eva: EVA-02, EVA-CLIP, DINOv3, Perception Encoder; swin: v1 and v2; "
                        "open_clip: CLIP-style models with their text tower, for --classes and the text map)")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.set_defaults(handler=models_cmd)


def models_cmd(args) -> int:
    from ..core.models.catalog import list_catalog

    entries = list_catalog(args.filter, args.local, family=args.family)
    if not args.json and entries:
        print(f"{'model':<70} {'family':<9} weights")
    for e in entries:
        if args.json:
            print(json.dumps({"name": e.name, "architecture": e.architecture, "tag": e.tag, "source": e.source,
                              "local": e.local, "hf_hub_id": e.hf_hub_id, "num_classes": e.num_classes,
                              "family": e.family}))
        else:
            mark = "local" if e.local else ("hub" if e.tag else "no weights")  # where its weights come from
            print(f"{e.name:<70} {e.family or '-':<9} {mark}")  # '-': a model folder of no timm family
    if not args.json:
        print(counted(len(entries), "model"), file=sys.stderr)
    return EXIT_OK
