"""JSON as Avro's Java library reads and writes it, for the Avro schema type.

Confluent's registry parses Avro schemas with Avro's Java ``Schema.Parser`` (Jackson, with
comments allowed) and prints them with Jackson's generator. The registry stores and compares
that printed text, so the details that change it are kept here:

- reading: standard JSON plus ``/* */`` and ``//`` comments (Jackson's ``ALLOW_COMMENTS``);
  ``NaN``/``Infinity`` literals refused; a duplicate key keeps its first place and its last
  value (Jackson's ``ObjectNode``); one value only: anything after it (comments included) is
  Avro's "dangling content after end of schema";
- writing: compact, keys in their order, strings escaped as Jackson does (``\\u001F``
  upper-case hex), numbers as Java prints them: ``Double.toString`` (``1.0E10``, ``1.0E-4``,
  ``100.0``), ``Float.toString`` for the 32-bit floats Confluent's normaliser makes, integers
  as they are; a NaN or infinite double as a quoted string (Jackson's
  ``QUOTE_NON_NUMERIC_NUMBERS``).

Values are Python's JSON values: dict, list, str, int, float, bool, None (JSON null).
:class:`Float32` marks a Java ``float``.
"""

from __future__ import annotations

import json
import math
import re
import struct
from decimal import Decimal
from typing import Any


class JsonError(ValueError):
    """The text is not JSON that Avro's parser accepts."""


class Float32(float):
    """A Java ``float`` (written with ``Float.toString``)."""


def _refuse_constant(name: str) -> Any:
    raise JsonError(f"Non-standard token '{name}': not a number in standard JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_JSON_WS = " \t\r\n"


def _blank_comments(text: str) -> str:
    """The text with each comment outside strings replaced by spaces (newlines kept), so
    positions stay the same."""
    if "/" not in text:
        return text
    out = list(text)
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            if c == "\\":
                i += 2
                continue
            if c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "/" and i + 1 < n and text[i + 1] in "*/":
            if text[i + 1] == "*":
                end = text.find("*/", i + 2)
                if end < 0:
                    raise JsonError("Unexpected end-of-input in a comment")
                end += 2
            else:
                end = i + 2
                while end < n and text[end] not in "\r\n":
                    end += 1
            for j in range(i, end):
                if out[j] not in "\r\n":
                    out[j] = " "
            i = end
            continue
        i += 1
    return "".join(out)


def java_trim(text: str) -> str:
    """Java's ``String.trim()``: strips the characters up to U+0020."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def read(text: str) -> Any:
    """The one JSON value in ``text``; :class:`JsonError` when there is none or more."""
    blanked = _blank_comments(text)
    start = 0
    while start < len(blanked) and blanked[start] in _JSON_WS:
        start += 1
    if start == len(blanked):  # Jackson's readTree gives null, which Avro refuses
        raise JsonError("Cannot parse <null> schema")
    try:
        value, end = _DECODER.raw_decode(blanked, start)
    except json.JSONDecodeError as e:
        raise JsonError(f"{e.msg} at line {e.lineno} column {e.colno}") from None
    except ValueError as e:  # an integer too long to convert
        raise JsonError(str(e)) from None
    dangling = java_trim(text[end:])
    if dangling:
        raise JsonError(f"dangling content after end of schema: {dangling}")
    return value


_ESCAPED = re.compile(r'[\x00-\x1f"\\]')
_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _SHORT_ESCAPES.get(c) or f"\\u{ord(c):04X}"


def quote(s: str) -> str:
    """``s`` as a JSON string, escaped as Jackson escapes it."""
    return '"' + _ESCAPED.sub(_escape, s) + '"'


def _java_format(shortest: str) -> str:
    """Java's layout of a finite non-zero number given by its shortest decimal digits:
    plain between 10^-3 and 10^7 (at least one digit after the point), else
    ``d.dddE<exponent>``."""
    sign, digit_tuple, exponent = Decimal(shortest).as_tuple()
    digits = "".join(map(str, digit_tuple)).rstrip("0") or "0"
    assert isinstance(exponent, int)
    e10 = len("".join(map(str, digit_tuple))) - 1 + exponent
    if -3 <= e10 < 7:
        if e10 >= 0:
            text = digits[: e10 + 1].ljust(e10 + 1, "0") + "." + (digits[e10 + 1:] or "0")
        else:
            text = "0." + "0" * (-e10 - 1) + digits
    else:
        text = digits[0] + "." + (digits[1:] or "0") + "E" + str(e10)
    return ("-" if sign else "") + text


def _non_finite_or_zero(x: float) -> str | None:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    return None


def java_double(x: float) -> str:
    """Java's ``Double.toString(x)`` (JDK 19+: the shortest digits that read back as x)."""
    return _non_finite_or_zero(x) or _java_format(repr(float(x)))


def _to_float32(x: float) -> float:
    try:
        return struct.unpack("f", struct.pack("f", x))[0]
    except OverflowError:
        return math.copysign(math.inf, x)


def java_float(x: float) -> str:
    """Java's ``Float.toString((float) x)``."""
    f = _to_float32(x)
    special = _non_finite_or_zero(f)
    if special is not None:
        return special
    for precision in range(1, 10):
        shortest = f"{f:.{precision}g}"
        if _to_float32(float(shortest)) == f:
            return _java_format(shortest)
    return _java_format(repr(f))


_JAVA_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)[fFdD]?")


def java_parse_double(text: str) -> float:
    """Java's ``Double.parseDouble`` for decimal text (hexadecimal floats are refused);
    ValueError with Java's ``NumberFormatException`` message."""
    trimmed = java_trim(text)
    if not trimmed:
        raise ValueError("empty String")
    if not _JAVA_DOUBLE.fullmatch(trimmed):
        raise ValueError(f'For input string: "{trimmed}"')
    number = trimmed.rstrip("fFdD") if trimmed[-1] in "fFdD" else trimmed
    return float(number.replace("Infinity", "inf"))


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integral(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def dumps(value: Any) -> str:
    """``value`` as compact JSON, as Jackson writes a tree."""
    out: list[str] = []
    write(value, out)
    return "".join(out)


def write(value: Any, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, str):
        out.append(quote(value))
    elif isinstance(value, Float32):
        text = java_float(value)
        out.append(text if math.isfinite(value) else quote(text))
    elif isinstance(value, float):
        text = java_double(value)
        out.append(text if math.isfinite(value) else quote(text))
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.append(",")
            out.append(quote(key))
            out.append(":")
            write(item, out)
        out.append("}")
    else:
        raise TypeError(f"not a JSON value: {value!r}")


def java_sorted(keys: Any) -> list[str]:
    """Strings in Java's ``String.compareTo`` order (UTF-16 code units)."""
    return sorted(keys, key=lambda s: s.encode("utf-16-be", "surrogatepass"))


def json_equal(a: Any, b: Any) -> bool:
    """Jackson's ``JsonNode.equals``: the same kind of node with the same value (1 is not
    1.0, objects compare without regard to key order)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and (a == b or (a != a and b != b))
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(map(json_equal, a, b))
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(json_equal(v, b[k]) for k, v in a.items()))
    return type(a) is type(b) and a == b
