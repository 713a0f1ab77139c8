"""A throwaway PostgreSQL server for tests: Debian's `postgresql` package, a cluster made
by initdb in a temp dir of its own, run as a subprocess on a free 127.0.0.1 port (its unix
socket in the same dir), with durability off (a test database is never kept). ``stop``
removes the process and the dir, whatever happened before. `make test` installs the
package; a test skips, saying so, only when it is not installed at all.

PostgreSQL refuses to run as root: as root, initdb and the server run as the ``postgres``
user (which the package creates) through util-linux's setpriv, which execs the program
itself, so that the server's pid is the postmaster's and it dies with the test process.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

from tests.krait_harness import free_port, spawn

#: the superuser initdb creates (trust authentication: nothing but the test connects)
USER = "krait"


def _bin_dir() -> Path | None:
    """The newest installed PostgreSQL's programs (Debian keeps them out of PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"),
                   key=lambda p: int(Path(p).parts[-3]) if Path(p).parts[-3].isdigit() else 0)
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).resolve().parent if on_path else None


def postgres_missing() -> str | None:
    bin_dir = _bin_dir()
    if bin_dir is None or not (bin_dir / "initdb").exists():
        return "PostgreSQL is not installed (Debian package `postgresql`; `make test` installs it with apt-get)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no `postgres` user to run PostgreSQL as"
        if shutil.which("setpriv") is None:
            return "running as root and util-linux's setpriv (to run PostgreSQL as `postgres`) is missing"
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        return "psycopg2 is not installed (pip install 'pyiceberg[sql-postgres]')"
    return None


