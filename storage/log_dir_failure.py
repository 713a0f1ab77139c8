"""LogDirFailureChannel: Kafka's LogDirFailureChannel (KIP-112).

An I/O error (any OSError: ENOSPC, EIO, EROFS, ...) in a partition's files or in a log
dir's checkpoints takes the whole log dir offline, not only the partition that hit it:
the disk under it is what failed, and the next write to any of its partitions would
most likely fail the same way, or half-succeed. Whoever meets the error reports it here
(:meth:`LogDirFailureChannel.maybe_add_offline_log_dir`) and raises KafkaStorageError for
its own operation; the first report of a dir calls the listeners, which take every log
in it offline (:class:`storage.manager.LogManager`) and stop serving its partitions (the
broker). A dir stays offline until the process restarts: its files are recovered then.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from .errors import KafkaStorageError

__all__ = ["LogDirFailureChannel", "LogDirsOfflineError", "check_can_create"]

log = logging.getLogger(__name__)


class LogDirFailureChannel:
    def __init__(self) -> None:
        #: offline log dir -> the message of the error that took it offline
        self.offline: dict[str, str] = {}
        #: called once per dir, with the dir, on its first failure (synchronously: from
        #: inside the storage call that failed, so a listener must not re-enter that log)
        self.listeners: list[Callable[[str], None]] = []

    def is_offline(self, log_dir: str) -> bool:
        return log_dir in self.offline

    def maybe_add_offline_log_dir(self, log_dir: str, message: str, exc: BaseException | None = None) -> None:
        """Report an I/O error in ``log_dir``; only the first report of a dir counts."""
        if log_dir in self.offline:
            return
        log.error("%s: %s", message, exc if exc is not None else "I/O error")
        self.offline[log_dir] = message
        for fn in list(self.listeners):
            try:
                fn(log_dir)
            except Exception:
                log.exception("log dir failure listener failed for %s", log_dir)


class LogDirsOfflineError(OSError):
    """Every log dir failed: the broker cannot run without one."""


def check_can_create(channel: LogDirFailureChannel, log_dirs: list[str], topic: str, partition: int) -> None:
    """Kafka's getOrCreateLog refuses to create a log that may be sitting in an offline
    dir: a new copy elsewhere would hide the old one, and after a restart both would be
    there. Raises KafkaStorageError."""
    if all(channel.is_offline(d) for d in log_dirs):
        raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directories "
                                f"{', '.join(log_dirs)} are offline")
    for log_dir in channel.offline:
        try:
            os.stat(os.path.join(log_dir, f"{topic}-{partition}"))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            pass  # cannot tell: it may be there
        raise KafkaStorageError(f"Can not create log for {topic}-{partition} because log directory {log_dir} "
                                "is offline")
