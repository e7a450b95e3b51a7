"""The analyses the views offer, named for them: the core's one registry of analyses (every face reads it: lists,
parameter forms, applicability), the maps Play and Teach draw live, why an analysis does not apply to a model, the
attention masks' share and the export of a shown result. Torch-free at import, as the registry is."""

from __future__ import annotations

from vitstudio.core.analysis import registry
from vitstudio.core.analysis.export import write_result
from vitstudio.core.analysis.masks import DEFAULT_SHARE, MaskExport, mass_mask
from vitstudio.core.play import play_methods

__all__ = ["DEFAULT_SHARE", "MaskExport", "mass_mask", "play_methods", "registry", "why_not", "write_result"]


def why_not(module, method: str) -> str | None:
    """None when the analysis `method` applies to the network `module` (a LoadedModel's `.model`), else one sentence
    saying why it does not (the registry entry's checks)."""
    return registry.get(method).why_not(module)
