# Two commands set up a fresh machine (Python 3.11 and nothing else of ours):
#   make serve   set up, verify if the report is missing or stale, build and serve the site on 127.0.0.1:8000
#   make test    set up, check the knowledge base, run every verifier, run the tests of the tool
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed-stamp
JOBS    ?= 2
ADDR    ?= 127.0.0.1:8000

.PHONY: setup check verify site serve test tests oracles bench gpu-check clean mutants

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

check: setup
	$(BIN)/mianjing check

verify: setup
	$(BIN)/mianjing verify -j $(JOBS)

site: setup
	$(BIN)/mianjing site build --strict

serve: setup
	$(BIN)/mianjing site serve --addr $(ADDR)

tests: setup
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -n $(JOBS) --dist loadfile

# `make test` (and so CI) reruns every verifier (--all); `make verify` reuses the results whose inputs
# did not change (mianjing verify is incremental).
test: setup
	$(BIN)/mianjing check
	$(BIN)/mianjing verify --all -j $(JOBS)
	$(BIN)/python -m pytest tests -q -p no:cacheprovider -n $(JOBS) --dist loadfile

# The project's fault-injection suite (not part of `make test`: about a quarter of an hour on 2 cores).
# Each mutant of mutants/*.py runs alone in a scratch copy; report in build/mutants.json.
mutants: setup
	$(BIN)/mianjing mutants -j $(JOBS)

# On a CUDA machine: every Triton kernel's correctness checks and benchmarks (< 8 min), results in
# benchmarks/results/*-cuda.json, then the kernel claims' verifiers on the GPU. Refuses on a machine without CUDA.
KERNEL_CLAIMS := kernels.softmax-needs-two-passes kernels.online-softmax.matches-two-pass kernels.naive-logprob-memory \
	kernels.fused-logprob.memory-bounded kernels.fused-logprob.grad-exact kernels.fused-logprob.recompute-cost \
	kernels.flash-attention-triton.equals-naive gae.triton-kernel.matches-oracle \
	gpu.cuda-graph.saves-cpu-dispatch gpu.cuda-graph.kernels-faster \
	gemm.triton-kernel.matches-fp64 softmax.triton-kernels.match-fp64 reduce.triton-kernel.matches-fp64 \
	norms.triton-kernels.match-fp64 transpose.triton-kernel.exact
gpu-check: setup
	@$(BIN)/python benchmarks/gpu_check.py
	MIANJING_MAX_EXAMPLES=20 $(BIN)/mianjing verify --all --device cuda $(KERNEL_CLAIMS)

# Optional: cross-check impls/rl against verl, TRL and OpenRLHF in a separate venv (CPU torch only).
ORACLES := .venv-oracles
oracles:
	test -x $(ORACLES)/bin/python || $(PY) -m venv $(ORACLES)
	$(ORACLES)/bin/pip install -q torch==2.13.0 numpy pytest pytest-timeout hypothesis pydantic
	$(ORACLES)/bin/pip install -q --no-deps verl==0.9.1 tensordict==0.10.0 trl==1.16.0 openrlhf==0.11.2
	$(ORACLES)/bin/pip install -q "pyvers>=0.1,<0.2" cloudpickle orjson importlib_metadata omegaconf codetiming transformers accelerate datasets torch==2.13.0
	PYTHONPATH=. $(ORACLES)/bin/python -m pytest tests/oracles -q -o addopts=""

clean:
	rm -rf build site
