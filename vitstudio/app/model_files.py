"""Where models come from and go, asked by the views: the user's models folder and the folders searched, the local
models and the catalog offered, the bundled demo and its sample images, a run's folder and its base model, loading a
second model, and the exports of a loaded one (the seed format, ONNX). The core's torch-heavy modules are imported
when a view first asks (PEP 562's module `__getattr__`): this module imports without torch."""

from __future__ import annotations

from vitstudio.core.models.demo import DEMO_TITLE, bundled_demo, sample_images

# and, imported when first asked: base_model, export_onnx, export_seed, list_catalog, load_model,
# local_folder, local_models, model_dirs, models_dir
__all__ = ["DEMO_TITLE", "bundled_demo", "sample_images"]


def __getattr__(name: str):
    if name in ("models_dir", "model_dirs", "local_models", "list_catalog"):
        from vitstudio.core.models import catalog

        return getattr(catalog, name)
    if name in ("load_model", "local_folder"):
        from vitstudio.core.models import loading

        return getattr(loading, name)
    if name == "base_model":
        from vitstudio.core.models.run_record import base_model

        return base_model
    if name == "export_seed":
        from vitstudio.core.models.seed_export import export_seed

        return export_seed
    if name == "export_onnx":
        from vitstudio.core.models.onnx_export import export_onnx

        return export_onnx
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
