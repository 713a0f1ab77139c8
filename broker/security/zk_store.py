"""ZkSecurityStore: the security store of cluster mode, kept in ZooKeeper in Kafka's
ZooKeeper-mode layout (zk_acl_layout), so that every broker shares one set of ACLs, SCRAM
credentials and client quotas.

Every broker follows the three notification paths (ZkNodeChangeNotificationListener: the
notifications after the last one processed, purged once older than 15 minutes), re-reads
the entity or resource named and hands the result to the event loop, where the view
(``acls``, ``entities``) changes and ``changed()`` runs. Writes are coroutines: their
kazoo calls run off the event loop (cluster.zk_calls), persisted before they return, and
fail with REQUEST_TIMED_OUT while ZooKeeper is unreachable. A read that fails because
ZooKeeper went away is logged in one line and done again on reconnection; meanwhile the
broker keeps the ACLs, credentials and quotas it last read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import partial
from typing import Any

from kazoo import exceptions as kze
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError

from protocol.errors import ErrorCode, KafkaError

from ..cluster import zk_layout as zk
from ..cluster.zk_calls import ZK_FAILURES, connected, describe, multi_failure, off_loop
from .acls import PatternType, binding_from_dict, binding_to_dict, sorted_bindings
from .operations import ResourceType
from .store import SecurityStore, parse_entity_path
from .zk_acl_layout import (
    ACL_CHANGE_PREFIX,
    ACL_RESOURCE_TYPES,
    CHANGE_PREFIXES,
    CONFIG_CLIENTS,
    CONFIG_GROUPS,
    CONFIG_USERS,
    EXTENDED_ACL_CHANGES,
    EXTENDED_ACLS,
    LITERAL_ACL_CHANGES,
    LITERAL_ACLS,
    AclEntry,
    AclKey,
    acl_node_path,
    acl_store_path,
    decode_acl_change,
    decode_acls,
    encode_acl_change,
    encode_acls,
    entity_znode,
    enum_name,
    normalized_name,
    pascal,
    sequence_number,
    storable_name,
)

log = logging.getLogger("krait.security")

#: ZkNodeChangeNotificationListener.changeExpirationMs
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
#: AclAuthorizer.maxUpdateRetries: conditional writes that lost a race are retried this often
UPDATE_RETRIES = 10

#: a lost race in a conditional multi: re-read and retry
_RACES = (kze.BadVersionError, kze.NodeExistsError, NoNodeError, kze.NotEmptyError)


def _group(rows: Iterable[Mapping[str, Any]]) -> dict[AclKey, frozenset[AclEntry]]:
    out: dict[AclKey, set[AclEntry]] = {}
    for r in rows:
        key = (str(r["resource_type"]), str(r["resource_name"]), str(r["pattern_type"]))
        out.setdefault(key, set()).add((str(r["principal"]), str(r["host"]), str(r["operation"]),
                                        str(r["permission_type"])))
    return {k: frozenset(v) for k, v in out.items()}


def _rows(grouped: Mapping[AclKey, Iterable[AclEntry]]) -> list[dict[str, str]]:
    """Authorizer.to_dicts rows, in Kafka's listing order."""
    flat = [{"resource_type": k[0], "resource_name": k[1], "pattern_type": k[2], "principal": e[0], "host": e[1],
             "operation": e[2], "permission_type": e[3]} for k, entries in grouped.items() for e in entries]
    return [binding_to_dict(b) for b in sorted_bindings(binding_from_dict(r) for r in flat)]


