"""The app model's evented state announces consistent changes, keys results by their request and announces what a
field accepts (no Qt)."""

import pytest

from vitstudio.app.evented import Field, Keyed, ViewState


def test_update_is_atomic_then_announced_per_field():
    """`update` returns changed fields, every listener sees the whole update, no event without a change, unknown fields
    raise.
    """
    state = ViewState(model=None, image=None, layer=0, head=0)
    seen = []
    state.connect(lambda name, value: seen.append((name, value, state.model, state.layer)))
    assert state.update(model=7, layer=11, head=0) == ["model", "layer"]
    # every listener call already sees the whole update
    assert seen == [("model", 7, 7, 11), ("layer", 11, 7, 11)]
    state.layer = 11
    assert len(seen) == 2  # no event without a change
    try:
        state.update(nonsense=1)
    except AttributeError as exc:
        assert "nonsense" in str(exc)
    else:
        raise AssertionError("unknown fields must be refused")


def test_results_answer_only_their_request():
    """A Keyed result stays current across display-only changes and is dropped when its key fields or the model change.
    """
    state = ViewState(model=1, image=5, fusion="mean", layer=3)
    result = Keyed(state.request("fusion"), "overview of model 1")
    assert state.current(result, "fusion") == "overview of model 1"
    state.layer = 2  # display-only fields do not invalidate it
    assert state.current(result, "fusion") == "overview of model 1"
    state.fusion = "max"
    assert state.current(result, "fusion") is None
    state.update(fusion="mean", model=2)  # another model: the old result is never shown for it
    assert state.current(result, "fusion") is None
    assert state.current(None, "fusion") is None


def test_fields_are_typed_and_validated_before_anything_changes():
    """Wrong type/range/choice raises naming the field and applies nothing; numpy ints, 0 and lists are coerced to
    int/float/tuple.
    """
    from vitstudio.app.evented import Field
    from vitstudio.core.fields import Range

    state = ViewState(model=Field(None, int), layer=0, discard=Field(0.0, float, range=Range(0, 1, hi_open=True)),
                      fusion=Field("mean", str, choices=("mean", "max", "min")), patch=Field(None, tuple))
    seen = []
    state.connect(lambda name, value: seen.append(name))
    for bad in (dict(layer="3"), dict(layer=True), dict(discard=1.5), dict(fusion="median"), dict(model="x")):
        try:
            state.update(**{"model": 4, **bad})
        except (TypeError, ValueError) as exc:
            assert next(iter(bad)) in str(exc)
        else:
            raise AssertionError(f"{bad} must be refused")
    assert seen == [] and state.model is None  # a refused update changes nothing, not even its valid fields
    import numpy as np

    state.update(layer=np.int64(2), discard=0, patch=[1, 2], model=None)
    assert (type(state.layer), type(state.discard), state.patch) == (int, float, (1, 2))


def test_batch_applies_once_and_announces_each_field_once():
    """A batch shows nothing until it ends, then announces each field once with final values; a failed batch applies
    nothing.
    """
    state = ViewState(model=None, image=None, layer=0, head=0)
    seen = []
    state.connect(lambda name, value: seen.append((name, value, state.layer, state.head)))
    with state.batch():
        state.layer = 3
        state.head = 1
        state.layer = 5
        assert seen == [] and state.layer == 0  # nothing visible until the batch ends
    assert seen == [("layer", 5, 5, 1), ("head", 1, 5, 1)]
    try:
        with state.batch():
            state.layer = 9
            raise RuntimeError("abandoned")
    except RuntimeError:
        pass
    assert state.layer == 5 and len(seen) == 2  # a failed batch applies nothing


