"""Kafka's text checkpoint files (``recovery-point-offset-checkpoint`` and friends).

Format (Kafka's CheckpointFile with version 0)::

    0
    <number of entries>
    <topic> <partition> <offset>
    ...

Writes go to ``<file>.tmp``, are fsynced, then atomically renamed over the old file and
the directory is fsynced, so a crash leaves either the old or the new file, never half
(:func:`atomic_write`, shared with the partition's ``leader-epoch-checkpoint``, whose
header is the same version and count lines: :func:`entry_lines`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "RECOVERY_POINT",
    "LOG_START_OFFSET",
    "REPLICATION_OFFSET",
    "CLEANER_OFFSET",
    "CLEAN_SHUTDOWN",
    "CheckpointError",
    "read_checkpoint",
    "write_checkpoint",
    "entry_lines",
    "atomic_write",
    "fsync_file",
    "fsync_dir",
]

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
REPLICATION_OFFSET = "replication-offset-checkpoint"
CLEANER_OFFSET = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

_VERSION = 0

TopicPartition = tuple[str, int]


class CheckpointError(ValueError):
    """A checkpoint file that does not parse; the message names the file and line."""


def fsync_dir(path: str) -> None:
    """fsync a directory so a rename or create inside it is durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def entry_lines(path: str, text: str, version: int = _VERSION) -> list[str]:
    """The entry lines of a checkpoint's text after checking its version and count lines
    (Kafka's CheckpointReadBuffer); raises CheckpointError naming ``path``."""
    lines = text.splitlines()
    if not lines:
        raise CheckpointError(f"{path}: empty file")
    if lines[0].strip() != str(version):
        raise CheckpointError(f"{path}: unrecognized version {lines[0]!r}")
    try:
        count = int(lines[1])
    except (IndexError, ValueError):
        raise CheckpointError(f"{path}: line 2 is not an entry count") from None
    # Kafka tolerates no trailing garbage: the count must match the entries exactly.
    entries = [e for e in lines[2:] if e.strip()]
    if len(entries) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


def read_checkpoint(path: str) -> dict[TopicPartition, int]:
    """Parse a checkpoint; a missing file is empty, a malformed one raises CheckpointError."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    out: dict[TopicPartition, int] = {}
    for n, line in enumerate(entry_lines(path, text), start=3):
        parts = line.split(" ")
        if len(parts) != 3:
            raise CheckpointError(f"{path}: line {n} is not 'topic partition offset': {line!r}")
        try:
            out[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise CheckpointError(f"{path}: line {n} has a non-numeric field: {line!r}") from None
    return out


def write_checkpoint(path: str, entries: Mapping[TopicPartition, int]) -> None:
    """Atomically replace ``path`` with the given entries (tmp + fsync + rename)."""
    lines = [str(_VERSION), str(len(entries))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(entries.items())]
    atomic_write(path, ("\n".join(lines) + "\n").encode())


def atomic_write(path: str, data: bytes, *, sync: bool = True) -> None:
    """Replace ``path`` with ``data``: write ``<path>.tmp``, fsync it, rename it over
    ``path``, fsync the directory. Without ``sync`` the rename is still atomic but
    nothing is fsynced (the caller makes it durable later: :func:`fsync_file`).
    Raises OSError."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(os.path.dirname(os.path.abspath(path)))


def fsync_file(path: str) -> None:
    """fsync a file and its directory (a file written by ``atomic_write(sync=False)``)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    fsync_dir(os.path.dirname(os.path.abspath(path)))
