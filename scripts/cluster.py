"""A local Krait cluster for trying cluster mode, like Kafka's quick start: one ZooKeeper
(Debian's `zookeeper` package) and three brokers, as background daemons with their pid
files, logs and data under one directory. `make cluster` and `make cluster-stop` run it:

    python scripts/cluster.py start [--dir data/cluster] [--port 9092] [--zk-port 2181]
    python scripts/cluster.py stop  [--dir data/cluster]

Layout of --dir: zookeeper/zoo.cfg and zookeeper/data (ZooKeeper's config and snapshots),
zookeeper.pid, zookeeper.log, and per broker N (node.id N, port --port + N - 1)
broker-N/ (its log.dirs), broker-N.pid, broker-N.log.

`start` is idempotent: what already runs (a live process whose command line is the one
this script starts) is left alone, what is missing is started. `stop` sends SIGTERM to
the brokers and waits for them (they close their ZooKeeper sessions on the way out),
then stops ZooKeeper. Standard library only, so `stop` runs without the virtualenv.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ZK_JAR = Path("/usr/share/java/zookeeper.jar")
ZK_CONF = Path("/etc/zookeeper/conf")  # Debian's log4j.properties
#: the SLF4J binding and log4j of the package's dependencies (without them ZooKeeper logs nothing)
ZK_LOGGING = [Path("/usr/share/java/slf4j-log4j12.jar"), Path("/usr/share/java/log4j-1.2.jar")]
ZK_MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
DEFAULT_DIR = "data/cluster"
HOST = "127.0.0.1"
CHROOT = "/krait"
BROKERS = 3
START_TIMEOUT = 60.0
BROKER_STOP_TIMEOUT = 60.0  # a clean shutdown flushes and checkpoints every partition
ZK_STOP_TIMEOUT = 30.0


class ClusterError(Exception):
    """A reason to stop with a one-line message (exit 1)."""


# --- processes -------------------------------------------------------------------------------


def _read_pid(pid_file: Path) -> int | None:
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Running (a zombie, exited but not reaped yet, counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: trust kill(0)
    return stat.rpartition(")")[2].split()[0] != "Z"


def _cmdline(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None


def _running(pid_file: Path, marker: str) -> int | None:
    """The pid in ``pid_file`` if that process is alive and is ours (its command line holds
    ``marker``: a pid reused by another program after a reboot does not count)."""
    pid = _read_pid(pid_file)
    if pid is None or not _alive(pid):
        return None
    args = _cmdline(pid)
    if args is not None and marker not in args:
        return None
    return pid




def _port_in_use(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers bind: TIME_WAIT is no conflict
        try:
            s.bind((HOST, port))
        except OSError:
            return True
    return False


def _check_port_free(port: int, what: str, variable: str) -> None:
    if _port_in_use(port):
        raise ClusterError(f"port {port} is already in use, so {what} cannot start there: stop what listens on it "
                           f"(`ss -ltnp 'sport = :{port}'` shows it) or choose another port with "
                           f"`make cluster {variable}=<port>`")


def _spawn(args: list[str], pid_file: Path, log_file: Path) -> int:
    """Start a daemon: its own session (a Ctrl-C in the shell does not reach it), output
    appended to ``log_file``, its pid written to ``pid_file``."""
    with open(log_file, "ab") as log:
        log.write(f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} starting: {' '.join(args)}\n".encode())
        log.flush()
        proc = subprocess.Popen(args, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    pid_file.write_text(f"{proc.pid}\n")
    return proc.pid


def _log_tail(log_file: Path, lines: int = 15) -> str:
    try:
        text = log_file.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "\n".join("    " + line for line in text)


def _wait_until(ready, pid: int, what: str, log_file: Path, timeout: float = START_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise ClusterError(f"{what} exited during start-up; the end of {log_file}:\n{_log_tail(log_file)}\n"
                               f"(`make cluster-stop` stops what did start)")
        if ready():
            return
        time.sleep(0.2)
    raise ClusterError(f"{what} (pid {pid}) did not come up in {timeout:.0f}s; the end of {log_file}:\n"
                       f"{_log_tail(log_file)}")


def _terminate(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _wait_gone(pid: int, what: str, timeout: float) -> None:
    """Wait for a process sent SIGTERM to exit; SIGKILL it if it has not within ``timeout``."""
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _alive(pid):
        print(f"{what} (pid {pid}) did not stop in {timeout:.0f}s after SIGTERM: sending SIGKILL", file=sys.stderr)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        while _alive(pid):
            time.sleep(0.1)


# --- ZooKeeper -------------------------------------------------------------------------------


def _zk_answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0) as s:
            s.sendall(b"srvr")  # a four-letter word ZooKeeper 3.8 allows by default
            return s.recv(64).startswith(b"Zookeeper version")
    except OSError:
        return False


def _zk_config(root: Path) -> Path:
    return root / "zookeeper" / "zoo.cfg"


def running_zookeeper(root: Path, port: int) -> int | None:
    """The pid of the ZooKeeper already running from ``root`` (on ``port``), or None."""
    cfg = _zk_config(root)
    pid = _running(root / "zookeeper.pid", str(cfg))
    if pid is not None and f"clientPort={port}" not in cfg.read_text().splitlines():
        raise ClusterError(f"ZooKeeper already runs from this directory (pid {pid}) on another port than {port}: "
                           "run `make cluster-stop` first")
    return pid


def start_zookeeper(root: Path, port: int) -> int:
    if not ZK_JAR.exists():
        raise ClusterError(f"ZooKeeper is not installed ({ZK_JAR} is missing): install Debian's `zookeeper` "
                           "package (`make cluster` does it with apt-get where it can)")
    java = shutil.which("java")
    if java is None:
        raise ClusterError("java is not installed (ZooKeeper needs it; Debian's `zookeeper` package pulls it in)")
    cfg = _zk_config(root)
    (cfg.parent / "data").mkdir(parents=True, exist_ok=True)
    cfg.write_text("\n".join([
        "# written by scripts/cluster.py (make cluster); rewritten at every start",
        "tickTime=2000",
        f"dataDir={cfg.parent / 'data'}",
        f"clientPort={port}",
        f"clientPortAddress={HOST}",
        "admin.enableServer=false",
        "4lw.commands.whitelist=srvr,ruok",
        "",
    ]))
    classpath = os.pathsep.join(str(p) for p in [ZK_CONF, ZK_JAR, *ZK_LOGGING] if p.exists())
    log_file = root / "zookeeper.log"
    pid = _spawn([java, "-Xmx256m", "-Dzookeeper.root.logger=INFO,CONSOLE", f"-Dzookeeper.log.dir={root}",
                  "-cp", classpath, ZK_MAIN, str(cfg)], root / "zookeeper.pid", log_file)
    _wait_until(lambda: _zk_answers(port), pid, f"ZooKeeper on {HOST}:{port}", log_file)
    return pid


# --- brokers ---------------------------------------------------------------------------------


def _listens(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1.0):
            return True
    except OSError:
        return False


def broker_settings(root: Path, node_id: int, port: int, zk_port: int, http_port: int = 0,
                    registry_port: int = 0) -> list[str]:
    """The broker's --override key=value settings (``http_port``: its metrics and health
    listener, ``registry_port``: its Schema Registry; 0 for none)."""
    http = f"{HOST}:{http_port}" if http_port else ""
    registry = f"{HOST}:{registry_port}" if registry_port else ""
    return [f"node.id={node_id}", f"listeners=PLAINTEXT://{HOST}:{port}", f"log.dirs={root / f'broker-{node_id}'}",
            f"zookeeper.connect={HOST}:{zk_port}{CHROOT}", f"krait.http.listener={http}",
            f"krait.schema.registry.listener={registry}"]


def running_broker(root: Path, node_id: int, settings: list[str]) -> int | None:
    """The pid of broker ``node_id`` already running from ``root`` (with ``settings``), or None."""
    pid = _running(root / f"broker-{node_id}.pid", f"log.dirs={root / f'broker-{node_id}'}")
    if pid is not None:
        args = _cmdline(pid)
        if args is not None and not all(kv in args for kv in settings):
            raise ClusterError(f"broker {node_id} already runs from this directory (pid {pid}) with other settings "
                               f"({' '.join(a for a in args if '=' in a)}): run `make cluster-stop` first")
    return pid


def start_brokers(root: Path, to_start: dict[int, tuple[int, list[str]]], python: str) -> dict[int, int]:
    """Start the brokers {node id: (port, settings)} all at once, then wait for each to
    listen (a broker listens only once it has registered in ZooKeeper). {node id: pid}"""
    pids = {}
    for node_id, (_, settings) in to_start.items():
        args = [python, "-m", "broker", *(a for kv in settings for a in ("--override", kv))]
        pids[node_id] = _spawn(args, root / f"broker-{node_id}.pid", root / f"broker-{node_id}.log")
    for node_id, (port, _) in to_start.items():
        _wait_until(lambda port=port: _listens(port), pids[node_id], f"broker {node_id} on {HOST}:{port}",
                    root / f"broker-{node_id}.log")
    return pids


# --- commands --------------------------------------------------------------------------------


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def start(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    root.mkdir(parents=True, exist_ok=True)
    # what runs already, and whether every port still needed is free, before starting anything
    zk_pid = running_zookeeper(root, args.zk_port)
    if zk_pid is None:
        _check_port_free(args.zk_port, "ZooKeeper", "ZK_PORT")
    ports = {n: args.port + n - 1 for n in range(1, BROKERS + 1)}
    running, to_start = {}, {}
    for node_id, port in ports.items():
        settings = broker_settings(root, node_id, port, args.zk_port,
                                   args.http_port + node_id - 1 if args.http_port else 0,
                                   args.registry_port + node_id - 1 if args.registry_port else 0)
        pid = running_broker(root, node_id, settings)
        if pid is not None:
            running[node_id] = pid
        else:
            _check_port_free(port, f"broker {node_id}", "CLUSTER_PORT")
            to_start[node_id] = (port, settings)

    state = "already running" if zk_pid is not None else "started"
    if zk_pid is None:
        zk_pid = start_zookeeper(root, args.zk_port)
    print(f"ZooKeeper  {HOST}:{args.zk_port}  pid {zk_pid}  {state}  log {_shown(root / 'zookeeper.log')}")
    started = start_brokers(root, to_start, args.python)
    for node_id, port in ports.items():
        pid = started.get(node_id) or running[node_id]
        print(f"broker {node_id}   {HOST}:{port}  pid {pid}  {'started' if node_id in started else 'already running'}"
              f"  log {_shown(root / f'broker-{node_id}.log')}")
    bootstrap = ",".join(f"{HOST}:{port}" for port in ports.values())
    first = f"{HOST}:{ports[1]}"
    stop_hint = "make cluster-stop" + ("" if args.dir == DEFAULT_DIR else f" CLUSTER_DIR={args.dir}")
    print(f"""
