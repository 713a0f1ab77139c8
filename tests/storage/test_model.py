"""Property test: any sequence of appends, rolls, reopen (clean or crashed), truncation
and DeleteRecords leaves the log reading back exactly what a simple model says."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage.config import LogConfig

from .helpers import append, batch, open_log, read_all

ops = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.integers(1, 4), st.integers(0, 400), st.integers(1, 3)),
        st.tuples(st.just("reopen"), st.booleans()),
        st.tuples(st.just("truncate"), st.floats(0, 1)),
        st.tuples(st.just("delete_records"), st.floats(0, 1)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=ops, interval=st.sampled_from([0, 200, 4096]), seg_bytes=st.sampled_from([600, 3000, 1 << 20]))
def test_log_matches_model(tmp_path_factory, ops, interval, seg_bytes):
    d = tmp_path_factory.mktemp("model")
    cfg = LogConfig(segment_bytes=seg_bytes, index_interval_bytes=interval)
    plog = open_log(d, cfg)
    model: list[bytes] = []  # value per offset
    start = 0
    for op in ops:
        if op[0] == "append":
            _, n, size, nb = op
            bufs = []
            for j in range(nb):
                vals = [b"%d-%d-" % (len(model), j) + b"x" * size for _ in range(n)]
                bufs.append(batch(n, keys=[b"k"] * n, values=vals))
            r = append(plog, *bufs)
            assert r.base_offset == len(model)
            for j in range(nb):
                model += [b"%d-%d-" % (r.base_offset, j) + b"x" * size] * n
        elif op[0] == "reopen":
            if op[1]:
                plog.close()
                plog = open_log(d, cfg, log_start_offset=start)
            else:
                for s in plog.segments:
                    if s.offset_index.writable:
                        s.offset_index.flush()
                plog = open_log(d, cfg, clean_shutdown=False, log_start_offset=start)
        elif op[0] == "truncate":
            target = int(op[1] * len(model))
            if target >= start:
                plog.truncate_to(target)
                model = model[: plog.log_end_offset]
                # truncation cuts at a batch boundary, so it may fall below the log start
                start = min(start, plog.log_end_offset)
                assert plog.log_start_offset == start
        elif op[0] == "delete_records":
            target = start + int(op[1] * (len(model) - start))
            start = plog.delete_records_before(target)
        assert plog.log_end_offset == len(model)
    recs = read_all(plog)
    first = recs[0].offset if recs else start
    assert first <= start or not recs
    assert [r.value for r in recs if r.offset >= start] == model[start:]
    plog.close()
