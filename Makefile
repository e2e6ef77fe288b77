# Everything builds from nothing: the first target that needs .venv creates it.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The exact versions of everything installed; pyproject.toml holds the compatible ranges.
CONSTRAINTS := constraints.txt
WHEEL_VENV := build/wheel-venv

.PHONY: run test lint bench screenshots clean soak wheel-check

$(STAMP): pyproject.toml $(CONSTRAINTS)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -c $(CONSTRAINTS) -e '.[test,litellm]'
	touch $(STAMP)

# The zero-setup demo. Its exit status 1 says that work items are pending (the stuck rows its
# tour cancels, or a quit), which its end says in words; only another status is make's failure.
run: $(STAMP)
	$(BIN)/osmosis-tui eval || [ $$? -eq 1 ]

# The slowest tests are named at the end, so a CI log says where its time went.
test: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=25

lint: $(STAMP)
	$(BIN)/ruff check core server_stub tui tests bench
	$(BIN)/ruff format --check core server_stub tui tests bench
	$(BIN)/mypy

# What a user gets from the wheel: built here, installed into a fresh venv, run from outside the
# checkout so nothing is imported from the source tree.
wheel-check: $(STAMP)
	rm -rf dist $(WHEEL_VENV)
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	$(PYTHON) -m venv $(WHEEL_VENV)
	$(WHEEL_VENV)/bin/python -m pip install --quiet -c $(CONSTRAINTS) dist/osmosis_tui-*.whl
	cd $(WHEEL_VENV) && bin/osmosis-tui --help > /dev/null
	cd $(WHEEL_VENV) && bin/python -c "$$WHEEL_IMPORTS"

export WHEEL_IMPORTS
define WHEEL_IMPORTS
import pathlib, core, server_stub
assert "site-packages" in core.__file__, core.__file__
for package in (core, server_stub):
    assert (pathlib.Path(package.__file__).parent / "py.typed").is_file(), package
for package in (core, server_stub):
    missing = [name for name in package.__all__ if getattr(package, name, None) is None]
    assert not missing, missing
print("wheel ok:", core.__file__)
endef

# Benchmarks, not tests: all figures side by side in one run (builds the Python 3.12 venv).
bench: $(STAMP)
	$(BIN)/python -m bench.run

# The README's SVG screenshots, drawn from the snapshot tests' states (tests/tui/states.py).
screenshots: $(STAMP)
	$(BIN)/python -m tests.tui.states screenshots

# Reliability at full size (docs/RELIABILITY.md): the 2 x 5,000-rollout soak at 200 in flight,
# 25 SIGKILLs of a running eval, ten times the fuzz examples, and 20 closings of the terminal
# each way. CI runs the small counts.
soak: $(STAMP)
	OSMOSIS_SOAK=full $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/reliability \
		tests/tui/test_terminal_gone.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache dist build
