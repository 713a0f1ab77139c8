"""A TCP relay between one broker and the real ZooKeeper, so that a test can take that
broker's ZooKeeper link away (and only that one's) the way a network does. Nothing of
ZooKeeper is imitated: the bytes are the real server's; the relay only reads the frame
lengths (and, for one fault, a request's type and path) to decide what to pass.

Faults: ``blackhole()`` holds the connections open and forwards nothing either way (a
partition: the client's pings go unanswered, the server expires the session unless the
link heals first); ``lose_reply_to_write(path)`` forwards the broker's next setData of
``path`` to ZooKeeper, drops ZooKeeper's answer to it, cuts the connection and blackholes
the link (the write landed, its outcome never reaches the broker: kazoo's ConnectionLoss);
``heal()`` cuts whatever connections are held and forwards everything again."""

from __future__ import annotations

import selectors
import socket
import struct
import threading

from tests.krait_harness import free_port

_INT = struct.Struct(">i")
_SET_DATA = 5


class _Side:
    """One direction of one connection: its socket, its peer, the bytes of a partial frame."""

    def __init__(self, sock: socket.socket, peer: socket.socket, from_broker: bool) -> None:
        self.sock, self.peer, self.from_broker = sock, peer, from_broker
        self.buf = bytearray()
        #: the first frame each way is the session handshake, without an xid
        self.handshake = True
        #: broker side: xids of the setData requests whose answers are to be lost
        self.marked: set[int] = set()


class ZkProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.port = free_port()
        self._blackhole = False
        self._lose_path: str | None = None
        #: set when a write's answer was lost (the test waits on it)
        self.lost = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self._sel = selectors.DefaultSelector()
        self._sel.register(self._listener, selectors.EVENT_READ, None)
        self._sides: dict[socket.socket, _Side] = {}
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name=f"zk-proxy-{self.port}", daemon=True)

    def connect(self, chroot: str = "") -> str:
        return f"127.0.0.1:{self.port}{chroot}"

    def start(self) -> ZkProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for s in list(self._sides):
                self._close(s)
        self._listener.close()

    # --- faults -----------------------------------------------------------------------------
    def blackhole(self) -> None:
        self._blackhole = True

    def lose_reply_to_write(self, path: str) -> None:
        self.lost.clear()
        self._lose_path = path

    def heal(self) -> None:
        with self._lock:
            self._blackhole = False
            self._lose_path = None
            for s in list(self._sides):
                self._close(s)

    # --- relay ------------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop:
            for key, _ in self._sel.select(0.1):
                with self._lock:
                    if key.fileobj is self._listener:
                        self._accept()
                    elif key.fileobj in self._sides:
                        self._relay(self._sides[key.fileobj])

    def _accept(self) -> None:
        client, _ = self._listener.accept()
        try:
            server = socket.create_connection(self.target, timeout=5)
        except OSError:
            client.close()
            return
        for s, peer, from_broker in ((client, server, True), (server, client, False)):
            s.setblocking(False)
            self._sides[s] = _Side(s, peer, from_broker)
            self._sel.register(s, selectors.EVENT_READ, None)

    def _relay(self, side: _Side) -> None:
        try:
            data = side.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._close(side.sock)
            return
        side.buf += data
        while len(side.buf) >= 4:
            n = _INT.unpack_from(side.buf)[0]
            if len(side.buf) < 4 + n:
                break
            frame = bytes(side.buf[:4 + n])
            del side.buf[:4 + n]
            if not self._pass(side, frame):
                return

    def _pass(self, side: _Side, frame: bytes) -> bool:
        """Forward one frame (or not); False when the connection was cut."""
        if self._blackhole:
            return True
        if side.handshake:
            side.handshake = False
        elif side.from_broker:
            self._mark(side, frame)
        else:
            broker_side = self._sides.get(side.peer)
            xid = _INT.unpack_from(frame, 4)[0]
            if broker_side is not None and xid in broker_side.marked:
                self._lose_path = None
                self._blackhole = True
                self._close(side.sock)
                self.lost.set()
                return False
        try:
            side.peer.setblocking(True)
            side.peer.sendall(frame)
            side.peer.setblocking(False)
        except OSError:
            self._close(side.sock)
            return False
        return True

    def _mark(self, side: _Side, frame: bytes) -> None:
        path = self._lose_path
        if path is None or len(frame) < 16:
            return
        xid, kind, n = struct.unpack_from(">iii", frame, 4)
        if kind == _SET_DATA and frame[16:16 + n].decode(errors="replace") == path:
            side.marked.add(xid)

    def _close(self, s: socket.socket) -> None:
        side = self._sides.get(s)
        for x in (s, side.peer if side is not None else None):
            if x is not None and x in self._sides:
                self._sel.unregister(x)
                del self._sides[x]
                x.close()
