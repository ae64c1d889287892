# Two entry points on a fresh machine: `make run` and `make test` (see README.md).
# Both install the exact tested set from constraints.txt; `make test-latest` installs what the registry
# serves today (in .venv-latest) to find the next breakage before users do.
PYTHON  ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
EXTRAS  := test,plots,bench,distributed,dev,fast
LATEST  := .venv-latest

.PHONY: run test lint test-latest constraints bench zoo conformance fuzz fuzz-ncnn corpus clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml constraints.txt
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/stdops demo

lint: $(STAMP)
	$(BIN)/ruff check stdops tests benchmarks scripts
	$(BIN)/ruff format --check stdops tests benchmarks scripts
	$(BIN)/mypy

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 tests

# Not in CI: the newest releases the package's own ranges allow, in a venv of their own.
test-latest:
	rm -rf $(LATEST)
	$(PYTHON) -m venv $(LATEST)
	$(LATEST)/bin/python -m pip install --quiet --upgrade pip
	$(LATEST)/bin/python -m pip install --quiet -e '.[$(EXTRAS)]'
	grep -v '^#' constraints.txt | sort > $(LATEST)/constraints.sorted
	$(LATEST)/bin/python -m pip freeze --exclude-editable | sort | diff $(LATEST)/constraints.sorted - | grep '^[<>]' || echo 'the newest releases are the pinned ones'
	$(LATEST)/bin/python -m pytest -n 2 tests

# Rewrite constraints.txt from the current .venv (after a green `make test`).
constraints: $(STAMP)
	{ sed -n '1,3p' constraints.txt; $(BIN)/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

# ONNX node suite through the shared harness (the issue's "must show" command)
conformance: $(STAMP)
	$(BIN)/python ../shared/tools/onnx_conformance.py --backend stdops.onnx:run --listed-only --quiet

# Not in CI: the ncnn param-space fuzzer against the wheel, >= 200 cases per layer, a seed of the run's own
SEED  ?= $(shell date +%s)
CASES ?= 200
fuzz-ncnn: $(STAMP)
	$(BIN)/python -m tests.ncnn.fuzz --seed $(SEED) --cases $(CASES)

# The zoo (torchvision/timm networks with random weights, exported to ONNX and ncnn) in its own venv:
# torch and pnnx never enter .venv. `make bench` runs without it too (built-in networks only).
zoo:
	$(PYTHON) scripts/make_zoo.py setup
	.venv-zoo/bin/python scripts/make_zoo.py export

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_startup.py
	-$(BIN)/python scripts/make_zoo.py verify
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench_zoo.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench_mdf.py
	env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $(BIN)/python benchmarks/bench_pnl.py
	$(BIN)/python benchmarks/bench_sweep.py

# The MDF producers' corpus (tests/mdf/corpus): PsyNeuLink and modeci-mdf in venvs of their own
corpus:
	$(PYTHON) scripts/make_mdf_corpus.py

# Not in CI: the hostile-file suite's generators for SECONDS seconds from seed SEED (tests/hostile/fuzz.py;
# SEED defaults to the time, as for fuzz-ncnn, and is printed first); prints files per format, crashes, hangs,
# non-StdopsError exceptions and peak memory; fails on any misbehaviour.
SECONDS ?= 600
fuzz: $(STAMP)
	$(BIN)/python -m tests.hostile.fuzz --seconds $(SECONDS) --seed $(SEED)

clean:
	rm -rf $(VENV) $(LATEST) build *.egg-info
