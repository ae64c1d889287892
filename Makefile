# Two entry points on a fresh machine: `make run` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: run test bench conformance clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,plots,bench]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/stdops demo

test: $(STAMP)
	$(BIN)/python -m pytest -n 2 tests

# ONNX node suite through the shared harness (the issue's "must show" command)
conformance: $(STAMP)
	$(BIN)/python ../shared/tools/onnx_conformance.py --backend stdops.onnx:run --listed-only --quiet

bench: $(STAMP)
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/run.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench_ncnn.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench_mdf.py

clean:
	rm -rf $(VENV) build *.egg-info
