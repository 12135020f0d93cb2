# Two commands do all set-up: `make serve` and `make test`. Both install first.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install serve test lint typecheck bench lock clean contracts-check

# Node tools, pinned by package-lock.json: anvil (the dev chain `serve` starts) and solc
# (contracts/). No package runs install scripts: npm installs anvil's binary as the optional
# dependency matching this machine, so @foundry-rs/anvil's postinstall (a fallback download)
# has nothing to do.
NPM_STAMP := node_modules/.installed

install: $(STAMP) $(NPM_STAMP)

$(NPM_STAMP): package.json package-lock.json
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	@touch $(NPM_STAMP)

# Recompile contracts/ with the pinned solc; fails if the committed artifact differs.
contracts-check: install
	node scripts/compile-contracts --check

$(STAMP): pyproject.toml requirements.lock requirements-build.lock
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-build.lock
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

serve: install
	$(BIN)/paysign serve

# Headless Chromium for the portal's browser tests: Debian's package, driven by Playwright via
# executable_path (no browser download). The file itself is the target, so this is a no-op once
# installed; the package index is refreshed only if the first attempt fails.
CHROMIUM := /usr/bin/chromium
APT_INSTALL := DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends

$(CHROMIUM):
	$(APT_INSTALL) chromium || (apt-get update && $(APT_INSTALL) chromium)

# PgBouncer, for the tests of paysign behind a pooler in transaction mode (Debian's package).
PGBOUNCER := /usr/sbin/pgbouncer

$(PGBOUNCER):
	$(APT_INSTALL) pgbouncer || (apt-get update && $(APT_INSTALL) pgbouncer)

# SoftHSM, the PKCS#11 token the tests keep a master key in (Debian's package).
SOFTHSM := /usr/bin/softhsm2-util

$(SOFTHSM):
	$(APT_INSTALL) softhsm2 || (apt-get update && $(APT_INSTALL) softhsm2)

test: install lint typecheck contracts-check $(CHROMIUM) $(PGBOUNCER) $(SOFTHSM)
	@bash scripts/ensure-postgres
	$(BIN)/pytest $(PYTEST_ARGS)

lint: install
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: install
	$(BIN)/mypy

# SQLite, PostgreSQL at 127.0.0.1:5432 (started when installed but down) and two `serve`
# processes on each (~3 min). Without PostgreSQL: `make bench BENCH_ARGS=--no-postgres`.
bench: install
	@case " $(BENCH_ARGS) " in *" --no-postgres "*|*" --sqlite-only "*) ;; \
	  *) bash scripts/ensure-postgres ;; esac
	$(BIN)/python bench/sign.py $(BENCH_ARGS)

# Re-pin every dependency after changing pyproject.toml.
lock:
	rm -rf /tmp/paysign-lock && $(PYTHON) -m venv /tmp/paysign-lock
	/tmp/paysign-lock/bin/pip install --quiet -e '.[dev]'
	/tmp/paysign-lock/bin/pip freeze --exclude-editable > requirements.lock

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache
