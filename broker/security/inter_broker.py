"""How this broker reaches the others (replica fetchers, transaction markers): the client
side of the inter-broker listener, from the broker's own keys, as Kafka's brokers read them.

The listener is ``inter.broker.listener.name`` (else ``security.inter.broker.protocol``); its
TLS trust and key stores are the listener's ``ssl.*`` keys (the broker's keystore is its
client certificate when peers require one); SASL uses ``sasl.mechanism.inter.broker.protocol``
with the username and password of the listener's JAAS config for that mechanism
(``listener.name.<l>.<mechanism>.sasl.jaas.config``).
"""

from __future__ import annotations

import asyncio

from protocol.client_errors import ClientError

from ..config import BrokerConfig, ConfigError
from .client_security import ClientSecurity
from .sasl_client import open_secure_connection
from .tls import listener_lookup

_SSL_KEYS = ("ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.certificates", "ssl.keystore.type",
             "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password", "ssl.keystore.certificate.chain",
             "ssl.keystore.key", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm")


def inter_broker_security(config: BrokerConfig) -> ClientSecurity | None:
    """None for a PLAINTEXT inter-broker listener; ConfigError naming the key otherwise."""
    lst = config.inter_broker_listener()
    proto = lst.security_protocol
    if proto == "PLAINTEXT":
        return None
    get = listener_lookup(config.originals, lst.name)
    props = {"security.protocol": proto}
    if proto in ("SSL", "SASL_SSL"):
        for key in _SSL_KEYS:
            v = get(key)
            if v is not None:
                props[key] = v
        if get("ssl.client.auth") in (None, "none") or "ssl.keystore.location" not in props:
            # the keystore is a client certificate only where peers ask for one
            for key in ("ssl.keystore.location", "ssl.keystore.certificate.chain", "ssl.keystore.key"):
                props.pop(key, None)
    if proto in ("SASL_PLAINTEXT", "SASL_SSL"):
        mech = str(config["sasl.mechanism.inter.broker.protocol"]).upper()
        key = f"listener.name.{lst.name.lower()}.{mech.lower()}.sasl.jaas.config"
        jaas = config.originals.get(key) or config.originals.get("sasl.jaas.config")
        if not jaas:
            raise ConfigError(f"Invalid value for configuration {key}: the inter-broker listener {lst.name} uses "
                              f"SASL {mech} (sasl.mechanism.inter.broker.protocol), so the broker needs its own "
                              "username=\"...\" password=\"...\" there")
        props["sasl.mechanism"] = mech
        props["sasl.jaas.config"] = str(jaas)
    try:
        return ClientSecurity.from_props(props)
    except ClientError as exc:
        raise ConfigError(f"Invalid inter-broker security for listener {lst.name}: {exc}") from None


async def open_broker_connection(endpoint: tuple[str, int], security: ClientSecurity | None,
                                 timeout: float) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection to a peer broker, secured and authenticated as the listener requires."""
    if security is None:
        return await asyncio.wait_for(asyncio.open_connection(*endpoint), timeout)
    return await open_secure_connection(endpoint[0], endpoint[1], security, client_id="krait-broker", timeout=timeout)
