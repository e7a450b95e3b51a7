"""The Folder tab's Concepts page model (app/pages/concepts.py), without Qt: it learns on the folder the Folder model
opened, follows the folder and the model (another model's concepts and learning curve go), opens what was learned
before on a folder again, and asks for the Attention tab through its own event."""

from __future__ import annotations

from vitstudio.app.app import App
from vitstudio.app.jobs import ScriptRunner
from vitstudio.app.pages import page_entries
from vitstudio.core.models.demo import bundled_demo, render_digits

SMALL = dict(size=32, k=4, epochs=2, tokens_per_step=512)


def test_the_concepts_page_learns_on_the_open_folder_and_forgets_with_the_model(tmp_path):
    """The Concepts page is the first Learn page (rank 10) and the App's; it learns on the folder opened, asks for the
    Attention tab with the file and the concept chosen, keeps the model's concepts on another folder, drops them and
    their R² curve on another model (and then asks for nothing), and on the first model and folder again opens what
    was learned there."""
    app = App(ScriptRunner())
    page, opened, asked = app.pages["concepts"], [], []
    assert [e.id for e in page_entries() if e.group == "Learn"][0] == "concepts" and page.title == "Concepts"
    page.opened.connect(opened.append)
    page.attention_requested.connect(lambda file, concept: asked.append((file, concept)))
    app.load_model(str(bundled_demo()))
    first = str(render_digits(tmp_path / "digits", 2))
    app.folder.open_paths([first])
    assert page.state.folder == first and page.concepts is None and page.can_learn()
    page.settings_state.update(**SMALL)
    assert page.start() is None
    learned = page.concepts
    assert learned is not None and opened == [learned] and learned.size == 32 and page.curve
    page.select(3)
    page.show_in_attention()
    assert asked == [(page.state.file, 3)]

    app.folder.open_paths([str(render_digits(tmp_path / "other", 1))])
    assert page.concepts is learned  # the model's concepts, read on any folder
    app.load_model("custom:img=32,patch=8,width=32,depth=2,heads=2,classes=10")
    assert page.concepts is None and page.curve == []
    page.show_in_attention()
    assert len(asked) == 1  # nothing to show: no request

    app.load_model(str(bundled_demo()))
    app.folder.open_paths([first])
    assert page.concepts is not None and page.concepts.size == 32 and page.state.folder == first
