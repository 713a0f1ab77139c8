"""Real clients over SASL_SSL, SSL (mutual TLS) and SASL_PLAINTEXT against one secured broker:
confluent-kafka (librdkafka), kafka-python, aiokafka, kcat and the Java client produce and
consume with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, checking the broker's certificate
against the test CA made with `openssl` (tls_ca.py). SCRAM users are created by the super
user through AlterUserScramCredentials. Refusals: a wrong password and an unknown user
(SASL_AUTHENTICATION_FAILED as each client surfaces it), a broker certificate from a CA the
client does not trust, an SSL listener with ssl.client.auth=required and a client without a
certificate. Last, a restart: SCRAM users and PLAIN clients keep working."""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.krait_harness import JavaProgram
from tests.security.secure_broker import (
    ADMIN,
    ALICE,
    SCRAM_USERS,
    Credentials,
    SecureBroker,
    aiokafka_config,
    create_scram_users,
    java_properties,
    kafka_python_config,
    kcat_args,
    librdkafka_config,
    sasl_credentials,
    write_properties,
)
from tests.security.tls_ca import CertFiles, make_cert_files

N = 5
MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
JAVA_SOURCE = Path(__file__).with_name("java") / "KraitSecureClient.java"


def _topic(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _user(mechanism: str) -> tuple[str, str]:
    return ALICE if mechanism == "PLAIN" else SCRAM_USERS[mechanism]


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> CertFiles:
    return make_cert_files(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def sb(certs: CertFiles, tmp_path_factory: pytest.TempPathFactory):
    """SASL_SSL (harness port), SSL with ssl.client.auth=required (listener-prefixed; the
    broker-wide key's scope is checked in test_tls_faults), SASL_PLAINTEXT; SCRAM users
    created by the super user."""
    b = SecureBroker(certs, str(tmp_path_factory.mktemp("logs") / "logs"),
                     protocols=("SASL_SSL", "SSL", "SASL_PLAINTEXT"),
                     extra={"listener.name.ssl.ssl.client.auth": "required"}).start()
    try:
        create_scram_users(sasl_credentials(b, "SASL_SSL", "PLAIN", ADMIN))
    except BaseException:
        print(b.log_text())
        b.kill()
        raise
    yield b
    b.stop()


def _creds(sb: SecureBroker, mechanism: str, protocol: str = "SASL_SSL") -> Credentials:
    return sasl_credentials(sb, protocol, mechanism, _user(mechanism))


def _values(n: int = N) -> list[bytes]:
    return [b"v%d" % i for i in range(n)]


# ---------------------------------------------------------------- per client round trips


def confluent_roundtrip(c: Credentials, topic: str, n: int = N) -> list[bytes]:
    from confluent_kafka import Producer

    errors: list[Any] = []
    p = Producer(librdkafka_config(c, error_cb=errors.append))
    for v in _values(n):
        p.produce(topic, v, partition=0)
    assert p.flush(30) == 0, f"undelivered; client errors: {errors}"
    return confluent_consume(c, topic, n)


def confluent_consume(c: Credentials, topic: str, n: int) -> list[bytes]:
    """The first n records of partition 0."""
    from confluent_kafka import Consumer, TopicPartition

    cons = Consumer(librdkafka_config(c, **{"group.id": _topic("g"), "enable.auto.commit": False}))
    cons.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    try:
        for _ in range(60):
            for m in cons.consume(n, timeout=0.5):
                assert m.error() is None, m.error()
                got.append(m.value())
            if len(got) >= n:
                break
    finally:
        cons.close()
    return got


def kafka_python_roundtrip(c: Credentials, topic: str, n: int = N) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    conf = kafka_python_config(c)
    producer = KafkaProducer(**conf)
    try:
        for f in [producer.send(topic, v, partition=0) for v in _values(n)]:
            f.get(20)
    finally:
        producer.close(10)
    consumer = KafkaConsumer(**conf, enable_auto_commit=False, consumer_timeout_ms=10000)
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        for m in consumer:
            got.append(m.value)
            if len(got) >= n:
                break
        return got
    finally:
        consumer.close()


def aiokafka_roundtrip(c: Credentials, topic: str, n: int = N) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.structs import TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(**aiokafka_config(c))
        await producer.start()
        try:
            for v in _values(n):
                await producer.send_and_wait(topic, v, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**aiokafka_config(c), enable_auto_commit=False)
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.seek_to_beginning()
            out: list[bytes] = []
            while len(out) < n:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=1000), 20)
                for msgs in batch.values():
                    out.extend(m.value for m in msgs)
            return out
        finally:
            await consumer.stop()

    return asyncio.run(asyncio.wait_for(run(), 60))


def _kcat() -> str:
    kcat = shutil.which("kcat") or shutil.which("kafkacat")
    if kcat is None:
        pytest.skip("kcat is not installed (apt-get install kcat)")
    return kcat


@functools.cache
def _newer_librdkafka() -> str | None:
    """A directory holding librdkafka.so.1 from confluent-kafka's wheel, or None."""
    import confluent_kafka

    libs = sorted(Path(confluent_kafka.__file__).parent.parent.glob("confluent_kafka.libs/librdkafka*.so.1"))
    if not libs:
        return None
    d = Path(tempfile.mkdtemp(prefix="krait-rdkafka-"))
    atexit.register(shutil.rmtree, d, True)
    (d / "librdkafka.so.1").symlink_to(libs[0])
    return str(d)


def _kcat_env(c: Credentials) -> dict[str, str] | None:
    """kcat runs on the system's librdkafka. Before 2.6.1 its SCRAM client-final message
    repeats the client nonce (librdkafka#4895); Kafka 4 refuses that message (strict nonce
    check, as RFC 5802 asks) and so does Krait. For SCRAM, an older system librdkafka is
    replaced by the newer one confluent-kafka's wheel bundles (kcat itself is unchanged)."""
    if not (c.mechanism or "").startswith("SCRAM"):
        return None
    out = subprocess.run([_kcat(), "-V"], capture_output=True, text=True, timeout=30).stdout
    m = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    if m and tuple(map(int, m.groups())) >= (2, 6, 1):
        return None
    lib = _newer_librdkafka()
    if lib is None:
        pytest.skip(f"kcat's librdkafka is older than 2.6.1 (SCRAM nonce bug, librdkafka#4895): {out.strip()}")
    return {**os.environ, "LD_LIBRARY_PATH": lib}


def kcat_roundtrip(c: Credentials, topic: str, n: int = N) -> list[bytes]:
    kcat, env = _kcat(), _kcat_env(c)
    data = "".join(f"v{i}\n" for i in range(n))
    p = subprocess.run([kcat, *kcat_args(c), "-P", "-t", topic, "-p", "0"], input=data, text=True,
                       capture_output=True, timeout=60, env=env)
    assert p.returncode == 0, p.stderr
    out = subprocess.run([kcat, *kcat_args(c), "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q"],
                         capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    return [line.encode() for line in out.stdout.split()]


ROUNDTRIPS = {"confluent-kafka": confluent_roundtrip, "kafka-python": kafka_python_roundtrip,
              "aiokafka": aiokafka_roundtrip, "kcat": kcat_roundtrip}


@pytest.mark.parametrize("mechanism", MECHS)
@pytest.mark.parametrize("client", list(ROUNDTRIPS))
def test_sasl_ssl_produce_consume(sb: SecureBroker, client: str, mechanism: str) -> None:
    topic = _topic(f"{client}-{mechanism.lower()}")
    assert ROUNDTRIPS[client](_creds(sb, mechanism), topic) == _values(), sb.log_text()


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_sasl_plaintext_scram(sb: SecureBroker, client: str) -> None:
    """The same SCRAM users on the SASL_PLAINTEXT listener (credentials are per broker, not
    per listener)."""
    topic = _topic(f"{client}-plaintext")
    c = _creds(sb, "SCRAM-SHA-512", "SASL_PLAINTEXT")
    assert ROUNDTRIPS[client](c, topic) == _values()


# ---------------------------------------------------------------- the Java client


@pytest.fixture(scope="module")
def java(sb: SecureBroker, certs: CertFiles, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every Java scenario in one JVM: name -> the job's output line ("OK ..." / "ERROR ...")."""
    out = tmp_path_factory.mktemp("java")
    program = JavaProgram(JAVA_SOURCE.read_text(), "KraitSecureClient", out)
    scenarios: dict[str, tuple[str, Credentials]] = {
        "PLAIN": ("roundtrip", _creds(sb, "PLAIN")),
        "SCRAM-SHA-256": ("roundtrip", _creds(sb, "SCRAM-SHA-256")),
        "SCRAM-SHA-512": ("roundtrip", _creds(sb, "SCRAM-SHA-512")),
        "wrong-password": ("roundtrip", _creds(sb, "SCRAM-SHA-512").with_password("not-the-password")),
        "wrong-plain-password": ("roundtrip", _creds(sb, "PLAIN").with_password("not-the-password")),
        "untrusted": ("roundtrip", Credentials(sb.bootstrap("SASL_SSL"), "SASL_SSL", "PLAIN", *ALICE,
                                               ca=certs.other_ca_cert)),
        "mtls": ("roundtrip", Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert,
                                          keystore=certs.client_keystore)),
        "mtls-no-cert": ("roundtrip", Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert)),
        "describe-scram": ("describe-scram", sasl_credentials(sb, "SASL_SSL", "PLAIN", ADMIN)),
    }
    jobs = []
    for name, (kind, creds) in scenarios.items():
        props = write_properties(java_properties(creds), out / f"{name}.properties")
        jobs.append(f"roundtrip:{props}:{_topic('java-' + name.lower())}:{N}" if kind == "roundtrip"
                    else f"{kind}:{props}")
    done = program.run(*jobs, timeout=600)
    lines = {int(line.split()[1]): line.split(" ", 2)[2] for line in done.stdout.splitlines()
             if line.startswith("JOB ")}
    assert done.returncode == 0 and len(lines) == len(jobs), done.stdout[-3000:] + done.stderr[-3000:]
    return {name: lines[i] for i, name in enumerate(scenarios)}


