"""Delayed operations: Fetch long-polls parked until data arrives or their wait expires.

Produce appends call :meth:`Purgatory.notify` for the partition they wrote; a parked fetch
wakes on the first notification for any partition it asked for, re-reads, and parks again
if it still has less than fetch.min.bytes (until max_wait_ms runs out).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class Purgatory:
    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[asyncio.Future]] = {}

    def notify(self, key: tuple[str, int]) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def notify_all(self) -> None:
        for key in list(self._waiters):
            self.notify(key)

    async def wait(self, keys: Iterable[tuple[str, int]], timeout: float) -> bool:
        """Wait until any key is notified (True) or the timeout passes (False)."""
        if timeout <= 0:
            return False
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        keys = list(keys)
        for k in keys:
            self._waiters.setdefault(k, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
            return True
        except TimeoutError:
            return False
        finally:
            for k in keys:
                s = self._waiters.get(k)
                if s is not None:
                    s.discard(fut)
                    if not s:
                        del self._waiters[k]
