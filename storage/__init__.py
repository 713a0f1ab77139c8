"""The on-disk partition log: segments, sparse indexes, recovery, retention, compaction. Synchronous; no asyncio."""
