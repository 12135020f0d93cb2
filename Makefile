# Two commands do all set-up: `make serve` and `make test`. Both install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install serve test lint typecheck bench lock clean

install: $(STAMP)

$(STAMP): pyproject.toml requirements.lock requirements-build.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-build.lock
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

serve: install
	$(BIN)/paysign serve

test: install lint typecheck
	@bash scripts/ensure-postgres
	$(BIN)/pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install
	$(BIN)/mypy

bench: install
	$(BIN)/python bench/sign.py

# Re-pin every dependency after changing pyproject.toml.
lock:
	rm -rf /tmp/paysign-lock && $(PYTHON) -m venv /tmp/paysign-lock
	/tmp/paysign-lock/bin/pip install --quiet -e '.[dev]'
	/tmp/paysign-lock/bin/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache
