# Two commands do all set-up on a fresh machine: `make serve` and `make test`.
# Each creates .venv on first use and installs what it needs.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ARGS ?=

.PHONY: serve test lint bench clean cluster cluster-stop soak

# `make cluster`: ZooKeeper and three brokers in the background (scripts/cluster.py);
# broker N listens on CLUSTER_PORT + N - 1. Override these to run a second one beside it.
CLUSTER_DIR ?= data/cluster
CLUSTER_PORT ?= 9092
ZK_PORT ?= 2181
# broker N serves /metrics, /healthz, /readyz on CLUSTER_HTTP_PORT + N - 1 (0: none)
CLUSTER_HTTP_PORT ?= 9644

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
	@# postgresql: the shared Iceberg catalog of the cluster table tests (tests/postgres_harness.py)
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -q postgresql >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	   apt-get install -y -q postgresql >/dev/null 2>&1)) || echo "postgresql not installed: the cluster table tests will skip"; }
	@# iptables cuts links between the chaos tests' network namespaces (tests/chaos/)
	@command -v iptables >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
	  (apt-get install -y -q iptables >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && \
	   apt-get install -y -q iptables >/dev/null 2>&1)) || echo "iptables not installed: the chaos runs skip network partitions"; }
	touch $@ $(VENV)/.runtime

$(VENV)/.bench: pyproject.toml $(VENV)/.dev
	$(BIN)/pip install -q -e '.[bench]' || $(BIN)/pip install -q -e . confluent-kafka psutil
	touch $@

serve: $(VENV)/.runtime
	$(BIN)/krait serve $(ARGS)

lint: $(VENV)/.dev
	$(BIN)/ruff check .

# The tests run in TEST_WORKERS pytest-xdist processes (0: in this one): most of a test's time
# is waiting on brokers, ZooKeeper and clients, so more workers than cores pay off (4 on
# 2 cores: 6 were no faster, the machine's CPU is then the limit). Tests
# that share a module's broker or need the whole machine stay in one worker, and the longest
# are handed out first (tests/conftest.py). The 20 slowest tests are listed at the end.
TEST_WORKERS ?= 4
test: $(VENV)/.dev lint
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --durations=20 $(ARGS)

# Debian's zookeeper package (ZooKeeper 3.8 and a JRE), installed if missing: apt-get as
# root, through sudo otherwise.
cluster: $(VENV)/.runtime
	@[ -f /usr/share/java/zookeeper.jar ] || { \
	  command -v apt-get >/dev/null || { echo "make cluster needs ZooKeeper: install the zookeeper package (Debian's 3.8)" >&2; exit 1; }; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif command -v sudo >/dev/null; then SUDO=sudo; \
	  else echo "make cluster needs ZooKeeper: run 'apt-get install zookeeper' as root" >&2; exit 1; fi; \
	  echo "installing ZooKeeper (Debian package zookeeper)..."; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null 2>&1 || \
	  { $$SUDO apt-get update -q >/dev/null 2>&1 && \
	    $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q zookeeper >/dev/null; } || \
	  { echo "make cluster: could not install the zookeeper package" >&2; exit 1; }; }
	@$(BIN)/python scripts/cluster.py start --dir "$(CLUSTER_DIR)" --port $(CLUSTER_PORT) --zk-port $(ZK_PORT) --http-port $(CLUSTER_HTTP_PORT)

# SIGTERM to the brokers (waiting for their clean shutdown), then ZooKeeper. Needs no .venv.
cluster-stop:
	@$(PYTHON) scripts/cluster.py stop --dir "$(CLUSTER_DIR)"

# The long randomized fault run (tests/chaos/): SOAK_SECONDS of faults (default 30 minutes),
# any seed (SOAK_SEED, random by default); the report is appended to bench/RESULTS.md.
SOAK_SECONDS ?= 1800
SOAK_SEED ?=
soak: $(VENV)/.dev
	$(BIN)/python bench/soak.py --duration $(SOAK_SECONDS) $(if $(SOAK_SEED),--seed $(SOAK_SEED)) --results $(ARGS)

bench: $(VENV)/.bench
	$(BIN)/python bench/compare.py $(ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache
