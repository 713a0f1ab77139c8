"""ZkMetadata: the topics and partition states of a cluster on ZooKeeper, through kazoo,
in Kafka's ZooKeeper-mode layout (zk_layout). It keeps a local view up to date with
watches (/brokers/topics, each topic znode, its /config/topics node and each partition's
state znode) and writes them as Kafka's AdminZkClient, KafkaController and
ProducerIdManager do: topic creation, partition addition and deletion in one ZooKeeper
transaction each, topic configs with a config change notification, partition states by
conditional update on the znode version, reassignment fields of the topic znode, and
producer id blocks.

The view is plain attributes (``topics``, ``states``, ``version``) replaced whole, so
another thread reads them without locks. Writes from the caller's thread also update the
view before returning (read back from ZooKeeper), so the caller sees its own change at
once; the watches converge on the same data. kazoo runs the watches on its own thread:
``on_change`` is called there, or on the writer's thread, after each change.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, RolledBackError

from protocol.errors import CodedError, ErrorCode, KafkaError

from . import zk_layout as zk
from .election import InvalidPartitionsError, PartitionState
from .zk_calls import ZK_FAILURES, describe
from .zk_calls import multi_failure as _failure

log = logging.getLogger("krait.cluster")

TopicPartition = tuple[str, int]
Replicas = dict[int, tuple[int, ...]]
#: attempts at a transaction that lost a race with another writer (a node changed meanwhile)
_RETRIES = 20


class TopicExistsError(CodedError):
    """Kafka's TopicExistsException: the topic znode is there already."""
    error_code = ErrorCode.topic_already_exists


class UnknownTopicError(CodedError):
    """Kafka's UnknownTopicOrPartitionException."""
    error_code = ErrorCode.unknown_topic_or_partition


class ControllerMovedError(CodedError):
    """Kafka's ControllerMovedException: /controller_epoch moved on, this controller is stale."""
    error_code = ErrorCode.not_controller


@dataclass(frozen=True)
class TopicMeta:
    """A topic as ZooKeeper holds it. ``assignment``: each partition's replicas (during a
    reassignment, target and original together); ``adding`` / ``removing``: the
    partitions being reassigned; ``configs``: the topic's overrides (/config/topics/<t>);
    ``topic_id``: zk_layout.ZERO_UUID for a topic written without one (Kafka < 2.8)."""

    name: str
    topic_id: uuid.UUID
    assignment: Replicas
    configs: dict[str, str] = field(default_factory=dict)
    adding: Replicas = field(default_factory=dict)
    removing: Replicas = field(default_factory=dict)


def _conflicts(topic: str) -> KafkaError:
    return KafkaError(ErrorCode.unknown_server_error, f"Topic '{topic}': too many conflicting writes, try again")


class ZkMetadata:
    def __init__(self, zk_client: KazooClient, on_change: Callable[[], None] | None = None) -> None:
        self.zk = zk_client
        self.on_change = on_change
        #: topic name -> TopicMeta; partition -> state (absent while a topic is being created)
        self.topics: dict[str, TopicMeta] = {}
        self.states: dict[TopicPartition, PartitionState] = {}
        #: bumped on every change of topics or states
        self.version = 0
        self._lock = threading.RLock()
        self._stopped = False
        self._roots = False
        self._raw: dict[str, zk.TopicAssignment] = {}
        self._configs: dict[str, dict[str, str]] = {}
        # Ordering of what reaches the view from two threads (watches, and the read-backs
        # of writes): per path, the mzxid of the data held (newer data wins) and, while
        # read-backs are under way, the tick of each removal (a read started before it may
        # predate the deletion: dropped; the watch delivers whatever came after).
        self._mzxid: dict[str, int] = {}
        self._deleted_at: dict[str, int] = {}
        self._tick = 0
        self._readers: dict[int, int] = {}
        #: path -> token of the one live DataWatch on it (a watch whose token is gone stops)
        self._watches: dict[str, object] = {}

    # --- start / stop -------------------------------------------------------------------------
    def start(self) -> None:
        """Load every topic and start watching (the first reads happen here, so the view is
        complete when this returns). The client must be started."""
        self._ensure_roots()
        self.zk.ChildrenWatch(zk.TOPICS, self._on_topics)

    def stop(self) -> None:
        """No more view updates nor on_change calls; the owner closes the client."""
        self._stopped = True

    def assignments(self) -> dict[TopicPartition, tuple[int, ...]]:
        """Every partition's replicas, from the current view."""
        return {(t, p): rs for t, meta in self.topics.items() for p, rs in meta.assignment.items()}

    def _ensure_roots(self) -> None:
        if not self._roots:
            for path in (zk.TOPICS, zk.CONFIG_TOPICS, zk.CONFIG_CHANGES):
                self.zk.ensure_path(path)
            self._roots = True

    # --- the view -----------------------------------------------------------------------------
    @contextmanager
    def _reading(self) -> Iterator[int]:
        """A read-back: its mark orders it against removals seen by the watches meanwhile."""
        with self._lock:
            mark = self._tick
            self._readers[mark] = self._readers.get(mark, 0) + 1
        try:
            yield mark
        finally:
            with self._lock:
                self._readers[mark] -= 1
                if not self._readers[mark]:
                    del self._readers[mark]
                if not self._readers:
                    self._deleted_at.clear()  # only a read under way can predate a removal

    def _fresh(self, path: str, mzxid: int, mark: int | None) -> bool:
        """Whether data of ``mzxid`` read at ``mark`` (None: by a watch, current) may enter
        the view. Lock held."""
        if mark is not None and self._deleted_at.get(path, -1) > mark:
            return False
        held = self._mzxid.get(path)
        if held is not None and mzxid <= held:
            return False
        self._mzxid[path] = mzxid
        if mark is None:
            self._deleted_at.pop(path, None)
        return True

    def _removed(self, path: str) -> None:
        self._mzxid.pop(path, None)
        self._tick += 1
        if self._readers:
            self._deleted_at[path] = self._tick

    def _publish(self, name: str) -> bool:
        """Rebuild one topic's TopicMeta from its znode and config. Lock held."""
        raw = self._raw.get(name)
        if raw is None:
            return False
        meta = TopicMeta(name, raw.topic_id or zk.ZERO_UUID, raw.partitions, self._configs.get(name, {}), raw.adding,
                         raw.removing)
        if self.topics.get(name) == meta:
            return False
        self.topics = {**self.topics, name: meta}
        self.version += 1
        return True

    def _set_states(self, states: dict[TopicPartition, PartitionState]) -> None:
        self.states = states
        self.version += 1

    def _notify(self) -> None:
        callback = self.on_change
        if callback is not None and not self._stopped:
            try:
                callback()
            except Exception:
                log.exception("on_change failed")

    def _apply_topic(self, name: str, data: bytes, mzxid: int, mark: int | None) -> bool:
        decoded = zk.decode_topic(data)
        with self._lock:
            if not self._fresh(zk.topic_path(name), mzxid, mark):
                return False
            self._raw[name] = decoded
            stale = [tp for tp in self.states if tp[0] == name and tp[1] not in decoded.partitions]
            for tp in stale:
                self._removed(zk.partition_state_path(*tp))
                self._watches.pop(zk.partition_state_path(*tp), None)
            if stale:
                self._set_states({tp: st for tp, st in self.states.items() if tp not in stale})
            return self._publish(name) or bool(stale)

    def _apply_config(self, name: str, data: bytes | None, mzxid: int | None, mark: int | None) -> bool:
        path = zk.topic_config_path(name)
        configs = zk.decode_config(data)
        with self._lock:
            if mzxid is None:
                self._removed(path)
            elif not self._fresh(path, mzxid, mark):
                return False
            self._configs[name] = configs
            return self._publish(name)

    def _apply_state(self, tp: TopicPartition, state: PartitionState | None, mzxid: int | None,
                     mark: int | None) -> bool:
        path = zk.partition_state_path(*tp)
        with self._lock:
            if state is None:
                self._removed(path)
                if tp not in self.states:
                    return False
                self._set_states({k: v for k, v in self.states.items() if k != tp})
                return True
            if not self._fresh(path, mzxid, mark) or self.states.get(tp) == state:
                return False
            self._set_states({**self.states, tp: state})
            return True

    def _drop_topic(self, name: str, deleted_mzxid: int | None = None) -> bool:
        """Forget a topic, its config and states, and stop their watches. With
        ``deleted_mzxid`` (our own deletion), not if the view holds a newer incarnation."""
        topic = zk.topic_path(name)
        with self._lock:
            held = self._mzxid.get(topic)
            if deleted_mzxid is not None and held is not None and held > deleted_mzxid:
                return False
            config = zk.topic_config_path(name)
            for path in [p for p in self._watches if p in (topic, config) or p.startswith(topic + "/")]:
                del self._watches[path]
            for path in [topic, config, *(zk.partition_state_path(*tp) for tp in self.states if tp[0] == name)]:
                self._removed(path)
            self._raw.pop(name, None)
            self._configs.pop(name, None)
            changed = False
            if name in self.topics:
                self.topics = {t: m for t, m in self.topics.items() if t != name}
                self.version += 1
                changed = True
            if any(tp[0] == name for tp in self.states):
                self._set_states({tp: st for tp, st in self.states.items() if tp[0] != name})
                changed = True
            return changed

    def _refresh(self, name: str, partitions: Iterable[int]) -> None:
        """Read a topic's znode, config and the given partitions' states back into the view
        (in parallel), so that the writer sees its change on return."""
        paths = [zk.topic_path(name), zk.topic_config_path(name)]
        paths += [zk.partition_state_path(name, p) for p in partitions]
        changed = False
        with self._reading() as mark:
            reads = [self.zk.get_async(p) for p in paths]
            for i, (path, read) in enumerate(zip(paths, reads, strict=True)):
                try:
                    data, stat = read.get()
                except NoNodeError:
                    continue  # deleted meanwhile: the watch removes it
                if i == 0:
                    changed |= self._apply_topic(name, data, stat.mzxid, mark)
                elif i == 1:
                    changed |= self._apply_config(name, data, stat.mzxid, mark)
                else:
                    tp = (name, int(path.split("/")[-2]))
                    state = zk.decode_partition_state(data, stat.version)
                    changed |= self._apply_state(tp, state, stat.mzxid, mark)
        if changed:
            self._notify()

    # --- watches ------------------------------------------------------------------------------
    def _watch(self, path: str, fn: Callable[[bytes | None, object], bool | None]) -> None:
        """One DataWatch per path; ``fn`` returning False (or its token dropped) ends it."""
        token = object()
        with self._lock:
            if self._stopped or path in self._watches:
                return
            self._watches[path] = token

        def callback(data: bytes | None, stat, event=None) -> bool:
            if self._stopped or self._watches.get(path) is not token:
                return False
            try:
                keep = fn(data, stat)
            except ZK_FAILURES as exc:  # gone mid-read: the watch reads again on reconnection
                log.warning("could not read ZooKeeper node %s: %s", path, describe(exc))
                return True
            except Exception:
                log.exception("could not apply ZooKeeper node %s", path)
                return True
            if keep is False:
                with self._lock:
                    if self._watches.get(path) is token:
                        del self._watches[path]
                return False
            return True

        self.zk.DataWatch(path, callback)

    def _on_topics(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        # Topics only appear here: a topic goes when its own znode's watch sees it deleted.
        # A topic in the view without a watch (read back after our write) gets one too.
        with self._lock:
            names = sorted(set(children) | set(self._raw))
        for name in names:
            self._watch(zk.topic_path(name), partial(self._on_topic, name))
        return True

    def _on_topic(self, name: str, data: bytes | None, stat) -> bool:
        if data is None:
            if self._drop_topic(name):
                self._notify()
            return False
        changed = self._apply_topic(name, data, stat.mzxid, None)
        if changed:
            self._notify()
        self._watch(zk.topic_config_path(name), partial(self._on_config, name))
        for p in sorted(self._raw.get(name, zk.TopicAssignment(None, {})).partitions):
            self._watch(zk.partition_state_path(name, p), partial(self._on_state, (name, p)))
        return True

    def _topic_gone(self, name: str) -> bool:
        """After a config or state node vanished: if the topic went too, forget it now (and
        end its watches) rather than leave exists-watches behind."""
        if self.zk.exists(zk.topic_path(name)) is not None:
            return False
        if self._drop_topic(name):
            self._notify()
        return True

    def _on_config(self, name: str, data: bytes | None, stat) -> bool:
        if self._apply_config(name, data, stat.mzxid if stat is not None else None, None):
            self._notify()
        return not (data is None and self._topic_gone(name))

    def _on_state(self, tp: TopicPartition, data: bytes | None, stat) -> bool:
        if data is None:
            if self._apply_state(tp, None, None, None):
                self._notify()
            return not self._topic_gone(tp[0])  # else being created: the controller writes it
        if self._apply_state(tp, zk.decode_partition_state(data, stat.version), stat.mzxid, None):
            self._notify()
        return True

    # --- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, topic_id: uuid.UUID, assignment: Replicas, configs: dict[str, str] | None = None,
                     states: dict[int, PartitionState] | None = None) -> None:
        """Create a topic in one ZooKeeper transaction: its config (a left-over config node
        is overwritten, as AdminZkClient does), the topic znode, and for each partition in
        ``states`` its /partitions/<p> and /state (partitions without one are left for the
        controller, as Kafka's topic creation leaves them all). Raises TopicExistsError."""
        states = states or {}
        if not set(states) <= set(assignment):
            raise ValueError(f"states for partitions not in the assignment: {sorted(set(states) - set(assignment))}")
        self._ensure_roots()
        for _ in range(_RETRIES):
            tx = self.zk.transaction()
            self._put_config(tx, name, configs or {})
            tx.create(zk.topic_path(name), zk.encode_topic(topic_id, assignment))
            self._create_states(tx, name, states, with_parent=bool(states))
            results = tx.commit()
            err = _failure(results)
            if err is None:
                break
            if isinstance(results[1], NodeExistsError):
                raise TopicExistsError(f"Topic '{name}' already exists.")
            if err is not results[0]:
                raise err
            # the config node came or went meanwhile: try again
        else:
            raise _conflicts(name)
        self._refresh(name, states)

    def add_partitions(self, name: str, assignment_for_new: Replicas,
                       states_for_new: dict[int, PartitionState] | None = None) -> None:
        """Kafka's createPartitionsWithAssignment: the topic znode rewritten with the new
        partitions (numbered on from the current count), conditional on its version, with
        the new partitions' state znodes, in one transaction."""
        states_for_new = states_for_new or {}
        if not set(states_for_new) <= set(assignment_for_new):
            raise ValueError("states for partitions not being added")
        path = zk.topic_path(name)
        for _ in range(_RETRIES):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
            current = zk.decode_topic(data)
            n = len(current.partitions)
            if not assignment_for_new:
                raise InvalidPartitionsError(f"The number of partitions for a topic can only be increased. Topic "
                                             f"{name} currently has {n} partitions, {n} would not be an increase.")
            if sorted(assignment_for_new) != list(range(n, n + len(assignment_for_new))):
                raise InvalidPartitionsError(f"Topic {name} has {n} partitions: the partitions to add must be numbered "
                                             f"from {n}, not {sorted(assignment_for_new)}.")
            tx = self.zk.transaction()
            tx.set_data(path, zk.encode_topic(current.topic_id, {**current.partitions, **assignment_for_new},
                                              current.adding, current.removing), version=stat.version)
            self._create_states(tx, name, states_for_new, with_parent=bool(states_for_new) and self.zk.exists(
                zk.partitions_path(name)) is None)
            results = tx.commit()
            err = _failure(results)
            if err is None:
                break
            if not isinstance(err, BadVersionError | NodeExistsError):
                raise err
        else:
            raise _conflicts(name)
        self._refresh(name, states_for_new)

    def delete_topic(self, name: str) -> None:
        """Delete the topic znode with everything under it and its config in one
        transaction (each node at the version read, so a concurrent change retries)."""
        path = zk.topic_path(name)
        for _ in range(_RETRIES):
            try:
                nodes = self._subtree(path)
            except NoNodeError:
                if self.zk.exists(path) is None:
                    raise UnknownTopicError(f"Topic `{name}` to delete does not exist") from None
                continue
            cfg = self.zk.exists(zk.topic_config_path(name))
            tx = self.zk.transaction()
            for node, stat in nodes:
                tx.delete(node, version=stat.version)
            if cfg is not None:
                tx.delete(zk.topic_config_path(name), version=cfg.version)
            if _failure(tx.commit()) is None:
                break
        else:
            raise _conflicts(name)
        if self._drop_topic(name, deleted_mzxid=nodes[-1][1].mzxid):
            self._notify()

    def _put_config(self, tx, name: str, configs: dict[str, str]) -> None:
        """Create or overwrite the config node (setOrCreateEntityConfigs), at the version
        read: a concurrent change fails the transaction, which is retried."""
        path, data = zk.topic_config_path(name), zk.encode_config(configs)
        cfg = self.zk.exists(path)
        if cfg is None:
            tx.create(path, data)
        else:
            tx.set_data(path, data, version=cfg.version)

    @staticmethod
    def _create_states(tx, name: str, states: dict[int, PartitionState], *, with_parent: bool) -> None:
        if with_parent:
            tx.create(zk.partitions_path(name))
        for p in sorted(states):
            tx.create(zk.partition_path(name, p))
            tx.create(zk.partition_state_path(name, p), zk.encode_partition_state(states[p]))

    def _subtree(self, path: str) -> list[tuple[str, object]]:
        """(path, stat) of a node and its descendants, children before their parent."""
        children, stat = self.zk.get_children(path, include_data=True)
        out: list[tuple[str, object]] = []
        for child in sorted(children):
            out += self._subtree(f"{path}/{child}")
        out.append((path, stat))
        return out

    def set_topic_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace the topic's overrides and create a config change notification
        (AdminZkClient.changeTopicConfig), in one transaction with a check that the topic
        exists."""
        self._ensure_roots()
        for _ in range(_RETRIES):
            tx = self.zk.transaction()
            tx.check(zk.topic_path(name), -1)
            self._put_config(tx, name, configs)
            tx.create(zk.config_change_path(), zk.encode_config_change(zk.topic_entity_path(name)), sequence=True)
            results = tx.commit()
            err = _failure(results)
            if err is None:
                break
            if isinstance(results[0], NoNodeError):
                raise UnknownTopicError(f"Topic '{name}' does not exist.")
            if err is not results[1]:
                raise err
        else:
            raise _conflicts(name)
        self._refresh(name, ())

    def set_reassignment(self, name: str, partition: int, replicas: Iterable[int], adding: Iterable[int] = (),
                         removing: Iterable[int] = ()) -> TopicMeta | None:
        """Set one partition's replicas and adding/removing replicas in the topic znode
        (Kafka's reassignment state), conditional on the znode's version (re-read and
        retried when another writer got there first). Returns the topic as now in the view."""
        path = zk.topic_path(name)
        replicas, adding, removing = tuple(replicas), tuple(adding), tuple(removing)
        for _ in range(_RETRIES):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                raise UnknownTopicError(f"Topic '{name}' does not exist.") from None
            cur = zk.decode_topic(data)
            if partition not in cur.partitions:
                raise UnknownTopicError(f"Partition {name}-{partition} does not exist.")
            t = cur.with_partition(partition, replicas, adding, removing)
            new = zk.encode_topic(t.topic_id, t.partitions, t.adding, t.removing)
            with self._reading() as mark:
                try:
                    stat = self.zk.set(path, new, version=stat.version)
                except BadVersionError:
                    continue
                changed = self._apply_topic(name, new, stat.mzxid, mark)
            if changed:
                self._notify()
            return self.topics.get(name)
        raise _conflicts(name)

    # --- partition states -----------------------------------------------------------------------
    def update_partition_state(self, tp: TopicPartition, new: PartitionState, expected_zk_version: int, *,
                               controller_epoch_zk_version: int | None = None) -> PartitionState | None:
        """Write a partition's state if its znode is still at ``expected_zk_version``
        (KafkaZkClient.updateLeaderAndIsr / the ZK-mode leader's ISR update). Returns the
        state stored, with its new zk_version; None if the version moved on (the view is
        refreshed from ZooKeeper first) or the partition is gone. A controller passes
        ``controller_epoch_zk_version``: the write then also requires /controller_epoch at
        that version (ControllerMovedError otherwise), as KafkaController's writes do."""
        try:
            with self._reading() as mark:
                stat = self._set_state(tp, zk.encode_partition_state(new), expected_zk_version,
                                       controller_epoch_zk_version)
                stored = replace(new, zk_version=stat.version)
                changed = self._apply_state(tp, stored, stat.mzxid, mark)
        except BadVersionError:
            self.read_partition_state(tp)
            return None
        except NoNodeError:
            return None
        if changed:
            self._notify()
        return stored

    def _set_state(self, tp: TopicPartition, data: bytes, expected_zk_version: int,
                   controller_epoch_zk_version: int | None):
        path = zk.partition_state_path(*tp)
        if controller_epoch_zk_version is None:
            return self.zk.set(path, data, version=expected_zk_version)
        tx = self.zk.transaction()
        tx.check(zk.CONTROLLER_EPOCH, controller_epoch_zk_version)
        tx.set_data(path, data, version=expected_zk_version)
        results = tx.commit()
        if isinstance(results[0], Exception) and not isinstance(results[0], RolledBackError):
            raise ControllerMovedError("Controller epoch zkVersion check fails. Expected zkVersion = "
                                       f"{controller_epoch_zk_version}")
        err = _failure(results)
        if err is not None:
            raise err
        return results[1]

    def read_partition_state(self, tp: TopicPartition) -> PartitionState | None:
        """The partition's state as ZooKeeper holds it now (also taken into the view)."""
        with self._reading() as mark:
            try:
                data, stat = self.zk.get(zk.partition_state_path(*tp))
            except NoNodeError:
                return None
            state = zk.decode_partition_state(data, stat.version)
            changed = self._apply_state(tp, state, stat.mzxid, mark)
        if changed:
            self._notify()
        return state

    # --- log dir event notifications (KIP-112) --------------------------------------------------
    def watch_log_dir_events(self, callback: Callable[[list[str]], object]) -> None:
        """kazoo's thread calls ``callback`` with the notifications' names on every change."""
        self.zk.ChildrenWatch(zk.LOG_DIR_EVENT_NOTIFICATION, callback)

    def add_log_dir_event(self, broker_id: int) -> str:
        """Kafka's propagateLogDirEvent: a persistent sequential notification (blocking)."""
        return self.zk.create(zk.log_dir_event_path(), zk.encode_log_dir_event(broker_id), sequence=True,
                              makepath=True)

    def read_log_dir_events(self) -> list[tuple[str, int | None]]:
        """(path, broker) of every notification (blocking); None for one that names no broker."""
        out = []
        try:
            children = self.zk.get_children(zk.LOG_DIR_EVENT_NOTIFICATION)
        except NoNodeError:
            return out
        for child in sorted(children):
            path = f"{zk.LOG_DIR_EVENT_NOTIFICATION}/{child}"
            try:
                out.append((path, zk.decode_log_dir_event(self.zk.get(path)[0])))
            except NoNodeError:
                continue
        return out

    def delete_log_dir_events(self, paths: list[str]) -> None:
        for path in paths:
            try:
                self.zk.delete(path)
            except NoNodeError:
                pass

    # --- producer ids ---------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, block_size: int = zk.PRODUCER_ID_BLOCK_SIZE) -> tuple[int, int]:
        """ZkProducerIdManager.getNewProducerIdBlock: read /latest_producer_id_block with its
        version, write the next block after it conditionally, retry when another broker got
        there first. Returns (first, last) id, both in the block; the first block starts at 0."""
        while True:
            try:
                data, stat = self.zk.get(zk.PRODUCER_ID_BLOCK)
            except NoNodeError:
                data, stat = b"", None
            start, end = zk.next_producer_id_block(data, block_size)
            payload = zk.encode_producer_id_block(broker_id, start, end)
            try:
                if stat is None:
                    self.zk.create(zk.PRODUCER_ID_BLOCK, payload, makepath=True)
                else:
                    self.zk.set(zk.PRODUCER_ID_BLOCK, payload, version=stat.version)
            except (BadVersionError, NodeExistsError):
                continue
            return start, end
