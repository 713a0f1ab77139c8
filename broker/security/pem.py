"""PEM helpers shared by the server's TLS (:mod:`broker.security.tls`) and the client's
(:mod:`broker.security.client_security`): a PKCS12 store read as PEM through the
``cryptography`` package, and the private temporary file ``ssl.SSLContext.load_cert_chain``
needs (it reads files only).

Errors are the libraries' own (ImportError without ``cryptography``, ValueError for a
store that does not open); each caller turns them into its kind of error (ConfigError on
the server, ClientError in a client).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Pkcs12Pem", "load_pkcs12", "private_pem"]


@dataclass(frozen=True)
class Pkcs12Pem:
    """The contents of a PKCS12 store as PEM; ``key`` / ``cert`` are empty when absent."""

    key: bytes
    cert: bytes
    ca_certs: list[bytes]

    @property
    def chain(self) -> bytes:
        """The certificate then the CA certificates, as a PEM chain."""
        return b"".join([self.cert, *self.ca_certs])


def load_pkcs12(data: bytes, password: str | None) -> Pkcs12Pem:
    """A PKCS12 store's key (PKCS8, unencrypted), certificate and CA certificates as PEM.

    Raises ImportError without the ``cryptography`` package, ValueError when the store
    does not open (wrong password, not PKCS12)."""
    # imported here: cryptography is only needed by PKCS12 stores
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    pkey, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    pem = serialization.Encoding.PEM
    key_pem = b"" if pkey is None else pkey.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption())
    cert_pem = b"" if cert is None else cert.public_bytes(pem)
    return Pkcs12Pem(key_pem, cert_pem, [c.public_bytes(pem) for c in extra or ()])


@contextmanager
def private_pem(data: bytes) -> Iterator[str]:
    """The path of a file holding ``data`` that only this process's user can read (it may
    hold a private key), removed as soon as the block ends."""
    fd, path = tempfile.mkstemp(prefix="krait-keystore-", suffix=".pem")
    try:
        os.fchmod(fd, 0o600)  # mkstemp's default, said explicitly: the file holds a private key
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        yield path
    finally:
        os.unlink(path)