@pytest.mark.parametrize("mechanism", MECHS)
def test_java_sasl_ssl_produce_consume(java: dict[str, str], mechanism: str) -> None:
    assert java[mechanism] == f"OK consumed {N}"


def test_java_wrong_password_refused(java: dict[str, str]) -> None:
    for name in ("wrong-password", "wrong-plain-password"):
        assert java[name].startswith("ERROR") and "SaslAuthenticationException" in java[name], java[name]


def test_java_untrusted_server_certificate_refused(java: dict[str, str]) -> None:
    line = java["untrusted"]
    assert line.startswith("ERROR") and "SSLHandshakeException" in line, line


def test_java_mutual_tls(java: dict[str, str]) -> None:
    assert java["mtls"] == f"OK consumed {N}"


def test_java_without_client_certificate_refused(java: dict[str, str]) -> None:
    line = java["mtls-no-cert"]
    assert line.startswith("ERROR") and "SslAuthenticationException" in line, line


def test_java_admin_describes_scram_users(java: dict[str, str]) -> None:
    line = java["describe-scram"]
    assert line.startswith("OK"), line
    for mech, (user, _) in SCRAM_USERS.items():
        assert f"{user}={mech.replace('-', '_')}/4096" in line, line


# ---------------------------------------------------------------- refusals (Python clients, kcat)


def _confluent_errors(c: Credentials, wait: float = 15.0) -> list[Any]:
    """The errors librdkafka reports (error_cb) while a producer tries to reach the broker."""
    import time

    from confluent_kafka import Producer

    errors: list[Any] = []
    p = Producer(librdkafka_config(c, error_cb=errors.append))
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and not errors:
        try:
            p.list_topics(timeout=1)
        except Exception:
            pass
        p.poll(0.2)
    return errors


@pytest.mark.parametrize("mechanism", MECHS)
def test_confluent_wrong_password_refused(sb: SecureBroker, mechanism: str) -> None:
    from confluent_kafka import KafkaError

    password = f"wrong-{uuid.uuid4().hex}"
    errors = _confluent_errors(_creds(sb, mechanism).with_password(password))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    # a failed authentication never logs a secret (PLAIN sends the password itself)
    assert password not in sb.broker.log_path.read_text(errors="replace")


@pytest.mark.parametrize("mechanism", MECHS)
def test_confluent_unknown_user_refused(sb: SecureBroker, mechanism: str) -> None:
    from confluent_kafka import KafkaError

    c = sasl_credentials(sb, "SASL_SSL", mechanism, ("mallory", "mallory-secret"))
    errors = _confluent_errors(c)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


class _LogText(logging.Handler):
    """Collects what a client library logs: kafka-python and aiokafka report why a
    bootstrap failed in their logs, and raise only a generic bootstrap error."""

    def __init__(self, *loggers: str) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.loggers = [logging.getLogger(name) for name in loggers]

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())

    def __enter__(self) -> _LogText:
        for lg in self.loggers:
            lg.addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        for lg in self.loggers:
            lg.removeHandler(self)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def kafka_python_refusal(c: Credentials) -> tuple[BaseException, str]:
    """kafka-python's exception and log when it cannot get in."""
    from kafka.admin import KafkaAdminClient

    with _LogText("kafka") as log, pytest.raises(Exception) as info:
        KafkaAdminClient(**kafka_python_config(c), bootstrap_timeout_ms=3000).list_topics()
    return info.value, log.text


def aiokafka_refusal(c: Credentials) -> tuple[BaseException, str]:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(**aiokafka_config(c), request_timeout_ms=10000)
        try:
            await producer.start()
        finally:
            await producer.stop()

    with _LogText("aiokafka") as log, pytest.raises(Exception) as info:
        asyncio.run(asyncio.wait_for(run(), 60))
    return info.value, log.text


