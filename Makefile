# Every target does its own set-up: a venv in .venv with logbroker installed.
PYTHON ?= python3
VENV ?= .venv
BIN = $(VENV)/bin
STAMP = $(VENV)/.installed

.PHONY: serve test test-slow bench-storage clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,spark]'
	touch $(STAMP)

serve: $(STAMP)
	$(BIN)/logbroker serve --data-dir ./data

test: $(STAMP)
	$(BIN)/pytest -q

test-slow: $(STAMP)
	$(BIN)/pytest -q -m slow

bench-storage: $(STAMP)
	$(BIN)/python bench/bench_storage.py

clean:
	rm -rf $(VENV) build src/*.egg-info .pytest_cache .hypothesis
