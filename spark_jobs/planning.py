"""Planning a kafka-segments read (driver side, plain Python): which partitions the options
select, the offset range of each (``startingOffsets`` / ``endingOffsets`` / timestamps,
the high watermark, the last stable offset for read_committed) and the slices that cover
it, narrowed by pushed-down filters (:class:`Hints`). The batch reader
(:mod:`spark_jobs.datasource`) plans with :func:`plan_slices`; the streaming reader
(:mod:`spark_jobs.streaming`) uses the same selection, starting offsets and aborted
transactions per micro-batch. Options arrive with lower-cased keys, as Spark's are
case-insensitive.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, replace

from .logdir import LATEST as MAX_OFFSET
from .logdir import PartitionLog, Slice, list_partitions, offset_for_timestamp, plan_partition
from .transactions import READ_COMMITTED, aborted_transactions, isolation_level, last_stable_offset

__all__ = [
    "EARLIEST",
    "LATEST",
    "Hints",
    "bool_option",
    "plan_slices",
    "read_committed",
    "starting_offset",
    "subscribed",
    "with_aborted",
]

#: startingOffsets / endingOffsets JSON: -2 = earliest, -1 = latest (Spark's Kafka source)
EARLIEST, LATEST = -2, -1
#: no bound, in :class:`Hints`
MIN_BOUND, MAX_BOUND = -(2**63), 2**63 - 1


def bool_option(v: str | None, default: bool = False) -> bool:
    """A boolean option: true, 1 or yes (any case); ``default`` when absent."""
    if v is None:
        return default
    return v.strip().lower() in ("true", "1", "yes")


def read_committed(opts: dict[str, str]) -> bool:
    """Is the isolation level (``isolation.level`` or ``kafka.isolation.level``) of the
    options read_committed? An invalid value raises ValueError."""
    return isolation_level(opts) == READ_COMMITTED


@dataclass(frozen=True)
class Hints:
    """What pushed-down filters let us skip (never used to drop a row Spark would keep)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    partition_lo: int = MIN_BOUND
    partition_hi: int = MAX_BOUND  # exclusive
    offset_lo: int = MIN_BOUND
    offset_hi: int = MAX_BOUND  # exclusive
    ts_lo: int | None = None  # ms, inclusive


def _parse_json(options: dict[str, str], name: str) -> dict | None:
    raw = options.get(name.lower())
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"option {name} is not valid JSON: {exc}") from None


def subscribed(plogs: list[PartitionLog], opts: dict[str, str]) -> list[PartitionLog]:
    """The partitions that ``assign`` / ``subscribe`` / ``subscribePattern`` (lower-cased
    option keys) select; none of them: every topic not starting with "__"."""
    assign = _parse_json(opts, "assign")
    if assign is not None:
        wanted = {(t, int(p)) for t, ps in assign.items() for p in ps}
        found = {(p.topic, p.partition) for p in plogs}
        missing = wanted - found
        if missing:
            raise ValueError(f"assigned partitions not found in the log dirs: {sorted(missing)}")
        return [p for p in plogs if (p.topic, p.partition) in wanted]
    if opts.get("subscribe"):
        topics = {t.strip() for t in opts["subscribe"].split(",") if t.strip()}
        return [p for p in plogs if p.topic in topics]
    if opts.get("subscribepattern"):
        pattern = re.compile(opts["subscribepattern"])
        return [p for p in plogs if pattern.fullmatch(p.topic)]
    return [p for p in plogs if not p.topic.startswith("__")]


def starting_offset(plog: PartitionLog, opts: dict[str, str], earliest: int, latest: int, hi: int,
                    default: str = "earliest") -> int:
    """Where ``startingOffsets`` / ``startingTimestamp`` / ``startingOffsetsByTimestamp``
    (lower-cased keys) start this partition, within [earliest, hi]. ``default`` is the
    startingOffsets used when the option is absent (Spark: earliest for batch queries,
    latest for streaming ones)."""
    starting = opts.get("startingoffsets", default)
    start_ts_json = _parse_json(opts, "startingOffsetsByTimestamp")
    if opts.get("startingtimestamp") is not None:
        return offset_for_timestamp(plog, int(opts["startingtimestamp"]), earliest, hi)
    if start_ts_json and str(plog.partition) in start_ts_json.get(plog.topic, {}):
        return offset_for_timestamp(plog, int(start_ts_json[plog.topic][str(plog.partition)]), earliest, hi)
    if starting.strip().startswith("{"):
        spec = int(_parse_json(opts, "startingOffsets").get(plog.topic, {}).get(str(plog.partition), EARLIEST))
        if spec == EARLIEST:
            return earliest
        if spec == LATEST:
            return latest
        return min(max(spec, earliest), latest)
    if starting == "latest":
        return latest
    if starting != "earliest":
        raise ValueError(f"startingOffsets must be 'earliest', 'latest' or JSON, not {starting!r}")
    return earliest


