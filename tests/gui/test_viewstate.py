"""The view state announces consistent changes and keys results by their request (no Qt needed)."""

from vitstudio.gui.viewstate import Keyed, ViewState


def test_update_is_atomic_then_announced_per_field():
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
