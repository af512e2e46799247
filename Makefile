# HVCU toolkit. `make demo` sets up .venv and runs the main job offline; `make test` runs every check.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
DEMO   ?= hvcu-demo

.PHONY: setup browser demo test lint unit constraints clean mutation

setup: $(VENV)/.installed

# torch/torchvision first, as a pair, so pip takes the builds this machine has on disk.
$(VENV)/.installed: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet torch==2.14.1 torchvision==0.29.1
	$(BIN)/pip install --quiet -c constraints.txt -e ".[dev,train]"
	touch $@

# The main job, offline: the real lmms-eval CLI on the bundled smoke sample with a tiny random model,
# both settings in one run (hvcu_context passes base requests straight to qwen2_5_vl, batches context rounds),
# then `hvcu report --summary` on that run: the leaderboard site in DEMO/site, and on the terminal one short table
# (the run first, then the best [paper] rows), where the page is and the commands that print every table.
demo: setup
	rm -rf $(DEMO)/runs $(DEMO)/site
	$(BIN)/hvcu tiny-model $(DEMO)/tiny-qwen2_5_vl
	$(BIN)/lmms-eval --model hvcu_context \
	  --model_args inner=qwen2_5_vl,pretrained=$(DEMO)/tiny-qwen2_5_vl,device=cpu,device_map=cpu \
	  --batch_size 8 --tasks hvcu_bench_sample,hvcu_bench_context_sample --output_path $(DEMO)/runs --log_samples
	@test -n "$$(find $(DEMO)/runs -name '*_results.json')" || { echo "lmms-eval wrote no results: see the log above"; exit 1; }
	@echo
	@echo "Results: $$(find $(DEMO)/runs -name '*_results.json')"
	@echo
	$(BIN)/hvcu report $(DEMO)/runs --format html --out $(DEMO)/site --summary
	@echo
	@echo "That was a SMOKE SAMPLE and a random tiny model: the numbers mean nothing. The commands need $(BIN) on"
	@echo "PATH (. $(BIN)/activate). Next:"
	@echo "  offline, end to end:  docs/offline-recipes.md (hvcu mock serve, then synthesis, training, build-bench, evaluation)"
	@echo "  the real benchmark:   lmms-eval --model vllm --model_args model=Qwen/Qwen3-VL-8B-Instruct --batch_size 64 \\"
	@echo "                          --tasks hvcu_bench,hvcu_bench_context --output_path runs/ --log_samples"
	@echo "                        (API backends, reading the results: README.md)"

# The paper's tuning loop (§4.3, App. C/D): chains -> LLaMA-Factory dataset -> LoRA (global batch 128) -> merge ->
# lmms-eval of base and tuned model (HVCU-Bench in both settings + general benchmarks: hvcu_suite) ->
# `hvcu report --compare`. Defaults are the real run (GPUs, hub); finished steps are skipped on a rerun (a run of
# another config is refused: TRAIN_FORCE=1 redoes it), an evaluation is redone when its model's fingerprint changed.
# BASE_MODEL empty = TRAIN_MODEL's shipped base; the base evaluated is the rendered train.yaml's model_name_or_path.
# EVAL_BACKEND empty = TRAIN_MODEL's lmms-eval backend (qwen3_vl_* -> qwen3_vl, llava_next_* -> llava_hf).
# EVAL_BATCH empty = 8 requests per batch, 1 for llava_hf (lmms-eval's llava_hf takes one request at a time).
# DEEPSPEED=z2|z3 uses the shipped ZeRO configs (pip install deepspeed first); none = plain DDP, enough for LoRA.
# One machine only: for several nodes use `hvcu train config --nodes N` and its printed per-node commands.
# Offline smoke run with a tiny model: see docs/training.md and recipe 2 of docs/offline-recipes.md.
BASE_MODEL   ?=
TRAIN_MODEL  ?= qwen3_vl_4b
CHAINS       ?= runs/mcts/chains.jsonl
IMAGE_ROOT   ?= .
COMPOSITION  ?= full-data
SEED         ?= 0
DATASET      ?= hvcu_$(subst -,_,$(COMPOSITION))
GPUS         ?= 8
DEEPSPEED    ?= none
OUT          ?= runs/train-loop
TRAIN_FLAGS  ?=
TRAIN_FORCE  ?=
EVAL_BACKEND ?=
EVAL_BATCH   ?=
EVAL_ARGS    ?= device_map=auto
EVAL_TASKS   ?= hvcu_suite
EVAL_FLAGS   ?=
HVCU_TRAIN   ?= $(BIN)/hvcu train