def plan_slices(options: dict[str, str], hints: Hints | None = None) -> list[Slice]:
    """Resolve the options (lower-cased keys) and pushed-down hints into Slices."""
    hints = hints or Hints()
    opts = {k.lower(): v for k, v in options.items()}
    log_dirs = [d.strip() for d in opts["log.dirs"].split(",") if d.strip()]
    plogs = list_partitions(log_dirs)

    plogs = subscribed(plogs, opts)
    if hints.topics is not None:
        plogs = [p for p in plogs if p.topic in hints.topics]
    if hints.partitions is not None:
        plogs = [p for p in plogs if p.partition in hints.partitions]
    plogs = [p for p in plogs if hints.partition_lo <= p.partition < hints.partition_hi]

    ending = opts.get("endingoffsets", "latest")
    end_json = json.loads(ending) if ending.strip().startswith("{") else None
    end_ts_json = _parse_json(opts, "endingOffsetsByTimestamp")
    ignore_hw = opts.get("highwatermark", "checkpoint").lower() == "ignore"
    committed = read_committed(opts)
    # offsets below which no transaction open now starts (read_topic: its table's offsets,
    # earlier last stable offsets): the LSO search starts there instead of the log's start
    stable_from = _parse_json(opts, "stableFrom") or {}

    slices = []
    for plog in plogs:
        earliest, latest = plog.earliest, plog.end_offset(ignore_hw)
        aborted: list[tuple[int, int, int]] = []
        if committed:
            # "latest" is the LSO: what a read_committed consumer's ListOffsets answers
            aborted = aborted_transactions(plog, latest)
            hint = stable_from.get(plog.topic, {}).get(str(plog.partition))
            latest = last_stable_offset(plog, latest, None if hint is None else int(hint))

        def resolve(spec: int, default: int, earliest: int = earliest, latest: int = latest) -> int:
            if spec == EARLIEST:
                return earliest
            if spec == LATEST:
                return latest
            return min(max(spec, earliest), latest)

        # ending first: a starting timestamp search only needs to look below it
        hi = latest
        if opts.get("endingtimestamp") is not None:
            hi = offset_for_timestamp(plog, int(opts["endingtimestamp"]), earliest, latest)
        elif end_ts_json and str(plog.partition) in end_ts_json.get(plog.topic, {}):
            hi = offset_for_timestamp(plog, int(end_ts_json[plog.topic][str(plog.partition)]), earliest, latest)
        elif end_json is not None:
            spec = end_json.get(plog.topic, {}).get(str(plog.partition), LATEST)
            hi = resolve(int(spec), latest)
        elif ending != "latest":
            raise ValueError(f"endingOffsets must be 'latest' or JSON, not {ending!r}")
        lo = starting_offset(plog, opts, earliest, latest, hi)

        # pushed-down filters narrow further (skipping only; Spark re-checks every row)
        lo = max(lo, hints.offset_lo)
        hi = min(hi, hints.offset_hi, MAX_OFFSET)
        if lo >= hi:
            continue
        if hints.ts_lo is not None:
            lo = offset_for_timestamp(plog, hints.ts_lo, lo, hi, exact=False)
            if lo >= hi:
                continue
        planned = plan_partition(plog, lo, hi, ts_lo=hints.ts_lo)
        slices.extend(with_aborted(planned, aborted, lo, hi) if aborted else planned)
    return slices


def with_aborted(planned: list[Slice], aborted: list[tuple[int, int, int]], lo: int, hi: int) -> list[Slice]:
    """Give each slice (one per segment, in order) the aborted transactions overlapping the
    offsets of its segment within [lo, hi), so that executors get only the few they need."""
    bases = [int(os.path.basename(s.path)[:20]) for s in planned]
    out = []
    for i, s in enumerate(planned):
        seg_lo, seg_hi = max(lo, bases[i]), min(hi, bases[i + 1]) if i + 1 < len(bases) else hi
        out.append(replace(s, aborted=tuple(a for a in aborted if a[2] >= seg_lo and a[1] < seg_hi)))
    return out