def test_a_new_spec_is_announced_and_applies_with_the_batch_that_uses_it():
    """A model switch declares the new depth and sets the new layer in one update: the control hears the new range
    before the value, no listener sees the old model with a layer the new one does not have.

    `redeclare` in a batch checks the batch's writes against the new range, announces the spec before the value, with
    model and layer already consistent; a value the new spec refuses goes back to the default; an abandoned batch
    declares nothing.
    """
    from vitstudio.core.fields import Range

    state = ViewState(model=Field(1, int), layer=Field(0, int, range=Range(0, 1)))
    heard = []
    state.spec_events.layer.connect(lambda spec: heard.append(("range", spec.range.hi, state.model, state.layer)))
    state.events.layer.connect(lambda value: heard.append(("layer", value, state.model)))
    with pytest.raises(ValueError, match="layer"):
        state.update(layer=11)  # outside the declared range
    with state.batch():
        state.redeclare("layer", range=Range(0, 11))
        state.update(model=2, layer=11)  # checked against the new range, applied together
    assert heard == [("range", 11, 2, 11), ("layer", 11, 2)]
    state.redeclare("layer", range=Range(0, 3))  # a shallower model: a layer it lacks goes back to the default
    assert state.layer == 0 and heard[-1] == ("layer", 0, 2)
    state.redeclare("layer", range=Range(0, 5))  # still accepted: the value stays, only the spec is announced
    assert state.layer == 0 and heard[-1] == ("range", 5, 2, 0)
    with pytest.raises(ValueError):
        with state.batch():
            state.redeclare("layer", range=Range(0, 1))
            state.update(layer=4)  # refused by the spec declared just before it in the batch
    assert state.fields()["layer"].range == Range(0, 5)  # an abandoned batch declares nothing


def test_choices_carry_labels_and_a_value_set_before_they_change_is_checked_again():
    """Choices carry labels; a value written in a batch before its choices shrink is checked again and falls back to the
    default.
    """
    state = ViewState(target=Field(None, int, choices=(None, 0, 1), labels=("top-1", "0: cat", "1: dog")))
    state.target = 1
    with state.batch():
        state.update(target=1)  # valid for the old classes, not for the new ones: falls back to the default
        state.redeclare("target", choices=(None, 0), labels=("top-1", "0: digit"))
    assert state.target is None and state.fields()["target"].labels == ("top-1", "0: digit")


def test_the_view_fields_are_the_registry_parameters():
    """The Attention view's fields that show an analysis parameter hold that parameter's spec (issue 30, item 3).

    (moved from gui/test_explorers.py, now without Qt) the Attention state's discard and fusion fields are the rollout
    parameter's spec (DISCARD, FUSIONS objects); its directions are the token map's.
    """
    from vitstudio.app.explore_states import AttentionState
    from vitstudio.core import fields
    from vitstudio.core.analysis import registry

    specs = AttentionState().fields()
    assert specs["discard"] == registry.get("rollout").param("discard").spec
    assert specs["discard"].range is fields.DISCARD and specs["fusion"].choices is fields.FUSIONS
    assert set(specs["direction"].choices) <= set(registry.get("token").param("direction").choices)


def test_app_models_declare_their_events_on_the_class_and_each_instance_has_its_own():
    """An EventedModel's events are read off its class (`declared_events`, inherited ones too) and reached as
    `model.x` or `model.events.x` — the same Emitter; two instances never share listeners. No module of the app's
    model builds an Emitter by hand in a constructor: every app model announces through declared events (the
    field events of a ViewState, the Events of an EventedModel)."""
    import pathlib

    from vitstudio.app.evented import Event, EventedModel
    from vitstudio.app.folder_model import FolderModel
    from vitstudio.app.undo import UndoStack

    class Base(EventedModel):
        started = Event("a run started")

    class Child(Base):
        finished = Event("the run's report")
        NESTED = ("undo",)

        def __init__(self):
            self.undo = UndoStack()

    a, b, heard = Child(), Child(), []
    assert list(Child.declared_events()) == ["started", "finished"]
    assert a.events.finished is a.finished and a.finished is not b.finished
    a.finished.connect(heard.append)
    b.finished.emit("b's")
    a.events.finished.emit("a's")
    assert heard == ["a's"] and a.nested()["undo"] is a.undo and a.events.names() == ["started", "finished"]
    assert {"results_changed", "busy", "row_selected"} <= set(FolderModel.declared_events())
    assert set(UndoStack.declared_events()) == {"changed", "refused"}
    app_dir = pathlib.Path(__import__("vitstudio.app", fromlist=["x"]).__file__).parent
    by_hand = [str(p.relative_to(app_dir)) for p in app_dir.rglob("*.py")
               if "= Emitter()" in p.read_text() and p.name != "evented.py"]
    assert by_hand == []
