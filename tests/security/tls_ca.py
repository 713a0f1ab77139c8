"""A throw-away certificate authority for the security tests, made with the `openssl`
command line (no Python crypto library, so what the tests trust is what an operator's
`openssl` would produce).

It owns the PEM files the TLS tests use:
- the test CA (key + self-signed certificate), also the broker's PEM truststore;
- a server certificate for 127.0.0.1 / localhost (SAN IP:127.0.0.1, DNS:localhost) signed by
  the CA, and a keystore PEM holding its PKCS#8 key followed by the chain (leaf, CA), the
  layout Kafka's `ssl.keystore.type=PEM` reads; the same keystore with the key encrypted
  (`ssl.key.password`);
- a client certificate (CN=client,OU=test,O=krait) for mutual TLS, with its own keystore PEM;
- a second, untrusted CA and a server keystore signed by it (clients trusting only the test
  CA must refuse it).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: the subject Kafka's default principal builder turns into User:CN=client,OU=test,O=krait
CLIENT_DN = "CN=client,OU=test,O=krait"
KEY_PASSWORD = "key-secret"
DAYS = "3650"


@dataclass(frozen=True)
class CertFiles:
    """Paths of every PEM file the CA made (all str, ready for client and broker configs)."""

    dir: str
    ca_cert: str
    ca_key: str
    server_cert: str
    server_key: str
    server_keystore: str            # PKCS#8 key + leaf + CA (Kafka's PEM keystore)
    server_keystore_encrypted: str  # same, key encrypted with key_password
    key_password: str
    client_cert: str
    client_key: str
    client_keystore: str            # the client's key + chain, for Java's ssl.keystore.type=PEM
    other_ca_cert: str              # the untrusted CA
    other_server_keystore: str      # a server keystore signed by the untrusted CA


def _openssl(*args: str, cwd: Path) -> None:
    out = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed:\n{out.stderr}")


def _new_key(d: Path, name: str) -> str:
    # genpkey writes PKCS#8 ("BEGIN PRIVATE KEY"), the only form Kafka's PEM keystore parses
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", name, cwd=d)
    return name


def _ca(d: Path, stem: str, cn: str) -> tuple[str, str]:
    key = _new_key(d, f"{stem}.key")
    _openssl("req", "-x509", "-new", "-key", key, "-sha256", "-days", DAYS, "-subj", f"/O=krait/OU=test/CN={cn}",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
             "-out", f"{stem}.pem", cwd=d)
    return f"{stem}.pem", key


def _signed(d: Path, stem: str, subj: str, ext: str, ca_cert: str, ca_key: str) -> tuple[str, str]:
    key = _new_key(d, f"{stem}.key")
    _openssl("req", "-new", "-key", key, "-subj", subj, "-out", f"{stem}.csr", cwd=d)
    (d / f"{stem}.ext").write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature,keyEncipherment\n"
        "subjectKeyIdentifier=hash\n"
        "authorityKeyIdentifier=keyid,issuer\n" + ext)
    _openssl("x509", "-req", "-in", f"{stem}.csr", "-CA", ca_cert, "-CAkey", ca_key, "-CAcreateserial",
             "-days", DAYS, "-sha256", "-extfile", f"{stem}.ext", "-out", f"{stem}.pem", cwd=d)
    return f"{stem}.pem", key


def _keystore(d: Path, name: str, key: str, *certs: str) -> str:
    (d / name).write_text("".join((d / p).read_text() for p in (key, *certs)))
    return name


def make_cert_files(directory: str | Path) -> CertFiles:
    """Create the CA, server, client and untrusted files under `directory` (made if absent)."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the openssl command line is needed to make the test CA")
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca_cert, ca_key = _ca(d, "ca", "Krait Test CA")
    server_ext = "extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
    server_cert, server_key = _signed(d, "server", "/O=krait/OU=test/CN=localhost", server_ext, ca_cert, ca_key)
    server_keystore = _keystore(d, "server-keystore.pem", server_key, server_cert, ca_cert)
    # PBES2 / AES-256 / HMAC-SHA256: what `openssl pkcs8 -topk8` writes by default in 3.x
    _openssl("pkcs8", "-topk8", "-in", server_key, "-v2", "aes-256-cbc", "-passout", f"pass:{KEY_PASSWORD}",
             "-out", "server-enc.key", cwd=d)
    server_keystore_enc = _keystore(d, "server-keystore-enc.pem", "server-enc.key", server_cert, ca_cert)
    client_cert, client_key = _signed(d, "client", "/O=krait/OU=test/CN=client", "extendedKeyUsage=clientAuth\n",
                                      ca_cert, ca_key)
    client_keystore = _keystore(d, "client-keystore.pem", client_key, client_cert, ca_cert)
    other_ca_cert, other_ca_key = _ca(d, "other-ca", "Untrusted CA")
    other_cert, other_key = _signed(d, "other-server", "/O=evil/CN=localhost", server_ext, other_ca_cert,
                                    other_ca_key)
    other_keystore = _keystore(d, "other-server-keystore.pem", other_key, other_cert, other_ca_cert)

    def p(name: str) -> str:
        return str(d / name)

    return CertFiles(dir=str(d), ca_cert=p(ca_cert), ca_key=p(ca_key), server_cert=p(server_cert),
                     server_key=p(server_key), server_keystore=p(server_keystore),
                     server_keystore_encrypted=p(server_keystore_enc), key_password=KEY_PASSWORD,
                     client_cert=p(client_cert), client_key=p(client_key), client_keystore=p(client_keystore),
                     other_ca_cert=p(other_ca_cert), other_server_keystore=p(other_keystore))
