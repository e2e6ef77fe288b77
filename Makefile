# Everything builds from nothing: the first target that needs .venv creates it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench screenshots clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/osmosis-tui eval

test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check core server_stub tui tests bench
	$(BIN)/ruff format --check core server_stub tui tests bench
	$(BIN)/mypy

# Benchmarks, not tests: all figures side by side in one run (builds the Python 3.12 venv).
bench: $(STAMP)
	$(BIN)/python -m bench.run

# The README's SVG screenshots, drawn from the snapshot tests' states (tests/tui/states.py).
screenshots: $(STAMP)
	$(BIN)/python -m tests.tui.states screenshots

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
