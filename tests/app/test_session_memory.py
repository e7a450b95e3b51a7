"""What the app remembers between sessions, without Qt: declared groups of state fields (the Training form, its base
model and dataset, the Folder tab's folder and per-folder filters) go to the store and come back into the states."""

from __future__ import annotations

from vitstudio.app.app_state import AppState
from vitstudio.app.evented import Field, ViewState
from vitstudio.app.folder_model import FolderModel
from vitstudio.app.folder_states import offered_classes
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.session_memory import SessionMemory
from vitstudio.app.training_states import TrainingState
from vitstudio.core.fields import Range
from vitstudio.core.records import SettingsStore


def _session(store_path, opened: list):
    form = ViewState(preset=Field("quick", str, choices=("quick", "full")), advanced=Field(False, bool),
                     epochs=Field(10, int, range=Range(1, 100)), lr=Field(0.001, float, range=Range(0.0, 1.0)))
    training, folder = TrainingState(), FolderModel(AppState(), ScriptRunner())
    memory = SessionMemory(SettingsStore(store_path), form, training, folder, open_dataset=opened.append)
    memory.follow()
    return form, training, folder, memory


def test_fields_are_remembered_and_restored_one_at_a_time(tmp_path):
    """The form's preset, settings and Advanced switch, the base model, the dataset (opened through the face's callback)
    and the folder (opened with the first model) come back in a new session; a value another version wrote outside a
    field's range leaves that field and the others are restored.
    """
    store, opened = tmp_path / "settings.json", []
    form, training, folder, _ = _session(store, opened)
    form.update(preset="full", epochs=42, advanced=True)
    training.update(base_model="my-vit", dataset=str(tmp_path))
    folder.folder = str(tmp_path)
    folder.state.update(paths=(str(tmp_path),))  # as a scan does: the folder opened is remembered
    form2, training2, folder2, _ = _session(store, opened2 := [])
    assert (form2.preset, form2.epochs, form2.advanced, training2.base_model) == ("full", 42, True, "my-vit")
    assert opened2 == [str(tmp_path)] and folder2.waiting_paths == [str(tmp_path)]  # opens with the first model
    # a value another version wrote (out of this range) leaves its field alone; the others come back
    SettingsStore(store).set("training_form", {"preset": "full", "values": {"epochs": 1000, "lr": 0.5}})
    form3, *_ = _session(store, [])
    assert (form3.epochs, form3.lr) == (10, 0.5)


def test_a_folders_filters_come_back_with_its_results_and_a_lost_class_is_dropped(tmp_path):
    """A folder's filters wait for its results and are restored then; a remembered predicted class the new results lack
    goes back to all classes.
    """
    store = tmp_path / "settings.json"
    _, _, folder, _ = _session(store, [])
    folder.folder = str(tmp_path)
    folder.state.update(paths=(str(tmp_path),))
    folder.state.redeclare("predicted", **offered_classes(["3", "7"]))
    folder.state.update(predicted="7", min_conf=0.5)
    _, _, again, _ = _session(store, [])
    again.folder = str(tmp_path)
    again.state.update(paths=(str(tmp_path),))  # reopened: its filters wait for its results
    assert again.state.min_conf == 0.0
    again.state.redeclare("predicted", **offered_classes(["3"]))  # the new results predict no 7
    again.results_changed.emit(object())
    assert (again.state.predicted, again.state.min_conf) == (None, 0.5)
