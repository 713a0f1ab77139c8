"""A single node is a one-broker cluster (issue 24): the daemon has one code path, and only
the metadata stores (broker/metadata/, and the ZooKeeper store in broker/cluster/) differ.
This fails when a branch on the deployment comes back: a check of ``replicated``, of
``cluster is None`` or ``replication is None`` (the old single-node tests), or of
``zookeeper.connect`` outside the choice of the store."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: the daemon's packages (storage/ keeps its own ``replicated`` option: whether a log's high
#: watermark follows its end, for tools and tests that write logs without a broker)
DAEMON = ("broker", "coordinator", "txn_coordinator")
#: where the deployment is chosen
STORE = ("broker/metadata/__init__.py",)
#: "before start() joined the cluster" guards are allowed: they are about the lifecycle
LIFECYCLE = re.compile(r"#\s*None (only )?(before|until) start\(\)")

BRANCHES = [
    re.compile(r"\breplicas\.replicated\b|\bself\.replicated\b(?!\()|\breplicated\s*=\s*(bool|replicated)"),
    re.compile(r"\b(cluster|replication)\s+is\s+(not\s+)?None"),
    re.compile(r"""["']zookeeper\.connect["']\]"""),
]


def _daemon_files() -> list[Path]:
    out = []
    for pkg in DAEMON:
        out += [p for p in (REPO / pkg).rglob("*.py") if "tools" not in p.relative_to(REPO).parts]
    return sorted(out)


def test_no_branch_on_single_node_or_cluster_outside_the_metadata_store() -> None:
    found = []
    for path in _daemon_files():
        rel = path.relative_to(REPO).as_posix()
        if rel in STORE:
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if not LIFECYCLE.search(line) else ""
            if any(p.search(code) for p in BRANCHES):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "branches on the deployment outside the metadata store:\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for() -> None:
    # the patterns are not vacuous: the lines the refactor removed would be caught
    removed = ["        if self.replicated:", "    if broker.cluster is not None and not broker.cluster.is_controller():",
               "    if broker.replica.replication is None:", '        if self.config["zookeeper.connect"]:',
               "        replicated = bool(self.config[\"zookeeper.connect\"])"]
    for line in removed:
        assert any(p.search(line) for p in BRANCHES), line
