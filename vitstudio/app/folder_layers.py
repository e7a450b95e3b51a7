"""The Folder tab's Layers page: a k-fold linear probe on each block's feature of the folder's images (which layer
separates its classes best). Its job is module-level, every input passed explicitly; the core is imported when it
runs, and FEATURE_NOTE (what a block's feature is, in words) when first asked (PEP 562's module `__getattr__`)."""

from __future__ import annotations


def __getattr__(name: str):
    if name == "FEATURE_NOTE":
        from vitstudio.core.folder.layer_cache import FEATURE_NOTE

        return FEATURE_NOTE
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def probes_job(cancel, model, folder: str):
    """Yields progress; returns the LayerProbes of every block of `model` on the class folders of `folder`."""
    from vitstudio.core.train.layer_probes import probe_layers

    return (yield from probe_layers(model, folder, cancel=cancel))
