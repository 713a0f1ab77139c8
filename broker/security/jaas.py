"""Kafka's JAAS configuration grammar (``sasl.jaas.config`` and the broker's
``listener.name.<l>.<mechanism>.sasl.jaas.config``), one parser for the broker and the
clients: ``<LoginModule> <flag> (<name>=<value>)* ;`` repeated, values quoted (``"a b"``,
with backslash escapes) or bare, as Kafka's JaasConfig reads it.

Errors never quote a value: it may be a password.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

__all__ = ["JaasEntry", "JaasError", "parse_jaas_config"]

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([=;])|([^\s=;"]+))', re.S)
_FLAGS = ("required", "requisite", "sufficient", "optional")


class JaasError(ValueError):
    """A JAAS value that does not parse (the message names the problem, not the value)."""


@dataclass(frozen=True)
class JaasEntry:
    """One login module line."""

    login_module: str
    control_flag: str
    options: dict[str, str] = field(repr=False)

    @property
    def short_name(self) -> str:
        return self.login_module.rsplit(".", 1)[-1]


def parse_jaas_config(value: str) -> list[JaasEntry]:
    """Every login module line of ``value``; raises JaasError."""
    tokens: list[tuple[str, str]] = []  # (kind, text): kind q(uoted) / p(unct) / w(ord)
    pos = 0
    text = value.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise JaasError(f"unexpected character at position {pos}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("q", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("p", m.group(2)))
        elif m.group(3) is not None:
            tokens.append(("w", m.group(3)))
    entries: list[JaasEntry] = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "w" or tokens[i + 1][0] != "w":
            raise JaasError("expected '<LoginModule> <flag> name=\"value\" ... ;'")
        module, flag = tokens[i][1], tokens[i + 1][1]
        if flag.lower() not in _FLAGS:
            raise JaasError(f"invalid control flag {flag!r} for {module}")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("p", ";"):
            if (i + 2 >= len(tokens) or tokens[i][0] == "p" or tokens[i + 1] != ("p", "=")
                    or tokens[i + 2][0] == "p"):
                raise JaasError(f"expected name=value options after {module} {flag}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError("the login module line must end with ';'")
        i += 1
        entries.append(JaasEntry(module, flag.lower(), options))
    if not entries:
        raise JaasError("the value is empty")
    return entries