class ZkSecurityStore(SecurityStore):
    """The SecurityStore of a broker in a ZooKeeper cluster. ``zk_client`` is the broker's
    started kazoo client (its session, its chroot); ``loop`` the event loop that owns the
    view and runs the listeners (None: they run on the store's worker thread, for tools).
    Call ``load()`` once the client is connected; ``stop()`` before closing the client."""

    def __init__(self, zk_client: KazooClient, loop: asyncio.AbstractEventLoop | None = None,
                 listeners: Iterable[Callable[[], None]] = (), *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        super().__init__(None)
        self.zk = zk_client
        self.loop = loop
        self.listeners.extend(listeners)
        self.change_expiration_ms = change_expiration_ms
        # One worker thread reads ZooKeeper after a notification, so reads reach the loop in
        # the order they were made; the loop applies them unless a local write came between.
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="krait-zk-security")
        self._writes = 0
        #: writes waiting for ZooKeeper, and the reads to do again once they are done
        self._writing = 0
        self._deferred: list[tuple[Callable[..., None], tuple]] = []
        self._last_seq: dict[str, int] = {}
        self._ctimes: dict[str, dict[str, int]] = {root: {} for root in CHANGE_PREFIXES}
        self._watching = False
        self._stopped = False
        self._resync = False
        self._failing = False

    # --- start / stop -------------------------------------------------------------------------
    def load(self) -> None:
        """Create Kafka's persistent paths, read every entity and ACL, then follow the change
        notifications (those written from now on: what came before is in the read)."""
        for path in (zk.CONFIG_CHANGES, CONFIG_USERS, CONFIG_CLIENTS, CONFIG_GROUPS, LITERAL_ACL_CHANGES,
                     EXTENDED_ACL_CHANGES):
            self.zk.ensure_path(path)
        for pattern_type in ("LITERAL", "PREFIXED"):
            for resource_type in ACL_RESOURCE_TYPES:
                self.zk.ensure_path(f"{acl_store_path(pattern_type)}/{pascal(resource_type.name)}")
        for root, prefix in CHANGE_PREFIXES.items():
            seqs = (sequence_number(c, prefix) for c in self.zk.get_children(root))
            self._last_seq[root] = max((s for s in seqs if s is not None), default=-1)
        acls, entities = self._read_all()
        self.acls, self.entities = _rows(acls), entities
        if not self._watching:
            self._watching = True
            for root in CHANGE_PREFIXES:
                self.zk.ChildrenWatch(root, partial(self._on_notifications, root))
            self.zk.add_listener(self._on_state)

    def stop(self) -> None:
        """No more reloads nor listener calls; the owner closes the client."""
        self._stopped = True
        self.zk.remove_listener(self._on_state)
        self._worker.shutdown(wait=False, cancel_futures=True)

    # --- writing --------------------------------------------------------------------------------
    async def set_acls(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Persist the difference between the view and ``rows`` (the authorizer's bindings
        after a Create/DeleteAcls), resource by resource as AclAuthorizer.updateResourceAcls:
        the ACLs added and removed are applied to what the znode holds now, conditional on
        its version, so a concurrent change from another broker is kept. On failure the
        view (and through changed() the authorizer) returns to what ZooKeeper holds."""
        new, old = _group(rows), _group(self.acls)
        keys = sorted(k for k in new.keys() | old.keys() if new.get(k, frozenset()) != old.get(k, frozenset()))
        for key in keys:
            if not storable_name(key[1]):
                self.changed()
                raise KafkaError(ErrorCode.invalid_request,
                                 f"The resource name {key[1]!r} cannot be stored in ZooKeeper.")
        written: dict[AclKey, frozenset[AclEntry]] = {}
        try:
            with self._writing_view():
                for key in keys:
                    added = new.get(key, frozenset()) - old.get(key, frozenset())
                    removed = old.get(key, frozenset()) - new.get(key, frozenset())
                    written[key] = await off_loop(self.zk, ErrorCode.request_timed_out, self._update_resource, key,
                                                  added, removed)
        finally:
            self._merge_acls(written)
            self.changed()

    @contextmanager
    def _writing_view(self) -> Iterator[None]:
        """Around a write: reads of ZooKeeper that reach the loop meanwhile may predate it
        (the loop runs on while the write waits for ZooKeeper), so they are done again
        after it."""
        self._writing += 1
        try:
            yield
        finally:
            self._writing -= 1
            self._writes += 1
            if not self._writing:
                deferred, self._deferred = self._deferred, []
                for fn, args in deferred:
                    self._submit(fn, *args)

    def _after_writes(self, fn: Callable[..., None], *args: Any) -> None:
        if self._writing:
            self._deferred.append((fn, args))
        else:
            self._submit(fn, *args)

    def _update_resource(self, key: AclKey, added: frozenset[AclEntry], removed: frozenset[AclEntry]) -> frozenset[AclEntry]:
        path = acl_node_path(key)
        for _ in range(UPDATE_RETRIES + 1):
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:
                data, stat = None, None
            current = decode_acls(data)
            target = (current - removed) | added
            if target == current:
                return current  # nothing to write, no notification (as AclAuthorizer)
            tx = self.zk.transaction()
            if target and stat is None:
                self.zk.ensure_path(path.rpartition("/")[0])  # a name with '/': Kafka's createRecursive
                tx.create(path, encode_acls(target))
            elif target:
                tx.set_data(path, encode_acls(target), version=stat.version)
            elif stat.numChildren:
                tx.set_data(path, b"", version=stat.version)  # names below this one live on
            else:
                tx.delete(path, version=stat.version)
            root = LITERAL_ACL_CHANGES if key[2] == "LITERAL" else EXTENDED_ACL_CHANGES
            tx.create(f"{root}/{ACL_CHANGE_PREFIX}", encode_acl_change(key), sequence=True)
            err = multi_failure(tx.commit())
            if err is None:
                log.info("Updated ACLs for %s %s %s: %d entries", *key, len(target))
                return target
            if not isinstance(err, _RACES):
                raise err
        raise KafkaError(ErrorCode.unknown_server_error, f"Failed to update ACLs for ResourcePattern(resourceType="
                         f"{key[0]}, name={key[1]}, patternType={key[2]}) after trying a maximum of "
                         f"{UPDATE_RETRIES} times")

    async def alter_entity(self, path: str, updates: Mapping[str, str | None]) -> None:
        """Set (str) or remove (None) keys of one entity's config node, conditional on its
        version, with a config change notification in the same transaction (AdminZkClient.
        changeEntityConfig); an emptied node without children goes, with the parents it
        leaves empty (tryCleanQuotaNodes)."""
        with self._writing_view():
            cfg = await off_loop(self.zk, ErrorCode.request_timed_out, self._write_entity, path, updates)
        if cfg:
            self.entities[path] = cfg
        else:
            self.entities.pop(path, None)
        self.changed()

    def _write_entity(self, path: str, updates: Mapping[str, str | None]) -> dict[str, str]:
        entity = parse_entity_path(path)
        znode = entity_znode(path)
        for _ in range(UPDATE_RETRIES + 1):
            try:
                data, stat = self.zk.get(znode)
            except NoNodeError:
                data, stat = None, None
            cfg = zk.decode_config(data)
            for k, v in updates.items():
                if v is None:
                    cfg.pop(k, None)
                else:
                    cfg[k] = str(v)
            tx = self.zk.transaction()
            if cfg and stat is None:
                self.zk.ensure_path(znode.rpartition("/")[0])
                tx.create(znode, zk.encode_config(cfg))
            elif cfg or (stat is not None and stat.numChildren):
                tx.set_data(znode, zk.encode_config(cfg), version=stat.version)
            elif stat is not None:
                tx.delete(znode, version=stat.version)
                if len(entity) == 2:
                    self._clean_user_parents(tx, znode)
            tx.create(zk.config_change_path(), zk.encode_config_change(path), sequence=True)
            err = multi_failure(tx.commit())
            if err is None:
                return cfg
            if not isinstance(err, _RACES):
                raise err
        raise KafkaError(ErrorCode.unknown_server_error, f"too many conflicting writes to {znode}, try again")

    def _clean_user_parents(self, tx, znode: str) -> None:
        """tryCleanQuotaNodes for <user, client-id>: the clients node goes when this client
        was its only child, and the user's node too when its config is empty and clients
        was its only child (both checked again by the transaction)."""
        clients = znode.rsplit("/", 1)[0]
        user = clients.rsplit("/", 1)[0]
        try:
            if len(self.zk.get_children(clients)) != 1:
                return
            tx.delete(clients)
            data, stat = self.zk.get(user)
            if not zk.decode_config(data) and self.zk.get_children(user) == ["clients"]:
                tx.delete(user, version=stat.version)
        except NoNodeError:
            pass

    # --- reading ZooKeeper (start-up, and the worker thread) -------------------------------------
    def _read_all(self) -> tuple[dict[AclKey, frozenset[AclEntry]], dict[str, dict[str, str]]]:
        entities: dict[str, dict[str, str]] = {}
        for root, segment in ((CONFIG_USERS, "users"), (CONFIG_CLIENTS, "clients"), (CONFIG_GROUPS, "groups")):
            for name in self._children(root):
                path = f"{segment}/{normalized_name(name)}"
                cfg = self._read_config(f"{root}/{name}")
                if cfg:
                    entities[path] = cfg
                if segment == "users":
                    for client in self._children(f"{root}/{name}/clients"):
                        cfg = self._read_config(f"{root}/{name}/clients/{client}")
                        if cfg:
                            entities[f"{path}/clients/{normalized_name(client)}"] = cfg
        acls: dict[AclKey, frozenset[AclEntry]] = {}
        stores = [(LITERAL_ACLS, "LITERAL")]
        for pattern_dir in self._children(EXTENDED_ACLS):
            try:
                stores.append((f"{EXTENDED_ACLS}/{pattern_dir}", enum_name(PatternType, pattern_dir)))
            except ValueError:
                log.warning("ignoring %s/%s: not a pattern type", EXTENDED_ACLS, pattern_dir)
        for base, pattern_type in stores:
            for type_dir in self._children(base):
                try:
                    resource_type = enum_name(ResourceType, type_dir)
                except ValueError:
                    log.warning("ignoring %s/%s: not a resource type", base, type_dir)
                    continue
                for name, data in self._walk(f"{base}/{type_dir}"):
                    entries = decode_acls(data, f"{base}/{type_dir}/{name}")
                    if entries:
                        acls[(resource_type, name, pattern_type)] = entries
        return acls, entities

    def _children(self, path: str) -> list[str]:
        try:
            return sorted(self.zk.get_children(path))
        except NoNodeError:
            return []

    def _walk(self, path: str, prefix: str = "") -> Iterator[tuple[str, bytes]]:
        """(name, data) of every resource node below a type directory: a name with '/' is a
        nested node (intermediate nodes have no data)."""
        for child in self._children(path):
            try:
                data, stat = self.zk.get(f"{path}/{child}")
            except NoNodeError:
                continue
            if data:
                yield prefix + child, data
            if stat.numChildren:
                yield from self._walk(f"{path}/{child}", f"{prefix}{child}/")

    def _read_config(self, znode: str) -> dict[str, str]:
        try:
            return zk.decode_config(self.zk.get(znode)[0])
        except NoNodeError:
            return {}
        except ValueError:
            log.warning("ignoring %s: not a config node", znode)
            return {}

    def _read_acls(self, key: AclKey) -> frozenset[AclEntry]:
        path = acl_node_path(key)
        try:
            return decode_acls(self.zk.get(path)[0], path)
        except NoNodeError:
            return frozenset()

    # --- following the notifications ------------------------------------------------------------
    def _on_notifications(self, root: str, children: list[str]) -> bool:
        """kazoo's thread: hand the listing to the worker."""
        if self._stopped:
            return False
        self._submit(self._process_notifications, root, children)
        return True

    def _on_state(self, state: str) -> None:
        """After a lost session or connection, reload everything: a notification may have
        gone unread, or been purged, meanwhile."""
        if state in (KazooState.LOST, KazooState.SUSPENDED):
            self._resync = True
        elif state == KazooState.CONNECTED and self._resync and not self._stopped:
            self._resync = False
            self._submit(self._reload_all)

    def _submit(self, fn: Callable[..., None], *args: Any) -> None:
        if self._stopped:
            return
        try:
            self._worker.submit(self._guarded, fn, *args)
        except RuntimeError:
            pass  # shut down

    def _guarded(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except ZK_FAILURES as exc:
            if self._stopped:
                return
            if not self._failing:  # one line per outage, not one per notification
                self._failing = True
                log.warning("reading the security metadata from ZooKeeper failed (%s); keeping the ACLs, "
                            "credentials and quotas last read, reloading when ZooKeeper is back", describe(exc))
            self._resync = True
            if connected(self.zk):  # back already: no state change will ask for the reload
                time.sleep(1)
                self._on_state(KazooState.CONNECTED)
        except Exception:
            if not self._stopped:
                log.exception("reading the security metadata from ZooKeeper failed; reloading on reconnection")
                self._resync = True

    def _process_notifications(self, root: str, children: list[str]) -> None:
        """ZkNodeChangeNotificationListener.processNotifications: each notification after the
        last one processed names an entity or resource to re-read; then the purge."""
        prefix = CHANGE_PREFIXES[root]
        last = self._last_seq.get(root, -1)
        ctimes = self._ctimes[root]
        acl_keys: set[AclKey] = set()
        paths: set[str] = set()
        numbered = sorted((s, c) for c in children if (s := sequence_number(c, prefix)) is not None)
        for seq, child in numbered:
            if seq <= last:
                continue
            last = seq
            try:
                data, stat = self.zk.get(f"{root}/{child}")
            except NoNodeError:
                continue
            ctimes[child] = stat.ctime
            try:
                if root == zk.CONFIG_CHANGES:
                    path = zk.decode_config_change(data)
                    if path.split("/", 1)[0] in ("users", "clients", "groups"):
                        parse_entity_path(path)
                        paths.add(path)
                else:
                    acl_keys.add(decode_acl_change(root, data))
            except (ValueError, KeyError, TypeError) as exc:
                log.error("error processing change notification %r from %s/%s: %s", data, root, child, exc)
        self._last_seq[root] = last
        if acl_keys or paths:
            self._read_and_apply(acl_keys, paths)
        self._purge(root, [c for _, c in numbered], ctimes)

    def _purge(self, root: str, children: list[str], ctimes: dict[str, int]) -> None:
        """purgeObsoleteNotifications: delete the notifications older than the expiration
        (every broker does; a node another broker deleted first is fine)."""
        now = time.time() * 1000
        present = set(children)
        for child in list(ctimes):
            if child not in present:
                del ctimes[child]
        for child in children:
            if child not in ctimes:
                stat = self.zk.exists(f"{root}/{child}")
                if stat is None:
                    continue
                ctimes[child] = stat.ctime
            if now - ctimes[child] > self.change_expiration_ms:
                try:
                    self.zk.delete(f"{root}/{child}")
                except NoNodeError:
                    pass
                del ctimes[child]

    def _read_and_apply(self, acl_keys: set[AclKey], paths: set[str]) -> None:
        writes = self._writes
        acls = {key: self._read_acls(key) for key in acl_keys}
        entities = {}
        for path in paths:  # as the notification spells it: the znode's own name
            elems = path.split("/")
            normalized = "/".join(e if i % 2 == 0 else normalized_name(e) for i, e in enumerate(elems))
            entities[normalized] = self._read_config(entity_znode(path))
        self._dispatch(self._apply, acls, entities, writes, paths)

    def _reload_all(self) -> None:
        writes = self._writes
        acls, entities = self._read_all()
        if self._failing:
            self._failing = False
            log.info("security metadata read again from ZooKeeper")
        self._dispatch(self._apply_all, acls, entities, writes)

    def _dispatch(self, fn: Callable[..., None], *args: Any) -> None:
        loop = self.loop
        if loop is None:
            fn(*args)
        elif not loop.is_closed():
            loop.call_soon_threadsafe(fn, *args)

    # --- applying to the view (the event loop) --------------------------------------------------
    def _apply(self, acls: dict[AclKey, frozenset[AclEntry]], entities: dict[str, dict[str, str]],
               writes: int, paths: set[str]) -> None:
        if self._stopped:
            return
        if writes != self._writes or self._writing:
            # a local write came between the read and now, or is under way: the read may predate it
            self._after_writes(self._read_and_apply, set(acls), paths)
            return
        changed = self._merge_acls(acls)
        for path, cfg in entities.items():
            if cfg and self.entities.get(path) != cfg:
                self.entities[path] = cfg
                changed = True
            elif not cfg and path in self.entities:
                del self.entities[path]
                changed = True
        if changed:
            self.changed()

    def _apply_all(self, acls: dict[AclKey, frozenset[AclEntry]], entities: dict[str, dict[str, str]],
                   writes: int) -> None:
        if self._stopped:
            return
        if writes != self._writes or self._writing:
            self._after_writes(self._reload_all)
            return
        rows = _rows(acls)
        if rows != self.acls or entities != self.entities:
            self.acls, self.entities = rows, entities
            self.changed()

    def _merge_acls(self, update: Mapping[AclKey, frozenset[AclEntry]]) -> bool:
        """Replace the entries of the resources in ``update``; whether anything changed."""
        grouped = _group(self.acls)
        changed = False
        for key, entries in update.items():
            if grouped.get(key, frozenset()) != entries:
                changed = True
                if entries:
                    grouped[key] = entries
                else:
                    grouped.pop(key, None)
        if changed:
            self.acls = _rows(grouped)
        return changed
