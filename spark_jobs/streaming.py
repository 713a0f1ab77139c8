"""Structured Streaming over the segment files: ``spark.readStream.format("kafka-segments")``.

    from spark_jobs.datasource import register
    register(spark)
    q = (spark.readStream.format("kafka-segments").option("log.dirs", "/var/lib/krait")
         .option("subscribe", "orders").option("maxOffsetsPerTrigger", 100000).load()
         .writeStream.format("parquet").option("path", "out").option("checkpointLocation", "ck")
         .start())

Spark's micro-batch engine drives this reader (PySpark's Python streaming data source API)
in one long-lived Python process on the driver: each trigger asks :meth:`latestOffset`,
writes the answer to the query's offset log, then plans the range with
:meth:`partitions`; executors read the planned slices with the batch reader's
:func:`spark_jobs.logdir.read_slice`. Offsets are what Spark's Kafka source checkpoints,
per-partition log offsets ``{"topic": {"0": 1234}}`` (the next offset to read), so a query
restarted from its checkpoint continues exactly where it stopped, and a replayed batch
plans the same records again (planning depends on the offsets only).

Options are Spark's Kafka source's where they apply:

``subscribe`` / ``subscribePattern`` / ``assign``  exactly one is required, as in Spark.
                        Partitions that appear later (new topics matching the pattern,
                        added partitions) are read from their earliest offset.
``startingOffsets``     ``latest`` (the default for streams, as in Spark), ``earliest`` or
                        JSON; ``startingTimestamp`` / ``startingOffsetsByTimestamp`` too.
                        Used only when the query starts without a checkpoint.
``maxOffsetsPerTrigger`` at most this many offsets per micro-batch, shared out between
                        partitions in proportion to their backlog (Spark's rateLimit: a
                        partition with a backlog gets at least one, so a batch can exceed
                        the limit by fewer offsets than there are partitions).
``minOffsetsPerTrigger`` / ``maxTriggerDelay`` (default ``15m``)  skip a trigger while
                        fewer offsets than this are waiting, unless ``maxTriggerDelay`` has
                        passed since the last batch.
``failOnDataLoss``      ``true`` (default): fail the query when offsets it has not read yet
                        are gone (segments deleted by retention or DeleteRecords, a topic
                        deleted or recreated). ``false``: skip to what is there and report
                        what was skipped in a warning, as Spark's Kafka source does.
``includeHeaders``, ``isolation.level``, ``highWatermark``  as for batch reads. The end of
                        each batch is the high watermark the broker checkpoints (every
                        ``replica.high.watermark.checkpoint.interval.ms``, 5 s by
                        default); with a single broker ``highWatermark=ignore`` reads every
                        whole batch as soon as it is on disk.

``endingOffsets`` and the other ``ending*`` options are refused, as in Spark.
``Trigger.AvailableNow`` is supported: the query reads what was there when it started.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator, Sequence

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .logdir import PartitionLog, list_partitions, plan_partition, read_slice
from .planning import bool_option, read_committed, starting_offset, subscribed, with_aborted
from .schema import arrow_schema, check_schema
from .transactions import aborted_transactions, last_stable_offset

__all__ = ["KafkaSegmentsStreamReader", "DataLossError", "duration_ms"]

Offsets = dict[str, dict[str, int]]  # {"topic": {"partition": next offset}}, Spark's Kafka JSON
_NO_LIMIT = 2**63 - 1


class DataLossError(RuntimeError):
    """Offsets the query has not read are gone and ``failOnDataLoss`` is true."""


_DATA_LOSS_HINT = (
    " Some data may have been lost because they are not available in the log any more; either the"
    " data was aged out by retention or the topic may have been deleted before all the data in the"
    " topic was processed. If you want your streaming query to continue on such cases, set the"
    ' source option "failOnDataLoss" to "false".'
)


def duration_ms(text: str) -> int:
    """Spark's time strings (``15m``, ``10s``, ``500ms``, ``1h``, ``2d``; a bare number is ms)."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", text.lower())
    if not m:
        raise ValueError(f"maxTriggerDelay: not a duration: {text!r} (use e.g. 15m, 30s, 500ms)")
    unit = {None: 1, "ms": 1, "s": 1000, "m": 60_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}[m.group(2)]
    return int(m.group(1)) * unit


