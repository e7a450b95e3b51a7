"""The joins between panels: what one tab hands to another (a review's fixes to Training, a run to the model bar,
a concept to the Attention tab). One object owned by the window, so each route is a method, not a closure."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

BACK = "back to the replaced model"  # the notice's action after a run's model replaced the one loaded


class PanelRoutes(QObject):
    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        folder, training = window.folder, window.training
        folder.open_in_explorer.connect(window.explain_file)
        folder.opened_here.connect(window.remember_recent)
        window.app.pages["review"].retrain_requested.connect(self.retrain_with_fixes)
        window.app.pages["labels"].train_requested.connect(self.train_on_labels)
        folder.folder_export.train_requested.connect(self.train_on_labels)  # an export's "Train on them"
        window.app.pages["concepts"].attention_requested.connect(self.show_concept)
        training.use_model.connect(self.use_trained_model)
        training.export_requested.connect(self.export_run)
        training.explore_image.connect(self.explain_with_run)
        training.run_ended.connect(self.list_new_runs)
        window.notice.acted.connect(self.on_notice_link)
        self._paint_over_attention(window)
        self.replaced = None  # the ModelRequest of the model a run's model replaced, for "Back to …"

    @staticmethod
    def _paint_over_attention(window) -> None:
        """The Folder tab's Paint page → its segmentation of the Attention tab's image (a toggle there)."""
        window.attention.paint_segmentation.attach(window.app.paint_overlay)

    def retrain_with_fixes(self, folder: str, excluded: list) -> None:
        """The folder view's label review → the Training panel, set up for that dataset minus the exclusions."""
        self.window.training.set_dataset(folder, exclude=excluded)
        self.window.show_tab("training")

    def train_on_labels(self, labels_file: str) -> None:
        """The Folder tab's labels → the Training tab, with the labels file as its dataset."""
        self.window.training.set_dataset(labels_file)
        self.window.show_tab("training")

    def show_concept(self, concepts: str, concept: int) -> None:
        """The Concepts page's concept → the Attention tab's concept map of the current image."""
        self.window.attention.view_state.update(method="concept", concepts=concepts, concept=concept)
        self.window.show_tab("attention")

    def explain_with_run(self, path: str, run: str) -> None:
        """A run's misclassified image is explained by that run's model: the mistake is that model's, and another
        would explain a mistake it may not make. So the switch is made, not asked, but said where the user looks,
        with a link back to the model it replaced."""
        from vitstudio.app.app_state import ModelRequest

        from .window_jobs import is_model_of

        window = self.window
        before, asked = window.state.model, window.state.view.requested
        if run and before is not None and not is_model_of(before, run):
            same = asked is not None and asked.spec == before.name
            self.replaced = asked if same else ModelRequest(before.name, None, None, None, 0)
            window.show_notice(f"{Path(path).name} is explained by the model that misclassified it, run "
                               f"{Path(run).name}, loaded in place of {before.display_name}.",
                               link=f"Back to {before.display_name}", action=BACK)
        window.explore_image(path, run)

    def on_notice_link(self, action: str) -> None:
        if action == BACK and self.replaced is not None:
            request, self.replaced = self.replaced, None
            self.window.request_model(request.spec, request.device, request.precision, request.weights)

    def export_run(self, folder: str) -> None:
        from .actions import export_model
        from .model_export_dialog import choose_model_export

        fmt, path = choose_model_export(self.window, Path(folder).name)
        if path:
            export_model(self.window, fmt, path, spec=folder)

    def use_trained_model(self, folder: str) -> None:
        self.window.request_model(folder)
        self.window.show_tab("predictions")

    def list_new_runs(self, _finished: bool) -> None:
        """A run that ended (finished, cancelled or failed with epochs kept) in every list of models at once: the
        model bar, the Training tab's base model and Compare's second model (it was listed after a restart only)."""
        from .common.model_marks import list_beside_the_demo

        window = self.window
        new = window.model_panel.list_new_local_models()
        if new:
            marks = window.model_panel.catalog_marks()
            list_beside_the_demo(window.training.dataset.base_model, new, marks)
            list_beside_the_demo(window.compare.other_name, new, marks)
