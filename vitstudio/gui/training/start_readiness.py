"""Whether the Training panel can start a run now, and if not why, in words: the disabled Start button's tooltip.
Checked on every change of the form, the dataset, the base model and the run name, so Start is never enabled
for a run that would fail at once (no dataset, an unreadable one, no model, a taken run name, a setting out of
range)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from vitstudio.app.model_files import models_dir

NO_DATASET = "Choose a dataset folder first (Browse…, or drop one on this tab)."
SCANNING = "Scanning the dataset folder…"


def start_blocker(running: bool, dataset_problem: str, model: str, run_name: str,
                  build_config: Callable, plan_problem: str = "") -> str:
    """"" when a run can start; else the first reason it cannot. `build_config()` makes the run's TrainConfig
    (a ValueError names a setting typed wrongly); `plan_problem`: a setting only the model can check (an adapter
    target it lacks), found by planning the run's memory."""
    if running:
        return "A run is in progress: one run at a time (pause or cancel it first)."
    if dataset_problem:
        return dataset_problem
    if not model:
        return "Choose a base model (from the list, a model folder, or a timm name)."
    problem = run_name_problem(run_name)
    if problem:
        return problem
    try:
        build_config().validate()
    except ValueError as exc:
        return str(exc)
    return plan_problem


def run_name_problem(name: str) -> str:
    """Why `name` cannot name a new run folder ("" when it can; a blank name gets a fresh one at Start)."""
    if any(sep in name for sep in ("/", "\\")) or name.strip() in (".", ".."):
        return "A run name cannot contain / or \\ (it names one folder)."
    if name.strip() and (models_dir() / name.strip()).exists():
        return f"A run named {name.strip()} already exists in {models_dir()}: choose another name."
    return ""


def fresh_run_name(data_dir: str | Path, preset: str) -> str:
    """DATASET-PRESET-MMDD-HHMM, with -2, -3, … when that name is taken in the models folder."""
    stem = f"{Path(data_dir).name or 'run'}-{preset}-{time.strftime('%m%d-%H%M')}"
    name, n = stem, 1
    while (models_dir() / name).exists():
        n += 1
        name = f"{stem}-{n}"
    return name