@pytest.mark.parametrize("mechanism", MECHS)
@pytest.mark.parametrize("refusal", [kafka_python_refusal, aiokafka_refusal], ids=["kafka-python", "aiokafka"])
def test_python_clients_wrong_password_refused(sb: SecureBroker, refusal: Any, mechanism: str) -> None:
    exc, log = refusal(_creds(sb, mechanism).with_password("wrong"))
    # kafka-python: "[Error 58] SaslAuthenticationFailedError", aiokafka: "[Error 58] SaslAuthenticationFailed"
    assert "[Error 58] SaslAuthenticationFailed" in log, (repr(exc), log[-2000:])


def test_kcat_wrong_password_refused(sb: SecureBroker) -> None:
    kcat = _kcat()
    c = _creds(sb, "SCRAM-SHA-512").with_password("wrong")
    out = subprocess.run([kcat, *kcat_args(c), "-L", "-m", "4"], capture_output=True, text=True, timeout=60,
                         env=_kcat_env(c))
    assert out.returncode != 0
    assert "Authentication failed" in out.stderr or "SASL authentication error" in out.stderr, out.stderr


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python", "aiokafka", "kcat"])
def test_untrusted_server_certificate_refused(sb: SecureBroker, certs: CertFiles, client: str) -> None:
    """The client trusts only the second CA, which did not sign the broker's certificate."""
    c = Credentials(sb.bootstrap("SASL_SSL"), "SASL_SSL", "PLAIN", *ALICE, ca=certs.other_ca_cert)
    if client == "confluent-kafka":
        from confluent_kafka import KafkaError

        errors = _confluent_errors(c)
        assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
                   for e in errors), errors
        assert any("certificate verify failed" in e.str() for e in errors), errors
    elif client == "kcat":
        out = subprocess.run([_kcat(), *kcat_args(c), "-L", "-m", "4"], capture_output=True, text=True,
                             timeout=60)
        assert out.returncode != 0 and "certificate verify failed" in out.stderr, out.stderr
    else:
        exc, log = (kafka_python_refusal if client == "kafka-python" else aiokafka_refusal)(c)
        assert "CERTIFICATE_VERIFY_FAILED" in log + repr(_chain(exc)), (repr(_chain(exc)), log[-2000:])


def test_mutual_tls_confluent(sb: SecureBroker, certs: CertFiles) -> None:
    """SSL listener, ssl.client.auth=required: with the client certificate the round trip
    works; without one the broker ends the handshake."""
    from confluent_kafka import KafkaError

    with_cert = Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert, cert=certs.client_cert,
                            key=certs.client_key)
    assert confluent_roundtrip(with_cert, _topic("mtls")) == _values()
    errors = _confluent_errors(Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert))
    assert any(e.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN)
               for e in errors), errors


def test_mutual_tls_kafka_python(sb: SecureBroker, certs: CertFiles) -> None:
    with_cert = Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert, cert=certs.client_cert,
                            key=certs.client_key)
    assert kafka_python_roundtrip(with_cert, _topic("mtls-kp")) == _values()
    exc, log = kafka_python_refusal(Credentials(sb.bootstrap("SSL"), "SSL", ca=certs.ca_cert))
    assert "Bootstrap connection to bootstrap-0 failed" in log, (repr(exc), log[-2000:])


# ---------------------------------------------------------------- persistence (last: restarts the broker)


def test_scram_users_and_plain_survive_restart(sb: SecureBroker) -> None:
    from confluent_kafka.admin import AdminClient

    before = _topic("restart")
    assert confluent_roundtrip(_creds(sb, "SCRAM-SHA-512"), before) == _values()
    sb.restart()
    for mech in MECHS:
        assert confluent_roundtrip(_creds(sb, mech), _topic(f"restart-{mech.lower()}")) == _values(), \
            (mech, sb.log_text())
    assert kafka_python_roundtrip(_creds(sb, "SCRAM-SHA-256"), _topic("restart-kp")) == _values()
    # what was written before the restart, read by a SCRAM user after it
    assert confluent_consume(_creds(sb, "SCRAM-SHA-256"), before, N) == _values()
    admin = AdminClient(librdkafka_config(sasl_credentials(sb, "SASL_SSL", "PLAIN", ADMIN)))
    described = admin.describe_user_scram_credentials([u for u, _ in SCRAM_USERS.values()])
    for mech, (user, _) in SCRAM_USERS.items():
        desc = described[user].result(timeout=30)
        assert [(i.mechanism.name, i.iterations) for i in desc.scram_credential_infos] == \
            [(mech.replace("-", "_"), 4096)], desc
