"""Hostile bytes into every decoder: only ProtocolError subclasses come out, nothing hangs,
and memory stays bounded by the frame size (Python heap via tracemalloc; native
allocations via an address-space limit in a child process)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import tracemalloc
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol import apis, framing
from protocol.compression import Codec, compress, decompress
from protocol.errors import ProtocolError
from protocol.records import build_batch, iter_records, validate_batches

from .samples import sample

SERVED = [(k, v) for k, r in apis.SUPPORTED.items() for v in range(r.served_from, r.max_version + 1)]
FUZZ = settings(max_examples=150, deadline=1000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)


@pytest.fixture(autouse=True)
def _traced():
    tracemalloc.start()
    yield
    tracemalloc.stop()


def must_fail_cleanly(fn, data, *args):
    """Run a decoder on hostile data: it may succeed or raise ProtocolError, nothing else,
    and its Python allocations stay under 64x the input + 2 MiB (zstandard's stream
    reader takes a fixed ~1 MiB output buffer whatever the input)."""
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = fn(*args, data) if args else fn(data)
        if hasattr(result, "__next__"):
            for _ in result:
                pass
    except ProtocolError:
        pass
    peak = tracemalloc.get_traced_memory()[1] - base
    assert peak < 64 * len(data) + (2 << 20), f"{fn.__name__} allocated {peak} bytes for {len(data)} input bytes"


def mutations():
    """Truncate, flip bytes, plant huge lengths: on top of a valid encoding."""
    return st.tuples(
        st.integers(0, 10_000),  # truncate at (mod len+1)
        st.lists(st.tuples(st.integers(0, 10_000), st.sampled_from([
            b"\xff", b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f", b"\x80", b"\x00", b"\xff\xff", b"\x00\x00\x00\x00",
        ])), max_size=4),
    )


def mutate(valid: bytes, mut) -> bytes:
    cut, patches = mut
    buf = bytearray(valid)
    for pos, patch in patches:
        if buf:
            p = pos % len(buf)
            buf[p : p + len(patch)] = patch
    return bytes(buf[: cut % (len(buf) + 1)])


@FUZZ
@given(st.binary(max_size=64))
def test_parse_request_header_random(data):
    must_fail_cleanly(framing.parse_request_header, data)


def _request_decoder(api_key, version):
    def decode(frame):
        h = framing.parse_request_header(frame)
        return framing.decode_request(h, frame)
    decode.__name__ = f"decode_request[{api_key}v{version}]"
    return decode


@pytest.mark.timeout(60)
@settings(max_examples=600, deadline=1000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(pair=st.sampled_from(SERVED), mut=mutations(), noise=st.binary(max_size=48))
def test_decode_request_hostile(pair, mut, noise):
    api_key, version = pair
    valid = framing.encode_request(api_key, version, 1, sample(apis.request_type(api_key, version)))[4:]
    decode = _request_decoder(api_key, version)
    must_fail_cleanly(decode, mutate(valid, mut))
    # random body behind a valid header
    h = framing.parse_request_header(valid)
    must_fail_cleanly(decode, valid[: h.body_offset] + noise)


@pytest.mark.timeout(60)
@settings(max_examples=400, deadline=1000, suppress_health_check=[HealthCheck.too_slow], derandomize=True)
@given(pair=st.sampled_from(SERVED), mut=mutations(), noise=st.binary(max_size=48))
def test_decode_response_hostile(pair, mut, noise):
    api_key, version = pair
    valid = framing.encode_response(api_key, version, 1, sample(apis.response_type(api_key, version)))[4:]

    def decode(frame):
        return framing.decode_response(api_key, version, frame)

    must_fail_cleanly(decode, mutate(valid, mut))
    must_fail_cleanly(decode, noise)


BATCHES = {c: build_batch([(b"k", b"v" * 30), (None, None, [("h", b"x")])] * 3, compression=c) for c in Codec}


@FUZZ
@given(codec=st.sampled_from(list(Codec)), mut=mutations(), noise=st.binary(max_size=128))
def test_record_decoders_hostile(codec, mut, noise):
    data = mutate(BATCHES[codec], mut)
    must_fail_cleanly(validate_batches, data)
    must_fail_cleanly(iter_records, data)
    must_fail_cleanly(validate_batches, noise)
    must_fail_cleanly(iter_records, noise)
    # a batch whose CRC is fixed up after the damage still must not escape the error type
    must_fail_cleanly(iter_records, BATCHES[codec][:61] + data[61:])


@FUZZ
@given(codec=st.sampled_from([*Codec, 5, 99]), noise=st.binary(max_size=256), mut=mutations())
def test_decompress_hostile(codec, noise, mut):
    def dec(data):
        return decompress(codec, data)

    must_fail_cleanly(dec, noise)
    if codec in Codec.__members__.values():
        must_fail_cleanly(dec, mutate(compress(codec, b"hello kafka " * 200), mut))
        for prefix in (b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01", b"\x04\x22\x4d\x18", b"\x28\xb5\x2f\xfd",
                       b"\x1f\x8b\x08\x00"):
            must_fail_cleanly(dec, prefix + noise)


# --- native allocations ----------------------------------------------------------------
# kio's reader is Rust: its allocations are invisible to tracemalloc, and an oversized one
# aborts the process. Plant huge lengths at every position of a valid encoding of every
# served request and response, in a child process whose address space is capped.

_CHILD = textwrap.dedent("""
    import resource, sys
    sys.path[:0] = [{root!r}]
    from protocol import apis, framing
    from protocol.errors import ProtocolError
    from tests.protocol.samples import sample
    frames = []
    for k, r in apis.SUPPORTED.items():
        for v in range(r.served_from, r.max_version + 1):
            for variant in (0, 1):
                req = framing.encode_request(k, v, 1, sample(apis.request_type(k, v), variant))[4:]
                resp = framing.encode_response(k, v, 1, sample(apis.response_type(k, v), variant))[4:]
                frames.append((k, v, req, resp))
    soft = {limit}
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    n = 0
    for k, v, req, resp in frames:
        for valid, is_req in ((req, True), (resp, False)):
            for pos in range(len(valid)):
                for patch in (b"\\x7f\\xff\\xff\\xff", b"\\xff\\xff\\xff\\xff\\x0f", b"\\x7f\\xff"):
                    data = valid[:pos] + patch + valid[pos + len(patch):]
                    try:
                        if is_req:
                            framing.decode_request(framing.parse_request_header(data), data)
                        else:
                            framing.decode_response(k, v, data)
                    except ProtocolError:
                        pass
                    n += 1
    print("ok", n)
""")


def _vm_size() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize")


@pytest.mark.timeout(120)
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs Linux /proc to size the address-space cap")
def test_hostile_lengths_do_not_preallocate_natively():
    root = str(Path(__file__).resolve().parents[2])
    # headroom: the interpreter with kio loaded plus 512 MiB; a preallocation from a
    # planted length asks for 16-32 GiB and would abort the child
    limit = _vm_size() + (512 << 20)
    limit = max(limit, resource.getrlimit(resource.RLIMIT_AS)[0] if resource.getrlimit(resource.RLIMIT_AS)[0] > 0 else 0)
    env = dict(os.environ, RUST_BACKTRACE="0")
    proc = subprocess.run([sys.executable, "-c", _CHILD.format(root=root, limit=limit)], capture_output=True,
                          text=True, timeout=110, env=env)
    assert proc.returncode == 0, f"child died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stdout.startswith("ok")
