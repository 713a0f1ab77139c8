"""Listener endpoints as `listeners` and `advertised.listeners` spell them
(``NAME://host:port``), with the security protocol `listener.security.protocol.map` gives
each name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass


class EndpointError(ValueError):
    """A malformed listener; the broker's config turns it into a ConfigError."""


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True)
class Listener:
    name: str
    host: str
    port: int
    #: PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (listener.security.protocol.map)
    security_protocol: str = "PLAINTEXT"

    def __str__(self) -> str:
        return f"{self.name}://{self.host}:{self.port}"


def parse_protocol_map(entries: list[str]) -> dict[str, str]:
    """listener.security.protocol.map: ``NAME:PROTOCOL`` pairs, names upper-cased as Kafka's
    ListenerName.normalised does."""
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, proto = entry.partition(":")
        name, proto = name.strip().upper(), proto.strip().upper()
        if not sep or not name or proto not in SECURITY_PROTOCOLS:
            raise EndpointError(f"Invalid value {entry!r} for configuration listener.security.protocol.map: "
                              f"must be LISTENER_NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name] = proto
    return out


# Kafka's SocketServer.uriParseExp: a listener name is [A-Za-z0-9_-]+ (urlsplit refuses '_')
_LISTENER_URI = re.compile(r"^([a-zA-Z0-9_-]+)://(\[[0-9a-fA-F:.%a-z]*\]|[^:/\[\]]*):(-?\d+)$")


def parse_listener(spec: str, key: str = "listeners", protocol_map: Mapping[str, str] | None = None) -> Listener:
    m = _LISTENER_URI.match(spec.strip())
    if m is None or not 0 <= int(m.group(3)) <= 65535:
        raise EndpointError(f"Invalid value {spec!r} for configuration {key}: must look like PLAINTEXT://host:port")
    name = m.group(1).upper()
    pmap = protocol_map if protocol_map is not None else {p: p for p in SECURITY_PROTOCOLS}
    if name not in pmap:
        raise EndpointError(f"Invalid value {spec!r} for configuration {key}: no security protocol defined for "
                          f"listener {name} (add it to listener.security.protocol.map)")
    return Listener(name, m.group(2).strip("[]") or "0.0.0.0", int(m.group(3)), pmap[name])
