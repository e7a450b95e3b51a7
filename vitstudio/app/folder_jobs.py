"""The Folder model's jobs: module-level, every input passed explicitly, run by whichever runner the face gives
`KeyedJobs` (the window's pools, or a script's own thread). The core is imported inside each job: the app layer
loads no torch until a job runs."""

from __future__ import annotations

# what each job's result depends on besides the model: the paths opened
KEYS = {"scan": ("paths",), "map": ("paths",), "review": ("paths",), "similar": ("paths",), "fit": ("paths",),
        "scores": ("paths",)}


def scan_job(cancel, model, paths: list[str], roots: list[str], cluster: str | None = None):
    """The folder through the model (cached); `cluster`: its model pass on the Ray cluster at that address ("":
    RAY_ADDRESS or a local instance), the results and the cache here, as one process makes them."""
    from vitstudio.core.folder.embedcache import embed_folder
    from vitstudio.core.folder.results import folder_results

    if cluster is None:
        embedded = yield from embed_folder(model, paths, cancel=cancel)
    else:
        from vitstudio.core.folder.ray_cluster import on_cluster

        with on_cluster(cluster or None):  # the passes of this job's context run there
            embedded = yield from embed_folder(model, paths, cancel=cancel)
    results = folder_results(embedded, roots)  # 100k rows: built here, not on the GUI thread
    results.name_rank, results.given_codes  # noqa: B018 (the table's first order and the labels as ints: here too)
    return embedded, results


def fit_job(cancel, model, embedded, results):
    """Out-of-distribution flags of the folder (from the cached features) and its folders vs the model's classes."""
    from vitstudio.core.folder.model_fit import folder_fit

    return folder_fit(model, embedded, results, cancel)  # stops between blocks once discarded (a closed window)


def scores_job(cancel, model, embedded, paths: list[str]):
    """The brain's four scores of the folder embedded (`vitstudio scores`'s core function and result cache)."""
    from vitstudio.core.folder.scores import embedded_scores

    return (yield from embedded_scores(model, embedded, paths, cancel))  # stops between blocks once discarded


def map_job(cancel, embedded):
    from vitstudio.core.folder.neighbours import project_2d

    return project_2d(embedded.view())


def similar_job(cancel, embedded, row: int):
    from vitstudio.core.folder.neighbours import nearest

    found = nearest(embedded.features, [row], k=12, rows=embedded.rows)
    return [(embedded.paths[i], float(s)) for i, s in zip(found.indices[0], found.similarities[0])]


def review_job(cancel, folder: str, model, threshold: float | None, labels: dict[str, str]):
    from vitstudio.core.folder.audit import audit

    return audit(folder, model, threshold, cancel=cancel, given_apart=labels)
