# HVCU toolkit. `make demo` sets up .venv and runs the main job offline; `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= .demo

.PHONY: setup browser demo test lint unit constraints clean

setup: $(VENV)/.installed

# torch/torchvision first, as a pair, so pip takes the builds this machine has on disk.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,train]"
	touch $@

# The main job, offline: the real lmms-eval CLI on the bundled smoke sample with a tiny random model,
# both settings in one run (hvcu_context passes base requests straight to qwen2_5_vl, batches context rounds).
demo: setup
	rm -rf $(DEMO)/runs
	$(BIN)/hvcu tiny-model $(DEMO)/tiny-qwen2_5_vl
	$(BIN)/lmms-eval --model hvcu_context \
	  --model_args inner=qwen2_5_vl,pretrained=$(DEMO)/tiny-qwen2_5_vl,device=cpu,device_map=cpu \
	  --batch_size 8 --tasks hvcu_bench_sample,hvcu_bench_context_sample --output_path $(DEMO)/runs --log_samples
	@test -n "$$(find $(DEMO)/runs -name '*_results.json')" || { echo "lmms-eval wrote no results: see the log above"; exit 1; }
	@echo
	@echo "Results: $$(find $(DEMO)/runs -name '*_results.json')"
	@echo "That was a SMOKE SAMPLE and a random tiny model: the numbers mean nothing. For real use (GPU + hub):"
	@echo "  lmms-eval --model vllm --model_args model=Qwen/Qwen3-VL-8B-Instruct,tensor_parallel_size=1 \\"
	@echo "    --tasks hvcu_bench,hvcu_bench_context --output_path runs/ --log_samples"
	@echo "  lmms-eval --model hvcu_context --model_args inner=openai,model_version=gpt-4o,base_url=https://api.openai.com/v1 \\"
	@echo "    --tasks hvcu_bench,hvcu_bench_context --output_path runs/ --log_samples"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

unit: setup
	$(BIN)/python -m pytest -q -m "not slow"

# Headless Chromium for the leaderboard-page test (Debian package; needs root, as on CI).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# Everything CI runs: lint, then the whole suite including the slow end-to-end lmms-eval runs.
test: lint browser
	$(BIN)/python -m pytest -q

# Refresh the pins from the current .venv (after installing a new set into it by hand).
constraints:
	{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^hvcu'; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(DEMO) .pytest_cache .ruff_cache .hypothesis
