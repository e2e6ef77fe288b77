# Everything builds from nothing: the first target that needs .venv creates it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench screenshots clean soak

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

# Reliability at full size (docs/RELIABILITY.md): the 2 x 5,000-rollout soak at 200 in flight,
# 25 SIGKILLs of a running eval, and ten times the fuzz examples. CI runs the small counts.
soak: $(STAMP)
	OSMOSIS_SOAK=full $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/reliability

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