def _positive(opts: dict[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None:
        return None
    try:
        v = int(raw)
    except ValueError:
        v = 0
    if v <= 0:
        raise ValueError(f"option {name} must be a positive integer, not {raw!r}")
    return v


def rate_limit(limit: int, start: Offsets, until: Offsets) -> Offsets:
    """Spark's KafkaMicroBatchStream.rateLimit: share ``limit`` offsets between the
    partitions in proportion to their backlog; a partition with a backlog gets at least 1."""
    sizes = {(t, p): end - start[t][p] for t, ps in until.items() for p, end in ps.items() if end - start[t][p] > 0}
    total = float(sum(sizes.values()))
    if total < 1:
        return until
    out: Offsets = {}
    for t, ps in until.items():
        for p, end in ps.items():
            size = sizes.get((t, p))
            if size is None:
                out.setdefault(t, {})[p] = end
                continue
            prorate = limit * (size / total)
            step = int(prorate) if prorate >= 1 else 1
            out.setdefault(t, {})[p] = min(end, start[t][p] + step)
    return out


class KafkaSegmentsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches of Kafka records from one broker's (or several brokers') log dirs."""

    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.options = opts = {k.lower(): v for k, v in options.items()}
        self.schema = check_schema(schema)  # a narrow schema decodes only its columns, as for batch reads
        if "log.dirs" not in opts:
            raise ValueError("the kafka-segments source needs option log.dirs")
        chosen = [k for k in ("assign", "subscribe", "subscribepattern") if opts.get(k)]
        if len(chosen) != 1:
            raise ValueError("a kafka-segments stream needs exactly one of the options assign, subscribe, "
                             f"subscribePattern (got {', '.join(chosen) or 'none'})")
        for k in ("endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp"):
            if k in opts:
                raise ValueError(f"option {k} is not valid in streaming queries (Spark's Kafka source refuses it too)")
        self.log_dirs = [d.strip() for d in opts["log.dirs"].split(",") if d.strip()]
        self.ignore_hw = opts.get("highwatermark", "checkpoint").lower() == "ignore"
        self.read_committed = read_committed(opts)
        self.fail_on_data_loss = bool_option(opts.get("failondataloss"), True)
        self.max_offsets = _positive(opts, "maxOffsetsPerTrigger")
        self.min_offsets = _positive(opts, "minOffsetsPerTrigger")
        self.max_trigger_delay_ms = duration_ms(opts.get("maxtriggerdelay", "15m"))
        self._last_trigger_ms = 0.0
        self._available_now: Offsets | None = None

    # --- the log as it is now ------------------------------------------------------
    def _plogs(self) -> dict[tuple[str, int], PartitionLog]:
        return {(p.topic, p.partition): p for p in subscribed(list_partitions(self.log_dirs), self.options)}

    def _end(self, plog: PartitionLog) -> int:
        end = plog.end_offset(self.ignore_hw)
        if not self.read_committed:
            return end
        return last_stable_offset(plog, end)

    def _latest(self, plogs: dict) -> Offsets:
        out: Offsets = {}
        for (t, p), plog in plogs.items():
            out.setdefault(t, {})[str(p)] = self._end(plog)
        return out

    # --- Spark's calls -------------------------------------------------------------
    def initialOffset(self) -> Offsets:
        out: Offsets = {}
        for (t, p), plog in self._plogs().items():
            latest = self._end(plog)
            out.setdefault(t, {})[str(p)] = starting_offset(plog, self.options, plog.earliest, latest, latest,
                                                            default="latest")
        return out

    def getDefaultReadLimit(self) -> ReadLimit:
        # A bound, even a huge one, when minOffsetsPerTrigger is set: Spark passes
        # ReadAllAvailable only where every available record must be read (Trigger.Once,
        # AvailableNow), and then the minimum must not hold a batch back either.
        if self.max_offsets is not None or self.min_offsets is not None:
            return ReadMaxRows(self.max_offsets or _NO_LIMIT)
        return ReadAllAvailable()

    def latestOffset(self, start: Offsets, limit: ReadLimit) -> Offsets:
        plogs = self._plogs()
        latest = self._latest(plogs)
        if self._available_now is not None:  # AvailableNow: never beyond what was there at its start
            latest = {t: {p: min(o, self._available_now.get(t, {}).get(p, o)) for p, o in ps.items()}
                      for t, ps in latest.items()}
        # Partitions the start does not know (new since then) begin at their earliest offset;
        # partitions that are gone keep their start, so that partitions() reports the loss.
        begin: Offsets = {}
        for (t, p), plog in plogs.items():
            begin.setdefault(t, {})[str(p)] = start.get(t, {}).get(str(p), plog.earliest)
        until: Offsets = {t: dict(ps) for t, ps in latest.items()}
        for t, ps in start.items():
            for p, o in ps.items():
                if p in until.get(t, {}):
                    continue
                if self.fail_on_data_loss:  # kept, so that partitions() fails the batch on it
                    until.setdefault(t, {})[p] = o
                    begin.setdefault(t, {})[p] = o
                else:
                    self._data_loss(f"partition {t}-{p} is gone from the log dirs (topic deleted?); "
                                    f"reading it stops at offset {o}")
        if isinstance(limit, ReadAllAvailable):
            return until
        available = sum(max(0, until[t][p] - begin[t][p]) for t, ps in until.items() for p in ps)
        now = time.monotonic() * 1000
        if (self.min_offsets is not None and available < self.min_offsets
                and now - self._last_trigger_ms < self.max_trigger_delay_ms):
            return start
        if isinstance(limit, ReadMaxRows) and limit.max_rows < available:
            until = rate_limit(limit.max_rows, begin, until)
        if until != start:
            self._last_trigger_ms = now
        return until

    def reportLatestOffset(self) -> Offsets | None:
        return self._latest(self._plogs())

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = self._latest(self._plogs())

    def partitions(self, start: Offsets, end: Offsets) -> Sequence[InputPartition]:
        plogs = self._plogs()
        out: list[InputPartition] = []
        for t, ps in sorted(end.items()):
            for p, hi in sorted(ps.items(), key=lambda kv: int(kv[0])):
                plog = plogs.get((t, int(p)))
                known = p in start.get(t, {})
                if plog is None:
                    lo = start.get(t, {}).get(p, hi)
                    if hi > lo or known:
                        self._data_loss(f"partition {t}-{p} is gone from the log dirs (topic deleted?); "
                                        f"offsets {lo} to {hi} of it were not read")
                    continue
                lo = start[t][p] if known else plog.earliest
                if not known and plog.earliest > 0:
                    self._data_loss(f"added partition {t}-{p} starts from {plog.earliest} instead of 0; "
                                    f"offsets 0 to {plog.earliest} of it were not read")
                if hi < lo:
                    self._data_loss(f"partition {t}-{p}'s offset was changed from {lo} to {hi}, "
                                    "some data may have been missed")
                    continue
                if lo < plog.earliest:
                    self._data_loss(f"cannot read offsets {lo} to {min(hi, plog.earliest)} of {t}-{p}: "
                                    f"its log now starts at offset {plog.earliest}")
                    lo = plog.earliest
                if lo >= hi:
                    continue
                planned = plan_partition(plog, lo, hi)
                if planned and self.read_committed:
                    aborted = aborted_transactions(plog, plog.end_offset(self.ignore_hw))
                    planned = with_aborted(planned, aborted, lo, hi) if aborted else planned
                out.extend(InputPartition(s) for s in planned)
        return out

    def read(self, partition: InputPartition) -> Iterator:
        s = partition.value
        if not os.path.exists(s.path):
            self._data_loss(f"segment {s.path} of {s.topic}-{s.partition} was deleted before offsets "
                            f"{s.offset_lo} to {s.offset_hi} could be read from it")
            return iter(())
        return read_slice(s, arrow_schema(self.schema))

    def commit(self, end: Offsets) -> None:
        """Nothing to release: the source holds no resources between batches."""

    def _data_loss(self, msg: str) -> None:
        if self.fail_on_data_loss:
            raise DataLossError(msg + "." + _DATA_LOSS_HINT)
        print(f"WARN kafka-segments: {msg}; skipped (failOnDataLoss=false)", file=sys.stderr, flush=True)
