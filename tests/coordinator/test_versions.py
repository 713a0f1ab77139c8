"""Every operation at every supported version answers with the kio response type of the same
version module, and that response serializes (so no field has a wrong type or is missing)."""

from __future__ import annotations

import io

import pytest
from kio.serial import entity_writer

from coordinator.responses import response_class

from .harness import Box, Client, E, Harness, request


def serialize(resp) -> bytes:
    buf = io.BytesIO()
    entity_writer(type(resp))(buf, resp)
    return buf.getvalue()


def check(req, box: Box):
    resp = box.value
    assert type(resp) is response_class(type(req))
    assert type(resp).__version__ == type(req).__version__
    serialize(resp)
    return resp


@pytest.mark.parametrize("v", range(10))
def test_join_sync_heartbeat_leave_all_versions(v: int) -> None:
    h = Harness()
    sv, hv, lv = min(v, 5), min(v, 4), min(v, 5)
    a = Client("a")
    box = h.join_until_parked("g", a, v=v)
    h.advance(3000)
    resp = h.absorb_join(a, box)
    serialize(resp)
    assert type(resp).__version__ == v
    assert resp.protocol_name == "range" and len(resp.members) == 1
    # error responses too (protocol_name must still be a str before v7)
    bad = h.join("", Client("x"), v=v)
    assert check(request("join_group", v, group_id="", session_timeout=1, member_id="", protocol_type="c", protocols=[]), bad).error_code == E.invalid_group_id
    sbox = h.sync("g", a, {a.member_id: b"A"}, v=sv)
    assert sbox.value.assignment == b"A" and type(sbox.value).__version__ == sv
    serialize(sbox.value)
    serialize(h.sync("g", Client("z", member_id="nope", generation=1), v=sv).value)
    assert h.heartbeat("g", a, v=hv) == E.none
    r = h.leave("g", a, v=lv)
    assert type(r).__version__ == lv and r.error_code == E.none
    serialize(r)


@pytest.mark.parametrize("v", range(2, 10))
def test_offset_commit_all_versions(v: int) -> None:
    h = Harness()
    partition = {"partition_index": 0, "committed_offset": 4, "committed_metadata": "m", "committed_leader_epoch": 3}
    fields = dict(
        group_id="s", generation_id_or_member_epoch=-1, member_id="",
        topics=[{"name": "t", "partitions": [partition]}],
    )
    req = request("offset_commit", v, **fields)
    box = Box()
    h.c.offset_commit(req, box)
    assert check(req, box).topics[0].partitions[0].error_code == E.none
    # what was committed comes back (the leader epoch exists from OffsetCommit v6)
    [topic] = h.fetch("s", [("t", 0)]).topics
    [p] = topic.partitions
    assert (topic.name, p.partition_index, p.error_code) == ("t", 0, E.none)
    assert (p.committed_offset, p.metadata, p.committed_leader_epoch) == (4, "m", 3 if v >= 6 else -1)


@pytest.mark.parametrize("v", range(1, 10))
def test_offset_fetch_all_versions(v: int) -> None:
    h = Harness()
    h.commit("s", {("t", 0): 4})
    topics = [{"name": "t", "partition_indexes": [0, 1]}]
    if v >= 8:
        req = request("offset_fetch", v, groups=[{"group_id": "s", "topics": topics}, {"group_id": "", "topics": None}])
    else:
        req = request("offset_fetch", v, group_id="s", topics=topics)
    box = Box()
    h.c.offset_fetch(req, box)
    resp = check(req, box)
    if v >= 8:
        assert [g.group_id for g in resp.groups] == ["s", ""]
        assert [g.error_code for g in resp.groups] == [E.none, E.none]
        assert resp.groups[1].topics == ()  # the empty group id has nothing committed
        topics = resp.groups[0].topics
    else:
        topics = resp.topics
    [t] = topics
    assert t.name == "t"
    assert [(p.partition_index, p.committed_offset, p.error_code) for p in t.partitions] == [
        (0, 4, E.none), (1, -1, E.none)
    ]


@pytest.mark.parametrize("v", range(6))
def test_describe_and_list_all_versions(v: int) -> None:
    h = Harness()
    a = Client("a", instance_id="i")
    h.form_group("g", [a], v=5)
    req = request("describe_groups", v, groups=["g", "missing", ""])
    box = Box()
    h.c.describe_groups(req, box)
    groups = check(req, box).groups
    assert [g.group_state for g in groups] == ["Stable", "Dead", "Dead"]
    req = request("list_groups", v)
    box = Box()
    h.c.list_groups(req, box)
    assert [g.group_id for g in check(req, box).groups] == ["g"]


@pytest.mark.parametrize("v", range(3))
def test_delete_groups_all_versions(v: int) -> None:
    h = Harness()
    h.commit("s", {("t", 0): 4})
    req = request("delete_groups", v, groups_names=["s", "x"])
    box = Box()
    h.c.delete_groups(req, box)
    assert [r.error_code for r in check(req, box).results] == [E.none, E.group_id_not_found]


def test_offset_delete_v0() -> None:
    h = Harness()
    h.commit("s", {("t", 0): 4})
    req = request("offset_delete", 0, group_id="s", topics=[{"name": "t", "partitions": [{"partition_index": 0}]}])
    box = Box()
    h.c.offset_delete(req, box)
    assert check(req, box).error_code == E.none