class PostgresProcess:
    def __init__(self) -> None:
        bin_dir = _bin_dir()
        if bin_dir is None:
            raise RuntimeError(postgres_missing())
        self.bin = bin_dir
        self.port = free_port()
        # under /tmp itself, not pytest's tmp_path: the postgres user must reach it, and
        # pytest's base dir is private to the user running the tests
        self.dir = Path(tempfile.mkdtemp(prefix="krait-pg-"))
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self.proc: subprocess.Popen | None = None
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.dir, pw.pw_uid, pw.pw_gid)
            self._as_user = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--clear-groups", "--"]

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={database}"

    def url(self, database: str = "postgres") -> str:
        """The SQLAlchemy URL pyiceberg's SQL catalog takes."""
        return f"postgresql+psycopg2://{USER}@127.0.0.1:{self.port}/{database}"

    def start(self, timeout: float = 30.0) -> PostgresProcess:
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _start(self, timeout: float) -> None:
        import psycopg2

        subprocess.run([*self._as_user, str(self.bin / "initdb"), "-D", str(self.data), "-U", USER, "-A", "trust",
                        "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"],
                       check=True, capture_output=True, timeout=120)
        with open(self.log_path, "ab") as logf:  # the child has its own copy of the descriptor
            self.proc = spawn([*self._as_user, str(self.bin / "postgres"), "-D", str(self.data),
                               "-p", str(self.port), "-k", str(self.dir), "-c", "listen_addresses=127.0.0.1",
                               # a test's database is thrown away: no flushes to wait for
                               "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
                              stdout=logf, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"PostgreSQL exited with {self.proc.returncode}:\n{self.log_text()}")
            try:
                psycopg2.connect(self.dsn(), connect_timeout=2).close()
                return
            except psycopg2.OperationalError:
                time.sleep(0.1)
        raise RuntimeError(f"PostgreSQL did not start in {timeout}s:\n{self.log_text()}")

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; returns its SQLAlchemy URL."""
        import psycopg2

        name = f"{prefix}_{uuid.uuid4().hex[:10]}"
        conn = psycopg2.connect(self.dsn(), connect_timeout=5)
        try:
            conn.autocommit = True  # CREATE DATABASE cannot run in a transaction
            with conn.cursor() as cur:
                cur.execute(f'CREATE DATABASE "{name}"')
        finally:
            conn.close()
        return self.url(name)

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the server (a fast shutdown, SIGKILL if it hangs) and remove its dir."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # fast shutdown: disconnect clients, no checkpoint wait
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)


class PgRelay:
    """A TCP relay between one client (a broker) and the real server, that can hold that
    client's next statement matching a pattern: the bytes are the real protocol's; the relay
    only reads the frontend's message framing (startup, then type byte and length) to find
    simple-protocol queries ('Q', which psycopg2 sends). ``hold_next(pattern)``: the next
    query containing ``pattern`` and everything after it on that connection wait at the
    relay (``held`` is set) until ``release()``; ``outcome`` is then the server's
    CommandComplete tag for it (b"UPDATE 0", b"UPDATE 1", ...)."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self.held = threading.Event()
        self.answered = threading.Event()
        self.outcome: bytes | None = None
        self._pattern: bytes | None = None
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._socks: list[socket.socket] = []
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._stop = False
        threading.Thread(target=self._accept_loop, name=f"pg-relay-{self.port}", daemon=True).start()

    def url(self, database: str) -> str:
        return f"postgresql+psycopg2://{USER}@127.0.0.1:{self.port}/{database}"

    def hold_next(self, pattern: bytes) -> None:
        self.held.clear()
        self.answered.clear()
        self._released.clear()
        self.outcome = None
        self._pattern = pattern

    def release(self) -> None:
        self._released.set()

    def stop(self) -> None:
        self._stop = True
        self._released.set()
        with self._lock:
            for s in [self._listener, *self._socks]:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                client, _ = self._listener.accept()
            except OSError:  # the listener closed: stop() ends the loop
                continue
            try:
                server = socket.create_connection(self.target, timeout=5)
                server.settimeout(None)
            except OSError:  # the server is down: the client sees its connection closed
                client.close()
                continue
            with self._lock:
                self._socks += [client, server]
            watch = threading.Event()  # set once this connection's query is held
            threading.Thread(target=self._frontend, args=(client, server, watch), daemon=True).start()
            threading.Thread(target=self._backend, args=(server, client, watch), daemon=True).start()

    def _frontend(self, src: socket.socket, dst: socket.socket, watch: threading.Event) -> None:
        buf = bytearray()
        startup = True  # startup-phase messages have no type byte (SSLRequest, then StartupMessage)
        try:
            while data := src.recv(65536):
                buf += data
                while True:
                    if startup:
                        if len(buf) < 8:
                            break
                        n = int.from_bytes(buf[:4], "big")
                        code = int.from_bytes(buf[4:8], "big")
                        kind, body_at = None, 8
                    else:
                        if len(buf) < 5:
                            break
                        n = int.from_bytes(buf[1:5], "big") + 1
                        kind, body_at, code = buf[0:1], 5, 0
                    if len(buf) < n:
                        break
                    msg = bytes(buf[:n])
                    del buf[:n]
                    if startup and code not in (80877103, 80877104):  # not SSLRequest/GSSENCRequest
                        startup = False
                    pattern = self._pattern
                    if kind == b"Q" and pattern is not None and pattern in msg[body_at:]:
                        self._pattern = None
                        watch.set()
                        self.held.set()
                        self._released.wait()
                        if self._stop:
                            return
                    dst.sendall(msg)
        except OSError:
            pass
        finally:
            _close_both(src, dst)

    def _backend(self, src: socket.socket, dst: socket.socket, watch: threading.Event) -> None:
        buf = bytearray()
        try:
            while data := src.recv(65536):
                # looked at before forwarding: the client sends the held query only once it
                # has the answer to its previous one, so bytes that arrive before the hold
                # cannot be that query's answer (they are not forwarded yet), and bytes
                # that arrive after it can only be
                after_hold = watch.is_set()
                dst.sendall(data)
                if not after_hold or self.answered.is_set():
                    continue
                buf += data  # after the held query: find its CommandComplete ('C')
                while len(buf) >= 5:
                    n = int.from_bytes(buf[1:5], "big") + 1
                    if len(buf) < n:
                        break
                    kind, body = buf[0:1], bytes(buf[5:n])
                    del buf[:n]
                    if kind in (b"C", b"E"):
                        self.outcome = body.rstrip(b"\0") if kind == b"C" else b"ERROR " + body
                        self.answered.set()
                        break
        except OSError:
            pass
        finally:
            _close_both(src, dst)


def _close_both(a: socket.socket, b: socket.socket) -> None:
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
