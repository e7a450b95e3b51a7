"""What tests/conftest.py promises every test process, whether it runs alone or as a pytest-xdist worker."""

from __future__ import annotations


def test_every_test_process_runs_blas_and_torch_on_one_thread():
    """numpy's OpenBLAS and torch each use one thread in the test process itself: OpenBLAS reads OMP_NUM_THREADS
    once, when numpy loads, so the variable must be set before anything imports numpy (set after it, a process run
    without -n kept two BLAS threads, and a small SVD took ~20x the CPU on a loaded 2-core machine)."""
    import torch
    from threadpoolctl import threadpool_info

    blas = [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"]
    assert blas and set(blas) == {1}, threadpool_info()
    assert torch.get_num_threads() == 1
