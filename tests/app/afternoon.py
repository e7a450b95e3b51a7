"""An afternoon's path through the app's model, driven by a script with no QApplication (issue 48): load the demo,
open a folder, filter and label on the map, fit the quick head, learn concepts, switch the model (every
model-derived result dropped), start and cancel a quick training run. `python -m tests.app.afternoon FOLDER OUT`
prints what it saw as JSON (tests/app/test_afternoon.py runs it in a fresh process)."""

from __future__ import annotations

import json
import sys


def afternoon(folder: str, runs: str, other_model: str) -> dict:
    from vitstudio.app.app import App
    from vitstudio.app.jobs import ScriptRunner
    from vitstudio.core.models.demo import bundled_demo

    seen: dict = {}
    app = App(ScriptRunner())  # the composition root a script drives: the window draws the same App
    errors = []
    app.state.error.connect(errors.append)
    app.load_model(str(bundled_demo()))
    seen["demo"] = app.model.display_name

    browse, labels, concepts = app.folder, app.labels, app.pages["concepts"]
    browse.open_paths([folder])
    results = browse.results
    seen["images"], seen["map"] = len(results), list(browse.coords.shape)
    seen["fit"] = browse.fit is not None
    browse.select(5)  # a row picked: the image of every view (the explorers', Match's, the Paint page's)
    seen["selected_everywhere"] = {app.state.selected.path, app.match.path_a,
                                   app.pages["paint"].image} == {results.paths[5]}
    browse.state.predicted = "3"  # the table's filter: one predicted class
    seen["filtered_all_threes"] = bool(len(browse.rows)) and all(
        results.predicted_label(r) == "3" for r in browse.rows)
    browse.reset_filters()
    browse.move_box(*browse.box)  # a drag of the map's box: the table follows it
    in_box = browse.rows_in_box()
    seen["follows_box"] = browse.state.follow_map and browse.rows.tolist() == in_box.tolist()
    labels.apply({results.paths[r]: results.given[r] for r in in_box})  # label what the box holds, by folder
    seen["labelled"], seen["classes"] = len(labels.labels), len(labels.classes())
    labels.train()
    seen["head"] = labels.head is not None and len(labels.head.predicted) == len(results)
    labels.suggest_next(4)
    seen["suggested"] = len(browse.group_rows)

    concepts.settings_state.update(size=32, k=4, epochs=2, tokens_per_step=256)
    seen["learn_refused"] = concepts.start()
    seen["concepts"] = concepts.concepts.size if concepts.concepts is not None else None

    app.load_model(other_model)  # another image tower: nothing of the demo's stays
    seen["after_switch"] = {
        "results": browse.results, "coords": browse.coords, "fit": browse.fit, "rows": len(browse.rows),
        "head": labels.head, "concepts": concepts.concepts, "curve": len(concepts.curve),
        "offers_reopen": browse.reopen, "follows_box": browse.state.follow_map, "box": browse.box}
    seen["after_switch"] = {k: v if isinstance(v, bool | int) else v is not None
                            for k, v in seen["after_switch"].items()}

    from vitstudio.core.train.recipes import make_config

    app.load_model(str(bundled_demo()))
    hold = app.runner
    hold.hold = True  # the run is stepped: the script acts while it is under way
    trainer = app.training
    records, reports = [], []
    trainer.record.connect(records.append)
    trainer.finished.connect(reports.append)
    job = trainer.start(make_config(folder, app.model.name, f"{runs}/quick", "quick"))
    while not records and hold.step(job):  # under way: its first record
        pass
    trainer.cancel()
    hold.run()
    seen["records_before_cancel"] = len(records)
    seen["report"] = type(reports[0]).__name__ if reports else None
    seen["status"] = reports[0].status if reports else None
    seen["running"] = trainer.running
    seen["errors"] = [n.message for n in errors]
    seen["qt"] = sorted(m for m in sys.modules if m.split(".")[0] in ("PySide6", "shiboken6", "pyqtgraph"))
    return seen


if __name__ == "__main__":
    print(json.dumps(afternoon(*sys.argv[1:4])))
