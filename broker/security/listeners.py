"""What each listener needs to secure its connections: its TLS context (SSL, SASL_SSL) and
its SASL settings (SASL_PLAINTEXT, SASL_SSL), built once at start-up so that a bad key stops
the broker with a message naming it. Also the connection limits (``max.connections``,
``max.connections.per.ip``, ``max.connections.per.ip.overrides``)."""

from __future__ import annotations

import ssl
from collections import Counter, deque
from dataclasses import dataclass, field

from ..config import BrokerConfig, ConfigError
from ..endpoints import Listener
from .sasl import ListenerSasl, listener_sasl
from .tls import server_context


@dataclass
class ListenerSecurity:
    listener: Listener
    ssl: ssl.SSLContext | None = None
    sasl: ListenerSasl | None = None


def listener_security(config: BrokerConfig) -> dict[str, ListenerSecurity]:
    props = config.originals
    out: dict[str, ListenerSecurity] = {}
    for lst in config.listeners:
        proto = lst.security_protocol
        sec = ListenerSecurity(lst)
        if proto in ("SSL", "SASL_SSL"):
            sec.ssl = server_context(props, lst.name, sasl=proto == "SASL_SSL")
        if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
            sec.sasl = listener_sasl(props, lst.name)
        out[lst.name] = sec
    return out


@dataclass
class ConnectionLimits:
    """Kafka's ConnectionQuotas: a broker-wide and a per-IP cap on open connections."""

    max_connections: int
    per_ip: int
    overrides: dict[str, int] = field(default_factory=dict)
    total: int = 0
    by_ip: Counter = field(default_factory=Counter)
    #: connections accepted over max.connections, not read until a slot frees (oldest first)
    waiting: deque = field(default_factory=deque)

    @classmethod
    def from_config(cls, config: BrokerConfig) -> ConnectionLimits:
        overrides: dict[str, int] = {}
        raw = str(config["max.connections.per.ip.overrides"] or "")
        for item in filter(None, (x.strip() for x in raw.split(","))):
            host, sep, n = item.rpartition(":")
            try:
                if not sep or not host:
                    raise ValueError
                overrides[host.strip()] = int(n)
            except ValueError:
                raise ConfigError(f"Invalid value {raw} for configuration max.connections.per.ip.overrides: "
                                  "expected host:count pairs separated by commas") from None
        per_ip = int(config["max.connections.per.ip"])
        if per_ip == 0 and not overrides:
            raise ConfigError("Invalid value 0 for configuration max.connections.per.ip: "
                              "max.connections.per.ip.overrides must be set when max.connections.per.ip is 0")
        return cls(int(config["max.connections"]), per_ip, overrides)

    def admit(self, ip: str) -> str | None:
        """Count a new connection from ``ip`` (Kafka's ConnectionQuotas.inc); the reason it is
        refused (per-IP cap: closed at once), or None. Over ``max.connections`` it is counted
        but must wait for a slot (``has_slot`` / ``take_slot``), as Kafka's acceptor waits."""
        cap = self.overrides.get(ip, self.per_ip)
        if self.by_ip[ip] >= cap:
            return f"too many connections from {ip} (max.connections.per.ip {cap})"
        self.by_ip[ip] += 1
        return None

    def has_slot(self) -> bool:
        return self.total < self.max_connections

    def take_slot(self) -> None:
        self.total += 1

    def release(self, ip: str, had_slot: bool) -> None:
        if had_slot:
            self.total -= 1
        self.by_ip[ip] -= 1
        if self.by_ip[ip] <= 0:
            del self.by_ip[ip]
