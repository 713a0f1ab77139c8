"""What ``krait groups`` knows of a group, from Kafka's own APIs only (no Krait-only request):

* the group type, from ListGroups v5's GroupType (``classic`` or ``consumer``);
* a classic group from DescribeGroups, a consumer (KIP-848) group from
  ConsumerGroupDescribe: epochs, the server assignor, each member's epoch with its current
  and target assignment (:func:`describe_group`);
* the ``--explain`` view (:func:`explain`): why a group is rebalancing, derived from those
  answers, and what they cannot tell.

What Kafka's answers cannot tell, and where to look instead: a classic group in
PreparingRebalance is described with all its members, with nothing saying which of them
already sent JoinGroup again (Kafka describes members without their metadata unless the
group is Stable), nor since when it rebalances; a consumer-group member's partitions
pending revocation are not in ConsumerGroupDescribe (its Assignment holds the partitions
the member keeps). For both, the broker logs one line naming the members a rebalance has
waited more than 5 s for (coordinator/diagnostics.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from protocol.apis import ApiKey
from protocol.client_errors import check, kafka_error
from protocol.errors import ErrorCode, KafkaError

from .admin_client import AdminClient, GroupDescription, GroupMember

__all__ = [
    "GroupView",
    "ListedGroup",
    "ViewMember",
    "assignment_string",
    "describe_group",
    "display_type",
    "explain",
    "list_groups",
]

#: ConsumerGroupDescribe v1's MemberType
MEMBER_TYPE_CLASSIC = 0
MEMBER_TYPE_CONSUMER = 1


def display_type(group_type: str) -> str:
    """A GroupType as kafka-consumer-groups.sh prints it (Kafka's GroupType.toString)."""
    return group_type.capitalize() if group_type else "Unknown"


@dataclass
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    #: ListGroups v5's GroupType (``classic``, ``consumer``); "" from older brokers
    group_type: str


@dataclass
class ViewMember(GroupMember):
    #: consumer groups: the member's epoch (None for a classic group's members)
    member_epoch: int | None = None
    #: consumer groups: the member's target assignment, topic -> partitions
    target: dict[str, list[int]] | None = None
    #: ConsumerGroupDescribe v1's MemberType (-1: unknown)
    member_type: int = -1


@dataclass
class GroupView(GroupDescription):
    group_type: str = "classic"
    #: the assignor: a consumer group's server assignor, a classic group's elected protocol
    #: (Kafka's DescribeGroups tells it only for a Stable group)
    assignor: str = ""
    group_epoch: int | None = None
    #: the epoch of the target assignment (consumer groups)
    assignment_epoch: int | None = None


def list_groups(admin: AdminClient, states: Iterable[str] = (), types: Iterable[str] = ()) -> list[ListedGroup]:
    """Every group of every broker, with its state and type (ListGroups v4+ filters by
    state, v5+ by type; the filters are applied here too for older brokers)."""
    states, types = list(states), [t.lower() for t in types]
    out: dict[str, ListedGroup] = {}
    for node_id in admin.node_ids():
        resp = admin.node(node_id).request(ApiKey.LIST_GROUPS, states_filter=states, types_filter=types)
        check(resp.error_code, context=f"ListGroups on broker {node_id}")
        for g in resp.groups:
            gid = str(g.group_id)
            gtype = str(getattr(g, "group_type", "") or "")
            if not gtype:  # before ListGroups v5 every group was classic
                gtype = "classic"
            out[gid] = ListedGroup(gid, str(g.protocol_type), str(getattr(g, "group_state", "") or ""), gtype)
    listed = list(out.values())
    if states:
        wanted = {s.lower() for s in states}
        listed = [g for g in listed if not g.state or g.state.lower() in wanted]
    if types:
        listed = [g for g in listed if g.group_type.lower() in types]
    return listed


def _partitions(assignment) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for tp in assignment.topic_partitions:
        out.setdefault(str(tp.topic_name), []).extend(int(p) for p in tp.partitions)
    return {t: sorted(ps) for t, ps in out.items()}


def describe_consumer_group(admin: AdminClient, group_id: str) -> GroupView | None:
    """ConsumerGroupDescribe of one group; None when the group is not a consumer group
    (GROUP_ID_NOT_FOUND) or the broker does not serve ConsumerGroupDescribe."""
    node = admin.find_coordinator(group_id)
    conn = admin.node(node[0])
    try:
        conn.version(ApiKey.CONSUMER_GROUP_DESCRIBE)
    except KafkaError:
        return None
    resp = conn.request(ApiKey.CONSUMER_GROUP_DESCRIBE, group_ids=[group_id], include_authorized_operations=False)
    if not resp.groups:
        return None
    g = resp.groups[0]
    code = int(g.error_code)
    if code == ErrorCode.group_id_not_found:
        return None
    if code:
        raise kafka_error(code, g.error_message, context=f"group '{group_id}'")
    members = [
        ViewMember(str(m.member_id), m.instance_id, str(m.client_id), str(m.client_host), _partitions(m.assignment),
                   member_epoch=int(m.member_epoch), target=_partitions(m.target_assignment),
                   member_type=int(getattr(m, "member_type", -1)))
        for m in g.members
    ]
    return GroupView(str(g.group_id), str(g.group_state), "consumer", "", members, 0, node, group_type="consumer",
                     assignor=str(g.assignor_name), group_epoch=int(g.group_epoch),
                     assignment_epoch=int(g.assignment_epoch))


def describe_group(admin: AdminClient, group_id: str, group_type: str | None) -> GroupView:
    """A group described with the API of its type (``group_type`` from ListGroups; None when
    not listed). A consumer group the broker no longer knows as one is described with
    DescribeGroups, which says Dead for an unknown group, as Kafka's admin client does."""
    if group_type == "consumer":
        view = describe_consumer_group(admin, group_id)
        if view is not None:
            return view
    d = admin.describe_group(group_id)
    members = [ViewMember(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.assignment)
               for m in d.members]
    return GroupView(d.group_id, d.state, d.protocol_type, d.protocol, members, d.error_code, d.coordinator,
                     group_type="classic", assignor=d.protocol)


def assignment_string(assignment: dict[str, list[int]] | None) -> str:
    """kafka-consumer-groups.sh's form of an assignment: ``t:0,1;u:2`` (``-`` when empty)."""
    parts = sorted(f"{t}:{','.join(str(p) for p in sorted(ps))}" for t, ps in (assignment or {}).items() if ps)
    return ";".join(parts) if parts else "-"


# --- --explain ---------------------------------------------------------------------------------

_CLASSIC_STATES = {
    "PreparingRebalance": [
        "Rebalancing: the coordinator waits for every member to send JoinGroup again (to rejoin); a member",
        "that does not within the rebalance timeout (the largest max.poll.interval.ms of the members) is evicted.",
        "Which members have rejoined, and since when the group rebalances, are not part of Kafka's DescribeGroups",
        "answer: the broker logs \"group {g}: rebalance (generation N) waiting ...s for members [...] to rejoin\"",
        "naming them once the rebalance has waited 5 s.",
    ],
    "CompletingRebalance": [
        "Every member rejoined; the coordinator waits for the leader's SyncGroup with the new assignment",
        "(members that do not send SyncGroup within the rebalance timeout are evicted).",
    ],
    "Stable": ["Stable: every member has its assignment; nothing is pending."],
    "Empty": ["Empty: no member; committed offsets are kept."],
}


def _set(assignment: dict[str, list[int]] | None) -> set[tuple[str, int]]:
    return {(t, p) for t, ps in (assignment or {}).items() for p in ps}


def _tps(tps: Iterable[tuple[str, int]]) -> str:
    items = sorted(tps)
    return "[" + ", ".join(f"{t}-{p}" for t, p in items) + "]"


def _who(m: GroupMember) -> str:
    inst = f"instance-id {m.group_instance_id}, " if m.group_instance_id else ""
    return f"{m.member_id} ({inst}client-id {m.client_id}, host {m.client_host})"


def _explain_classic(v: GroupView) -> list[str]:
    lines = [f"  {line.format(g=v.group_id)}" for line in _CLASSIC_STATES.get(v.state, [f"State {v.state}."])]
    for m in v.members:
        lines.append(f"  member {_who(m)}: assignment {assignment_string(m.assignment)}")
    return lines


def _member_state(m: ViewMember, target_epoch: int, owners: dict[tuple[str, int], str]) -> tuple[str, list[str]]:
    """The member's state as far as ConsumerGroupDescribe tells it, and what it waits for
    (``owners``: partition -> the member whose current assignment has it)."""
    current, target = _set(m.assignment), _set(m.target)
    revoke, receive = current - target, target - current
    notes = []
    if revoke:
        notes.append(f"to revoke {_tps(revoke)} (still owned, not in its target)")
    if receive:
        held: dict[str, set[tuple[str, int]]] = {}
        for tp in receive:
            if tp in owners:
                held.setdefault(owners[tp], set()).add(tp)
        notes.append(f"to receive {_tps(receive)}"
                     + "".join(f"; {_tps(tps)} held by {mid} until it revokes them" for mid, tps in sorted(held.items())))
    epoch = m.member_epoch if m.member_epoch is not None else -1
    if epoch == target_epoch:
        if not receive and not revoke:
            return "Stable", notes
        return "UnreleasedPartitions (waits for other members to release its new partitions)", notes
    if epoch < target_epoch:
        if revoke:
            return "UnrevokedPartitions (must revoke before it reaches the target epoch)", notes
        return ("behind the target epoch: revoking partitions ConsumerGroupDescribe does not report, or no "
                "heartbeat since the new target"), notes
    return "ahead of the target epoch (the target assignment is being computed)", notes


def _explain_consumer(v: GroupView) -> list[str]:
    target_epoch = v.assignment_epoch if v.assignment_epoch is not None else -1
    lines = []
    if v.group_epoch is not None and v.group_epoch > target_epoch:
        lines.append(f"  Assigning: the group epoch {v.group_epoch} is ahead of the target assignment epoch "
                     f"{target_epoch}; the next heartbeat computes the new target.")
    members = [m for m in v.members if isinstance(m, ViewMember)]
    owners = {tp: m.member_id for m in members for tp in _set(m.assignment)}
    awaited: set[tuple[str, int]] = set()
    for m in members:
        awaited |= _set(m.target) - _set(m.assignment)
    behind = [m.member_id for m in members if (m.member_epoch if m.member_epoch is not None else -1) < target_epoch]
    for m in members:
        state, notes = _member_state(m, target_epoch, owners)
        lines.append(f"  member {_who(m)}")
        lines.append(f"    epoch {m.member_epoch} (target epoch {target_epoch}): {state}")
        lines.append(f"    current assignment {assignment_string(m.assignment)}, target assignment "
                     f"{assignment_string(m.target)}")
        lines.extend(f"    {n}" for n in notes)
    unowned = awaited - set(owners)
    if unowned:
        lines.append(f"  Partitions {_tps(unowned)} are in a target assignment but in no member's current "
                     f"assignment: free, to be given at their new owner's next heartbeat, or pending revocation "
                     f"by a member behind the target epoch ({', '.join(behind) or 'none'}).")
    if v.state not in ("Stable", "Empty"):
        lines.append(f"  Partitions pending revocation are not part of ConsumerGroupDescribe; the broker logs "
                     f"\"group {v.group_id}: epoch N waiting ...s for member M to revoke [...]\" once a member has "
                     f"held them 5 s.")
    elif v.state == "Stable":
        lines.insert(0, "  Stable: every member has reached the target assignment; nothing is pending.")
    return lines


def explain(v: GroupView) -> list[str]:
    """The --explain view of a group: a header line, then what the group waits for."""
    node, host, port = v.coordinator or (-1, "-", -1)
    if v.group_type == "consumer":
        head = (f"GROUP '{v.group_id}' (Consumer, assignor {v.assignor or '-'}): state {v.state}, group epoch "
                f"{v.group_epoch}, target assignment epoch {v.assignment_epoch}, {len(v.members)} members, "
                f"coordinator {host}:{port} ({node})")
        return ["", head, *_explain_consumer(v)]
    head = (f"GROUP '{v.group_id}' ({display_type(v.group_type)}, protocol {v.assignor or '-'}): state {v.state}, "
            f"{len(v.members)} members, coordinator {host}:{port} ({node})")
    return ["", head, *_explain_classic(v)]