Krait cluster of {BROKERS} brokers is up (zookeeper.connect={HOST}:{args.zk_port}{CHROOT}, data in {_shown(root)}).
Connect with:
  bootstrap.servers={bootstrap}
  kcat -b {first} -L
  .venv/bin/krait topics --bootstrap-server {first} --describe
Stop with: {stop_hint}""")
    return 0


def stop(args: argparse.Namespace) -> int:
    root = Path(args.dir).resolve()
    stopped = 0
    brokers = []
    for pid_file in sorted(root.glob("broker-*.pid")):
        node = pid_file.stem.partition("-")[2]
        pid = _running(pid_file, f"log.dirs={root / f'broker-{node}'}")
        if pid is not None:
            _terminate(pid)
            brokers.append((node, pid, pid_file))
        else:
            pid_file.unlink(missing_ok=True)  # stale
    for node, pid, pid_file in brokers:  # all were sent SIGTERM: they shut down side by side
        _wait_gone(pid, f"broker {node}", BROKER_STOP_TIMEOUT)
        pid_file.unlink(missing_ok=True)
        print(f"broker {node} stopped (pid {pid})")
        stopped += 1
    zk_pid_file = root / "zookeeper.pid"
    zk_pid = _running(zk_pid_file, str(_zk_config(root)))
    if zk_pid is not None:
        _terminate(zk_pid)
        _wait_gone(zk_pid, "ZooKeeper", ZK_STOP_TIMEOUT)
        print(f"ZooKeeper stopped (pid {zk_pid})")
        stopped += 1
    zk_pid_file.unlink(missing_ok=True)
    if not stopped:
        print(f"no Krait cluster is running from {_shown(root)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/cluster.py", description="A local ZooKeeper + 3-broker Krait cluster.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("start", help="start ZooKeeper and the brokers (what is not running yet)")
    s.add_argument("--dir", default=DEFAULT_DIR, help=f"pid files, logs and data (default {DEFAULT_DIR})")
    s.add_argument("--port", type=int, default=9092, help="port of broker 1; broker N listens on port + N - 1")
    s.add_argument("--zk-port", type=int, default=2181, help="ZooKeeper's client port (default 2181)")
    s.add_argument("--http-port", type=int, default=9644,
                   help="metrics/health port of broker 1; broker N serves on port + N - 1 (0: none)")
    s.add_argument("--registry-port", type=int, default=8081,
                   help="Schema Registry port of broker 1; broker N serves on port + N - 1 (0: none)")
    s.add_argument("--python", default=sys.executable, help="the interpreter that runs the brokers")
    t = sub.add_parser("stop", help="stop the brokers (SIGTERM, waiting for them), then ZooKeeper")
    t.add_argument("--dir", default=DEFAULT_DIR, help=f"the directory `start` used (default {DEFAULT_DIR})")
    args = p.parse_args(argv)
    try:
        return start(args) if args.command == "start" else stop(args)
    except ClusterError as exc:
        print(f"make cluster: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
