# Two entry points that work on a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# three test processes on two cores, one torch thread each (tests/conftest.py), a test file per process at a time
# (module fixtures are built once). Measured here, whole suite: 187 s with -n 3 (2026-12-04, once closed windows were
# freed; 351-415 s before), 437-489 s with -n 2 and 391 s with -n 4 then, 1,060 s in one process (many tests wait on
# subprocesses, timers and sockets); PYTEST_WORKERS= runs in one
PYTEST_WORKERS ?= -n 3 --dist loadfile

.PHONY: run test bench clean

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,cluster]'
	# the reference SAE library of tests/core/test_concepts.py and tests/benchmarks/concepts.py, without its
	# dependencies: overcomplete 0.3.0 requires opencv-python (its Qt plugins clash with PySide6; the headless
	# build we ship gives it cv2) and the tests import its sae package without its broken __init__
	$(BIN)/python -m pip install --quiet --no-deps 'overcomplete==0.3.0'
	# lxt, the AttnLRP authors' library that tests/core/test_lxt_relevance.py checks our LRP against, without its
	# dependencies: the test loads its rule files (torch only); lxt 2.1 requires bitsandbytes and zennit, and with
	# bitsandbytes installed transformers tries to fetch CPU kernels from the hub at import
	$(BIN)/python -m pip install --quiet --no-deps 'lxt==2.1'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/python main.py $(ARGS)

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen HF_HUB_OFFLINE=1 $(BIN)/python -m pytest -q $(PYTEST_WORKERS) --durations=25 $(PYTEST_ARGS)

bench: $(STAMP)
	$(BIN)/python tests/benchmarks/predict.py

clean:
	rm -rf $(VENV) build *.egg-info
