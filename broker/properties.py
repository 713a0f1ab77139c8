"""Java's ``.properties`` format, read exactly as ``java.util.Properties.load(InputStream)``
reads it, for server.properties and for client property files alike (``--command-config``,
``--add-config-file``): Kafka reads both with ``Utils.loadProps``.

The rules: a file is ISO-8859-1 (other characters are written ``\\uXXXX``); lines end at
``\\n``, ``\\r`` or ``\\r\\n``; leading blanks (space, tab, form feed) are skipped; a line whose
first character is ``#`` or ``!`` is a comment (never continued); an odd number of
backslashes at the end of a line continues it on the next, whose leading blanks are dropped;
the key ends at the first unescaped ``=``, ``:`` or blank, then blanks and at most one ``=``
or ``:`` separate it from the value; in keys and values ``\\t \\n \\r \\f`` and ``\\uXXXX`` are
escapes and a backslash before any other character stands for that character (so ``\\=``,
``\\:`` and ``\\ `` put separators in a key). A later duplicate key wins.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["parse_properties", "read_properties"]

_BLANKS = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")


def _logical_lines(text: str) -> list[str]:
    """Java's LineReader: natural lines joined at their continuations, comments and blank
    lines dropped."""
    out: list[str] = []
    pending: str | None = None  # a logical line being continued
    for natural in re.split(r"\r\n|\r|\n", text):
        line = natural.lstrip(_BLANKS)
        if pending is None:
            if not line or line[0] in "#!":
                continue
        elif not line:
            # a continuation onto an empty line ends the logical line there
            out.append(pending)
            pending = None
            continue
        backslashes = len(line) - len(line.rstrip("\\"))
        joined = (pending or "") + line
        if backslashes % 2:
            pending = joined[:-1]
        else:
            out.append(joined)
            pending = None
    if pending:
        out.append(pending)  # a backslash at the end of the file is dropped
    return out


def _unescape(text: str) -> str:
    """Properties.loadConvert."""
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2:i + 6]
            if not _HEX4.fullmatch(digits):
                raise ValueError("Malformed \\uxxxx encoding.")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """One logical line -> (key, value), as Properties.load0 splits it."""
    i = 0
    while i < len(line) and line[i] not in "=:" + _BLANKS:
        i += 2 if line[i] == "\\" else 1
    i = min(i, len(line))
    key = line[:i]
    j = i
    while j < len(line) and line[j] in _BLANKS:
        j += 1
    if j < len(line) and line[j] in "=:":
        j += 1
        while j < len(line) and line[j] in _BLANKS:
            j += 1
    return _unescape(key), _unescape(line[j:])


def parse_properties(text: str) -> dict[str, str]:
    """``.properties`` text -> dict (ValueError on a malformed ``\\uXXXX`` escape)."""
    return dict(_split(line) for line in _logical_lines(text))


def read_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """A ``.properties`` file -> dict; ISO-8859-1, as Properties.load(InputStream) reads it."""
    return parse_properties(Path(path).read_bytes().decode("latin-1"))