.PHONY: train-loop
train-loop: setup
	$(HVCU_TRAIN) prepare --chains $(CHAINS) --out $(OUT)/data --composition $(COMPOSITION) --name $(DATASET) \
	  --image-root $(IMAGE_ROOT) --seed $(SEED)
	$(HVCU_TRAIN) config --model $(TRAIN_MODEL) $(if $(BASE_MODEL),--model-path $(BASE_MODEL)) --dataset $(DATASET) \
	  --dataset-dir $(OUT)/data --out $(OUT)/train --gpus $(GPUS) --deepspeed $(DEEPSPEED) $(TRAIN_FLAGS)
	$(HVCU_TRAIN) run $(OUT)/train/train.yaml --export $(OUT)/train/export.yaml $(if $(TRAIN_FORCE),--force)
	@set -e; info="$(HVCU_TRAIN) info $(OUT)/train --field"; \
	backend="$(EVAL_BACKEND)"; [ -n "$$backend" ] || backend=$$($$info eval_backend); \
	batch="$(EVAL_BATCH)"; [ -n "$$batch" ] || { [ "$$backend" = llava_hf ] && batch=1 || batch=8; }; \
	for name in base tuned; do \
	  if [ $$name = base ]; then model=$$($$info base_model); key="model $$model"; \
	  else model=$(abspath $(OUT))/train/merged; key="merged $$($$info merged_fingerprint)"; fi; \
	  key="$$key; inner=$$backend,$(EVAL_ARGS); tasks $(EVAL_TASKS); batch $$batch; flags $(EVAL_FLAGS)"; \
	  dir=$(OUT)/eval/$$name; \
	  if [ "$$(cat $$dir/fingerprint 2>/dev/null)" = "$$key" ] && [ -n "$$(find $$dir -name '*_results.json')" ]; then \
	    echo "$$name: evaluated already ($$key)"; continue; fi; \
	  rm -rf $$dir; echo "lmms-eval: $$name = $$model ($$key)"; \
	  $(BIN)/lmms-eval --model hvcu_context --model_args inner=$$backend,pretrained=$$model,$(EVAL_ARGS) \
	    --tasks $(EVAL_TASKS) --batch_size $$batch --output_path $$dir --log_samples $(EVAL_FLAGS); \
	  test -n "$$(find $$dir -name '*_results.json')" || { echo "lmms-eval wrote no results for $$name"; exit 1; }; \
	  printf '%s\n' "$$key" > $$dir/fingerprint; \
	done
	$(BIN)/hvcu report --compare $(OUT)/eval/base $(OUT)/eval/tuned --out $(OUT)/report
	@echo "Comparison tables: $(OUT)/report (A = base $$($(HVCU_TRAIN) info $(OUT)/train --field base_model)," \
	  "B = tuned $(OUT)/train/merged)"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The suite runs on PYTEST_JOBS xdist workers (0: in this process), a test file's tests on one worker and the
# Chromium test files together on one, the files in the order tests/conftest.py sets (the ones with the most slow
# tests first: --no-loadscope-reorder keeps it); the 25 slowest tests are listed at the end. Three workers on two
# cores: the end-to-end tests wait on their lmms-eval child or a server, so a third keeps both cores busy
# (measured: 9 min 28 s with 2 workers, 8 min 47 s with 3, fresh clone, quiet machine).
PYTEST_JOBS ?= 3
PYTEST_ARGS ?= -n $(PYTEST_JOBS) --dist loadfile --no-loadscope-reorder --durations=25

unit: setup
	$(BIN)/python -m pytest -q -m "not slow" $(PYTEST_ARGS)

# Headless Chromium for the leaderboard-page test (Debian package; needs root, as on CI).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# Everything CI runs: lint, then the whole suite including the slow end-to-end lmms-eval runs.
test: lint browser
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# Mutation testing (mutmut, a dev extra; not part of `test`, ~10 min on 2 busy cores): mutants of the files in
# pyproject's [tool.mutmut], each run against the fast tests that cover the mutated function; then the score per file
# and every survivor (tests/tools/mutation_report.py), then one-word drops from the parser's keyword lists, which
# mutmut does not make (tests/tools/table_mutation.py). Starts afresh each time. MUTANTS narrows the mutmut part,
# e.g. MUTANTS='hvcu_tasks.core.parsing.*'; MUTATION_MIN=90 fails a file scoring below 90%.
MUTANTS        ?=
MUTATION_JOBS  ?= 2
MUTATION_MIN   ?= 0
mutation: setup
	rm -rf mutants && mkdir mutants
	@echo "mutmut run $(MUTANTS): progress in mutants/mutmut.log"
	nice -n 10 $(BIN)/mutmut run --max-children $(MUTATION_JOBS) $(MUTANTS) > mutants/mutmut.log 2>&1 \
	  || { tail -c 3000 mutants/mutmut.log; exit 1; }
	$(BIN)/python tests/tools/mutation_report.py --min-score $(MUTATION_MIN)
	nice -n 10 $(BIN)/python tests/tools/table_mutation.py

# Refresh the pins from the current .venv (after installing a new set into it by hand).
constraints:
	{ sed -n '1,2p' constraints.txt; $(BIN)/pip freeze --exclude-editable | grep -v '^hvcu'; } > constraints.new
	mv constraints.new constraints.txt

clean:
	rm -rf $(DEMO) .pytest_cache .ruff_cache .hypothesis
