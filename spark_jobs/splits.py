"""Input partitions of a ``kafka-segments`` batch read, planned by size the way Spark's
file sources plan files, so that the segment size a topic happens to have does not decide
how many tasks read it.

Spark's file sources (``FilePartition.maxSplitBytes`` / ``getFilePartitions``) compute a
target split size

    min(maxPartitionBytes, max(openCostInBytes, totalBytes / minPartitionNum))

where every file costs its length plus ``openCostInBytes`` and ``minPartitionNum`` is
``spark.sql.files.minPartitionNum``, else the default parallelism; they cut files larger
than the target into pieces and pack the pieces into partitions, closing a partition when
the next piece would take it past the target. Here the files are the planned slices (one
per segment overlapping the offset range, :func:`spark_jobs.logdir.plan_partition`): a slice
larger than the target is cut at ``.index`` entries (batch boundaries) into pieces near
the target, and the pieces are packed in (topic, partition, offset) order, next fit. Spark
sorts files by size, largest first, before packing; we keep offset order instead, so each
input partition reads a contiguous run of a topic-partition's log and rows come out in the
order they did when each segment was a partition (segments of a topic are of one size but
the active one, so sorting would buy little balance).

Options (lower-cased keys; the defaults are the session's confs when the source was
registered with :func:`spark_jobs.datasource.register`, else Spark's defaults):

``maxPartitionBytes``   most bytes of log per input partition (``spark.sql.files.maxPartitionBytes``,
                        default 128 MiB); a size as Spark writes them (``64m``, ``1g``, bytes)
``openCostInBytes``     what opening a slice costs, in bytes (``spark.sql.files.openCostInBytes``,
                        default 4 MiB)
``minPartitionNum``     the parallelism the target divides the total by
                        (``spark.sql.files.minPartitionNum``, else the default parallelism;
                        without a session, this machine's CPU count)
``minPartitions``       Spark's Kafka source option: at least this many input partitions,
                        slices cut at index entries as needed
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .logdir import Segment, Slice, split_points, split_slices

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["MAX_PARTITION_BYTES", "OPEN_COST_IN_BYTES", "SplitConf", "max_split_bytes", "pack", "parse_bytes",
           "plan_splits", "session_options", "split_large"]

MAX_PARTITION_BYTES = 128 << 20  # spark.sql.files.maxPartitionBytes' default
OPEN_COST_IN_BYTES = 4 << 20  # spark.sql.files.openCostInBytes' default

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "g": 1 << 30, "gb": 1 << 30,
          "t": 1 << 40, "tb": 1 << 40, "p": 1 << 50, "pb": 1 << 50}
_BYTES_RE = re.compile(r"^\s*(\d+)\s*([a-z]*)\s*$")


def parse_bytes(value: str | int, name: str) -> int:
    """A byte size as Spark's confs take it (JavaUtils.byteStringAs): ``134217728``,
    ``128m``, ``128MB``, ``1g``; a bare number is bytes."""
    if isinstance(value, int):
        return value
    m = _BYTES_RE.match(value.lower())
    if not m or m.group(2) not in _UNITS:
        raise ValueError(f"option {name} must be a size such as 134217728, 128m or 1g, not {value!r}")
    return int(m.group(1)) * _UNITS[m.group(2)]


@dataclass(frozen=True)
class SplitConf:
    max_partition_bytes: int = MAX_PARTITION_BYTES
    open_cost: int = OPEN_COST_IN_BYTES
    min_partition_num: int = 0  # 0: os.cpu_count()
    min_partitions: int = 0  # Spark's Kafka source's minPartitions (0: none asked)

    @classmethod
    def from_options(cls, opts: dict[str, str]) -> SplitConf:
        """From the read's options (lower-cased keys). Bad values raise ValueError."""
        mpb = parse_bytes(opts.get("maxpartitionbytes") or MAX_PARTITION_BYTES, "maxPartitionBytes")
        open_cost = parse_bytes(opts.get("opencostinbytes") or OPEN_COST_IN_BYTES, "openCostInBytes")
        num = int(opts.get("minpartitionnum") or 0)
        min_parts = int(opts.get("minpartitions") or 0)
        if mpb <= 0 or open_cost < 0 or num < 0 or min_parts < 0:
            raise ValueError("maxPartitionBytes must be > 0; openCostInBytes, minPartitionNum and minPartitions >= 0")
        return cls(mpb, open_cost, num, min_parts)


def session_options(spark: SparkSession) -> dict[str, str]:
    """The session's file-split confs as kafka-segments options (lower-cased keys): what a
    read uses when it does not set them itself."""
    conf = spark.conf
    num = (conf.get("spark.sql.files.minPartitionNum", None) or conf.get("spark.sql.leafNodeDefaultParallelism", None)
           or str(spark.sparkContext.defaultParallelism))
    return {"maxpartitionbytes": conf.get("spark.sql.files.maxPartitionBytes", str(MAX_PARTITION_BYTES)),
            "opencostinbytes": conf.get("spark.sql.files.openCostInBytes", str(OPEN_COST_IN_BYTES)),
            "minpartitionnum": num}


def max_split_bytes(slices: list[Slice], conf: SplitConf) -> int:
    """FilePartition.maxSplitBytes over the slices."""
    total = sum(s.size_hint + conf.open_cost for s in slices)
    parallelism = conf.min_partition_num or os.cpu_count() or 1
    return min(conf.max_partition_bytes, max(conf.open_cost, total // parallelism))


def split_large(slices: list[Slice], target: int) -> list[Slice]:
    """Cut each slice larger than ``target`` bytes at .index entries into about
    size / target pieces of near equal size (fewer when the index has too few entries)."""
    out = []
    for s in slices:
        if s.size_hint <= target:
            out.append(s)
            continue
        pieces = -(-s.size_hint // max(1, target))
        bounds = [s.start, *split_points(Segment(0, s.path), s.start, s.end, pieces), s.end]
        out.extend(replace(s, start=a, end=b, size_hint=b - a) for a, b in zip(bounds, bounds[1:], strict=False))
    return out


def pack(slices: list[Slice], target: int, open_cost: int) -> list[list[Slice]]:
    """getFilePartitions' packing, in the given order: a partition is closed when the next
    slice would take it past ``target``; each slice counts its bytes plus ``open_cost``."""
    bins: list[list[Slice]] = []
    cur: list[Slice] = []
    size = 0
    for s in slices:
        if cur and size + s.size_hint > target:
            bins.append(cur)
            cur, size = [], 0
        cur.append(s)
        size += s.size_hint + open_cost
    if cur:
        bins.append(cur)
    return bins


def plan_splits(slices: list[Slice], conf: SplitConf) -> list[tuple[Slice, ...]]:
    """The input partitions for the planned slices (in plan_slices' order: topic,
    partition, offset), each a tuple of slices read one after the other."""
    if not slices:
        return []
    target = max_split_bytes(slices, conf)
    if conf.min_partitions:
        total = sum(s.size_hint for s in slices)
        target = max(1, min(target, -(-total // conf.min_partitions)))
    bins = pack(split_large(slices, target), target, conf.open_cost)
    if len(bins) < conf.min_partitions:
        # packing or the index's granularity left too few: minPartitions as it always was
        bins = [[s] for s in split_slices(slices, conf.min_partitions)]
    return [tuple(b) for b in bins]
