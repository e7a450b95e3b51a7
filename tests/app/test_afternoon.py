"""The afternoon's path through the app's model in a process of its own that never imports Qt
(tests/app/afternoon.py), every step checked against what it must leave behind."""

from __future__ import annotations

import json

from tests.conftest import TINY_SPEC


def test_an_afternoon_without_a_window(tmp_path, forked_cli):
    """Load the demo through the request path, open a folder (scan, map, fit), filter by a class, follow the map's box,
    label what it holds, fit the quick head, suggest 4, learn and open concepts; switching to another model drops
    results, map, box (and "follow the box"), fit, rows, head and concepts and offers the folder again; a quick run
    stepped to its first record and cancelled returns a `cancelled` report; no Qt module loaded, no error reported.
    """
    from vitstudio.core.models.demo import render_digits

    folder = render_digits(tmp_path / "digits", per_class=4)
    # a process of its own, forked from one that imported torch and timm but never Qt (tests/core/forked_cli.py)
    out = forked_cli.python(["-m", "tests.app.afternoon", str(folder), str(tmp_path / "runs"), TINY_SPEC])
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["qt"] == [] and seen["errors"] == []  # no Qt module was ever imported, nothing went wrong
    assert seen["images"] == 40 and seen["map"] == [40, 2] and seen["fit"]  # scanned, mapped, judged
    assert seen["selected_everywhere"]  # a row picked is the image every view shows
    assert seen["filtered_all_threes"] and seen["follows_box"]  # a filter, then the map's box, leave their rows
    assert seen["labelled"] > 0 and seen["head"] and seen["suggested"] == 4  # labelled on the map, head fitted
    assert seen["learn_refused"] is None and seen["concepts"] == 32  # learned and opened
    # another model: every result of the demo's is gone, the box with its map, and the folder is offered again
    assert seen["after_switch"] == {"results": False, "coords": False, "fit": False, "rows": 0, "head": False,
                                    "concepts": False, "curve": 0, "offers_reopen": True, "follows_box": False,
                                    "box": False}
    # a quick run under way, cancelled: it stops and still hands back its report
    assert seen["records_before_cancel"] >= 1 and seen["report"] == "TrainResult"
    assert seen["status"] == "cancelled" and not seen["running"]
