# Two commands do all set-up on a fresh machine: `make serve` and `make test`.
# Each creates .venv on first use and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,spark]'
	@# kcat and zookeeper are Debian packages: best effort; their tests skip with a reason if absent
	@command -v kcat >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -q kcat >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	   apt-get install -y -q kcat >/dev/null 2>&1)) || echo "kcat not installed: its test will skip"; }
	@[ -f /usr/share/java/zookeeper.jar ] || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -q zookeeper >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	   apt-get install -y -q zookeeper >/dev/null 2>&1)) || echo "zookeeper not installed: cluster tests will skip"; }
	touch $@ $(VENV)/.runtime

$(VENV)/.bench: pyproject.toml $(VENV)/.dev
	$(BIN)/pip install -q -e '.[bench]' || $(BIN)/pip install -q -e . confluent-kafka psutil
	touch $@

serve: $(VENV)/.runtime
	$(BIN)/krait serve $(ARGS)

lint: $(VENV)/.dev
	$(BIN)/ruff check .

test: $(VENV)/.dev lint
	$(BIN)/python -m pytest $(ARGS)

bench: $(VENV)/.bench
	$(BIN)/python bench/compare.py $(ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache
