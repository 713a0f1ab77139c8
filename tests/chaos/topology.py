"""The chaos harness's network: every node (ZooKeeper, each broker) in a Linux network
namespace of its own, joined by a veth pair to a bridge, with an address from a private
/24 that exists only on this machine (the bridge's own address is where the harness and
the workload clients speak from). Links are cut and restored with iptables inside the
namespaces (DROP, so a cut is silent as a real partition is, not a quick refusal).

When the machine forbids namespaces (not root, no `ip`), :class:`LoopbackNet` puts every
node on 127.0.0.1 with ports of its own and cannot cut links: the harness says so and
runs the other nemeses.

Names carry a run id (kc<id>...) and the owner's pid sits in a file beside them, so a run
cleans up what an earlier, killed run left behind.
"""

from __future__ import annotations

import ipaddress
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

STATE_DIR = Path("/tmp/krait-chaos-nets")
CLIENT = "client"  # the harness and the workload clients: the bridge's address


def _run(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(args, check=check, capture_output=True, text=True, timeout=30)


def namespaces_missing() -> str | None:
    """Why this machine cannot host the namespaced cluster, or None."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not shutil.which("ip"):
        return "iproute2 (`ip`) is not installed"
    probe = f"kcprobe{os.getpid() % 100000}"
    try:
        _run("ip", "netns", "add", probe)
    except (subprocess.CalledProcessError, OSError) as exc:
        return f"`ip netns add` is refused here: {getattr(exc, 'stderr', exc)}".strip()
    _run("ip", "netns", "del", probe, check=False)
    return None


@dataclass
class Node:
    name: str
    host: str
    netns: str | None = None

    def wrap(self, argv: list[str]) -> list[str]:
        """The command line that runs ``argv`` inside this node's network namespace. Only
        the network namespace: `ip netns exec` would also give the process a mount
        namespace of its own, holding a copy of every broker's log-dir mount, and a file
        system unmounted for repair would stay alive (and read-only) in those copies."""
        return ["nsenter", f"--net=/run/netns/{self.netns}", "--", *argv] if self.netns else argv


@dataclass
class LoopbackNet:
    """Every node on loopback; no cuts."""

    nodes: dict[str, Node] = field(default_factory=dict)
    can_partition = False
    client_host = "127.0.0.1"

    def add(self, name: str) -> Node:
        node = self.nodes[name] = Node(name, "127.0.0.1")
        return node

    def cut(self, src: str, dst: str) -> None:
        raise RuntimeError("network partitions need network namespaces")

    def heal(self) -> None:
        pass

    def close(self) -> None:
        pass


class NamespaceNet:
    """A bridge, namespaces and veth pairs; iptables rules in the namespaces are the cuts."""

    #: links can be cut only with iptables (the Makefile installs it)
    can_partition = shutil.which("iptables") is not None

    def __init__(self) -> None:
        cleanup_stale()
        self.run_id = f"{random.randrange(16 ** 4):04x}"
        self.prefix = f"kc{self.run_id}"
        self.subnet = _free_subnet()
        hosts = self.subnet.hosts()
        self.client_host = str(next(hosts))
        self._hosts = hosts
        self.bridge = f"{self.prefix}br"
        self.nodes: dict[str, Node] = {}
        self.cuts: set[tuple[str, str]] = set()
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        (STATE_DIR / self.run_id).write_text(str(os.getpid()))
        _run("ip", "link", "add", self.bridge, "type", "bridge")
        _run("ip", "addr", "add", f"{self.client_host}/{self.subnet.prefixlen}", "dev", self.bridge)
        _run("ip", "link", "set", self.bridge, "up")

    def add(self, name: str) -> Node:
        ns = f"{self.prefix}{name}"
        host = str(next(self._hosts))
        outer, inner = f"{ns}h"[:15], f"{ns}n"[:15]
        _run("ip", "netns", "add", ns)
        _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
        _run("ip", "link", "set", inner, "netns", ns)
        _run("ip", "link", "set", outer, "master", self.bridge)
        _run("ip", "link", "set", outer, "up")
        for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "link", "set", inner, "name", "eth0"],
                    ["ip", "addr", "add", f"{host}/{self.subnet.prefixlen}", "dev", "eth0"],
                    ["ip", "link", "set", "eth0", "up"]):
            _run("ip", "netns", "exec", ns, *cmd)
        node = self.nodes[name] = Node(name, host, ns)
        return node

    def _host(self, name: str) -> str:
        return self.client_host if name == CLIENT else self.nodes[name].host

    def cut(self, src: str, dst: str) -> None:
        """Packets from ``src`` no longer reach ``dst`` (one way; cut both for a split).
        The rule sits in ``dst``'s namespace, or in ``src``'s when ``dst`` is the client
        side (the harness's own namespace is never touched)."""
        if (src, dst) in self.cuts:
            return
        if dst != CLIENT:
            _run("ip", "netns", "exec", self.nodes[dst].netns, "iptables", "-A", "INPUT", "-s",
                 self._host(src), "-j", "DROP")
        else:
            _run("ip", "netns", "exec", self.nodes[src].netns, "iptables", "-A", "OUTPUT", "-d",
                 self.client_host, "-j", "DROP")
        self.cuts.add((src, dst))

    def heal(self) -> None:
        for node in self.nodes.values():
            _run("ip", "netns", "exec", node.netns, "iptables", "-F", check=False)
        self.cuts.clear()

    def close(self) -> None:
        for node in self.nodes.values():
            _run("ip", "netns", "del", node.netns, check=False)
        _run("ip", "link", "del", self.bridge, check=False)
        (STATE_DIR / self.run_id).unlink(missing_ok=True)


def _free_subnet() -> ipaddress.IPv4Network:
    """A /24 of 10.213.0.0/16 that no interface or route on this machine uses."""
    used = _run("ip", "-4", "route", "show", "table", "all", check=False).stdout + \
        _run("ip", "-4", "addr", check=False).stdout
    for _ in range(200):
        net = ipaddress.ip_network(f"10.213.{random.randrange(1, 255)}.0/24")
        if f"10.213.{net.network_address.packed[2]}." not in used:
            return net
    raise RuntimeError("no free 10.213.x.0/24 subnet on this machine")


def cleanup_stale() -> None:
    """Remove namespaces and bridges of earlier runs whose owner process is gone."""
    if not STATE_DIR.exists():
        return
    for f in STATE_DIR.iterdir():
        try:
            os.kill(int(f.read_text()), 0)
            continue  # its owner still runs
        except (ProcessLookupError, ValueError):
            pass
        except PermissionError:
            continue
        prefix = f"kc{f.name}"
        for ns in _run("ip", "netns", "list", check=False).stdout.split("\n"):
            name = ns.split(" ")[0]
            if name.startswith(prefix):
                for pid in _run("ip", "netns", "pids", name, check=False).stdout.split():
                    try:
                        os.kill(int(pid), 9)
                    except (ProcessLookupError, ValueError):
                        pass
                _run("ip", "netns", "del", name, check=False)
        _run("ip", "link", "del", f"{prefix}br", check=False)
        f.unlink(missing_ok=True)
