"""The syntax of the topic config ``krait.iceberg.partition.spec`` (Redpanda's
``redpanda.iceberg.partition.spec``): the partition spec of a table topic's Iceberg table.

A spec is a parenthesised, comma-separated list of items, each a column (identity) or a
transform of one::

    (partition, hour(timestamp))        the default
    (day(timestamp), bucket(16, key))
    ()                                  unpartitioned

Transforms: ``year``, ``month``, ``day``, ``hour`` (col), ``bucket(N, col)``,
``truncate(W, col)``. A column may be nested (``address.city``).

Declared here, not in tables/ (which turns a spec into a pyiceberg PartitionSpec), because
storage declares the config key and validates its values at CreateTopics and AlterConfigs,
and must not import the layer above it; tables.layout parses with this same parser. Only the
syntax can be checked here: whether the columns exist, and have a type the transform takes,
depends on the table (the decoded modes add the value's fields as columns).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .config_def import INT_MAX, ParsedBy

__all__ = ["DEFAULT_PARTITION_SPEC", "IDENTITY", "PARTITION_SPEC_KEY", "TIME_TRANSFORMS", "PARTITION_SPEC_VALIDATOR",
           "SpecField", "parse_partition_spec"]

PARTITION_SPEC_KEY = "krait.iceberg.partition.spec"
#: a table partitioned by Kafka partition and hour of the record's timestamp
DEFAULT_PARTITION_SPEC = "(partition, hour(timestamp))"
TIME_TRANSFORMS = ("year", "month", "day", "hour")
IDENTITY = "identity"
#: the transforms taking a number before the column
_SIZED = ("bucket", "truncate")
_TOKEN = re.compile(r"\s*(?:(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)|(?P<num>\d+)|(?P<punct>[(),])|(?P<bad>\S))")


@dataclass(frozen=True)
class SpecField:
    """One item of a spec: ``column`` through ``transform`` (``param``: bucket's count,
    truncate's width)."""

    column: str
    transform: str = IDENTITY
    param: int | None = None

    @property
    def name(self) -> str:
        """The partition field's name, as Iceberg's own spec updates name it (Java's
        BaseUpdatePartitionSpec, pyiceberg's UpdateSpec): a table created with a spec and
        one evolved to it then have the same field names."""
        if self.transform == IDENTITY:
            return self.column
        if self.transform == "truncate":
            return f"{self.column}_trunc_{self.param}"
        if self.transform == "bucket":
            return f"{self.column}_bucket_{self.param}"
        return f"{self.column}_{self.transform}"

    def __str__(self) -> str:
        if self.transform == IDENTITY:
            return self.column
        if self.param is not None:
            return f"{self.transform}({self.param}, {self.column})"
        return f"{self.transform}({self.column})"


class _Tokens:
    def __init__(self, text: str) -> None:
        self.items: list[tuple[str, str, int]] = []  # (kind, text, position)
        pos = 0
        while pos < len(text):
            m = _TOKEN.match(text, pos)
            if m is None:  # only trailing whitespace is left
                break
            kind = m.lastgroup or ""
            if kind == "bad":
                raise ValueError(f"unexpected {m[kind]!r} at position {m.start(kind)}")
            self.items.append((kind, m[kind], m.start(kind)))
            pos = m.end()
        self.i = 0
        self.end = len(text)

    def peek(self) -> tuple[str, str, int]:
        return self.items[self.i] if self.i < len(self.items) else ("end", "", self.end)

    def take(self, kind: str, what: str, text: str | None = None) -> str:
        k, t, pos = self.peek()
        if k != kind or (text is not None and t != text):
            found = "the end" if k == "end" else repr(t)
            raise ValueError(f"expected {what} at position {pos}, found {found}")
        self.i += 1
        return t


def _item(tokens: _Tokens) -> SpecField:
    word = tokens.take("name", "a column or a transform")
    if tokens.peek()[1] != "(":
        return SpecField(word)
    tokens.take("punct", "'('", "(")
    if word in TIME_TRANSFORMS:
        field = SpecField(tokens.take("name", f"the column of {word}(col)"), word)
    elif word in _SIZED:
        arg = "N" if word == "bucket" else "W"
        n = int(tokens.take("num", f"the {arg} of {word}({arg}, col)"))
        if not 1 <= n <= INT_MAX:
            raise ValueError(f"the {arg} of {word}({arg}, col) must be between 1 and {INT_MAX}")
        tokens.take("punct", f"',' in {word}({arg}, col)", ",")
        field = SpecField(tokens.take("name", f"the column of {word}({arg}, col)"), word, n)
    else:
        raise ValueError(f"unknown partition transform {word!r} (known: {', '.join((*TIME_TRANSFORMS, *_SIZED))})")
    tokens.take("punct", f"')' closing {word}(", ")")
    return field


@functools.lru_cache(maxsize=256)
def parse_partition_spec(text: str) -> tuple[SpecField, ...]:
    """The items of a spec, in order; ValueError saying what is wrong and where. Besides
    the syntax it refuses what no table could take: an item twice, and two time transforms
    of one column (Iceberg's redundant partitions)."""
    tokens = _Tokens(text)
    tokens.take("punct", "'(' (a spec is a list in parentheses, e.g. (partition, hour(timestamp)))", "(")
    fields: list[SpecField] = []
    if tokens.peek()[1] != ")":
        fields.append(_item(tokens))
        while tokens.peek()[1] == ",":
            tokens.take("punct", "','", ",")
            fields.append(_item(tokens))
    tokens.take("punct", "',' or ')'", ")")
    kind, t, pos = tokens.peek()
    if kind != "end":
        raise ValueError(f"unexpected {t!r} after the closing ')' at position {pos}")
    names: set[str] = set()
    timed: dict[str, str] = {}
    for f in fields:
        if f.name in names:
            raise ValueError(f"{f} is named twice")
        names.add(f.name)
        if f.transform in TIME_TRANSFORMS:
            if f.column in timed:
                raise ValueError(f"{timed[f.column]}({f.column}) and {f} are redundant: one time transform per column")
            timed[f.column] = f.transform
    return tuple(fields)


#: the config validator of ``krait.iceberg.partition.spec``
PARTITION_SPEC_VALIDATOR = ParsedBy(parse_partition_spec,
                                    "[(col, year/month/day/hour(col), bucket(N, col), truncate(W, col), ...)]")
