"""The core's modules behind the views' jobs and maps, imported at once with torch and timm on the window's worker
(gui/startup.import_heavy): the app layer imports them inside its jobs, so by a first job or a first colormap they
would load then (matplotlib on the GUI thread at the first map drawn) and miss the collector's freeze of what lives
until exit."""

from __future__ import annotations


def import_job_modules() -> None:
    from vitstudio.core.analysis import (  # noqa: F401
        attention_views,
        explain,
        faithfulness,
        faithfulness_sanity,
        overlays,
    )
    from vitstudio.core.folder import results  # noqa: F401
