"""The values :class:`storage.log.PartitionLog` hands out (a byte region to send, the
result of an append) and the partition directory naming rule; apart from log.py so that
the modules the log is built from can use them too. Re-exported by storage.log."""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = ["FileRegion", "AppendResult", "parse_dir_name"]


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes [position, position+length) of an open segment file: whole batches only.

    ``fd`` stays open until the segment is physically deleted (retention renames to
    ``.deleted`` first and removes after ``file.delete.delay.ms``).
    """

    fd: int
    position: int
    length: int
    path: str
    first_offset: int
    segment_base_offset: int

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int
    log_start_offset: int
    duplicate: bool = False


def parse_dir_name(name: str) -> tuple[str, int] | None:
    """``topic-partition`` -> (topic, partition); None for anything else."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        return None
    return topic, int(part)
