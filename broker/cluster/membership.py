"""ZkMembership: this broker's membership of a cluster on ZooKeeper, through kazoo:
the cluster id (/cluster/id), the broker's ephemeral registration (/brokers/ids/<id>) and
controller election (ephemeral /controller, with /controller_epoch bumped in the same
ZooKeeper transaction, so that a stale controller's epoch is always lower), as Kafka's
KafkaZkClient does. After a lost session the broker registers again and rejoins the
election. kazoo runs its callbacks on its own thread; what the broker reads here are
plain attributes, replaced whole."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.protocol.states import EventType

from protocol.errors import ErrorCode

from ..config import BrokerConfig, ConfigError
from ..endpoints import Listener
from ..security.client_security import ClientSecurity
from ..security.inter_broker import inter_broker_security
from ..security.store import SecurityStore
from ..security.zk_store import ZkSecurityStore
from . import zk_layout as zk
from .zk_calls import ZK_FAILURES, describe, off_loop
from .zk_metadata import ZkMetadata

log = logging.getLogger("krait.cluster")


T = TypeVar("T")


class ZkMembership:
    def __init__(self, connect: str, broker_id: int, advertised: list[Listener], *, session_timeout_ms: int,
                 inter_broker_listener: str | None = None,
                 connection_timeout_ms: int, on_change: Callable[[], None] | None = None) -> None:
        self.broker_id = broker_id
        self.advertised = advertised
        #: the listener brokers reach each other on (its endpoints fill ``brokers``)
        self.inter_broker_listener = inter_broker_listener or advertised[0].name
        self.connection_timeout_ms = connection_timeout_ms
        self.on_change = on_change
        # Kazoo takes the chroot from the connect string (host:port,host:port/chroot), as Kafka does.
        # Its default reconnection backoff doubles up to an hour, so a broker would find a
        # restarted ZooKeeper minutes late, its session long expired; ZooKeeper's own client
        # tries again within a second.
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000,
                              connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
                              command_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0})
        hosts, slash, chroot = connect.partition("/")
        self._hosts, self._chroot = hosts, (slash + chroot).rstrip("/")
        #: the elected controller's broker id (None: none elected) and its epoch
        self.controller_id: int | None = None
        self.controller_epoch = zk.INITIAL_CONTROLLER_EPOCH
        #: live brokers: id -> (host, port) of the endpoint of the inter-broker listener
        self.brokers: dict[int, tuple[str, int]] = {}
        #: live brokers: id -> listener name -> (host, port), every endpoint registered
        self.endpoints: dict[int, dict[str, tuple[str, int]]] = {}
        #: live brokers: id -> broker epoch (the czxid of its registration, as Kafka's ZK
        #: mode has it): a broker registered again has a new one
        self.broker_epochs: dict[int, int] = {}
        #: live brokers: id -> the URL of its Schema Registry (when it serves one)
        self.schema_registry_urls: dict[int, str] = {}
        #: Krait's own fields of this broker's registration (set before start)
        self.extra_registration: dict = {}
        #: bumped whenever the brokers or the controller change (the Metadata cache key)
        self.version = 0
        self._lost = False
        self._suspended = False
        self._stopped = False
        self._rejoining = threading.Lock()

    @property
    def connected(self) -> bool:
        """The ZooKeeper connection is up (kazoo's CONNECTED state)."""
        return self.zk.state == KazooState.CONNECTED

    # --- start / stop -------------------------------------------------------------------------
    def start(self, local_cluster_id: str | None, new_cluster_id: str) -> str:
        """Connect, check or create the cluster id, register, join the election; returns the
        cluster id (ZooKeeper's is authoritative, as in Kafka)."""
        try:
            if self._chroot:
                self._create_chroot()
            self.zk.start(timeout=self.connection_timeout_ms / 1000)
        except Exception as exc:
            raise ConfigError(f"Timed out waiting for connection to ZooKeeper ({exc}); check zookeeper.connect") from None
        for path in zk.PERSISTENT_PATHS:
            self.zk.ensure_path(path)
        cluster_id = self._cluster_id(local_cluster_id, new_cluster_id)
        self._register()
        self.zk.add_listener(self._on_state)
        self.zk.ChildrenWatch(zk.BROKER_IDS, self._on_brokers)
        self._elect()
        return cluster_id

    def _create_chroot(self) -> None:
        """Kafka creates the chroot path of zookeeper.connect if it is missing."""
        root = KazooClient(hosts=self._hosts, timeout=self.zk._session_timeout / 1000)
        root.start(timeout=self.connection_timeout_ms / 1000)
        try:
            root.ensure_path(self._chroot)
        finally:
            root.stop()
            root.close()

    # --- what the cluster layer asks of a store (broker.metadata) ------------------------------
    async def call(self, error: ErrorCode, fn: Callable[..., T], *args: object) -> T:
        """A blocking ZooKeeper call, off the event loop (zk_calls.off_loop)."""
        return await off_loop(self.zk, error, fn, *args)

    def submit(self, error: ErrorCode, fn: Callable[..., T], *args: object) -> asyncio.Future[T]:
        """:meth:`call` as a future (it runs on the loop in the background)."""
        return asyncio.ensure_future(self.call(error, fn, *args))

    async def run(self, fn: Callable[..., T], *args: object) -> T:
        """A blocking ZooKeeper call in the default executor, waiting as long as kazoo
        retries (partition state writes: their callers handle an unknown outcome)."""
        return await asyncio.get_running_loop().run_in_executor(None, fn, *args)

    def open_metadata(self, on_change: Callable[[], None]) -> ZkMetadata:
        return ZkMetadata(self.zk, on_change=on_change)

    def security_store(self, local: SecurityStore, loop: asyncio.AbstractEventLoop) -> ZkSecurityStore:
        """ACLs, SCRAM credentials and quotas are the cluster's: ZooKeeper's, in Kafka's layout."""
        return ZkSecurityStore(self.zk, loop, local.listeners)

    def inter_broker_security(self, config: BrokerConfig) -> ClientSecurity | None:
        return inter_broker_security(config)

    def stop(self) -> None:
        """Close the session: the registration and, if held, the controller role go at once."""
        self._stopped = True
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            log.exception("closing the ZooKeeper session failed")

    # --- cluster id ---------------------------------------------------------------------------
    def _cluster_id(self, local: str | None, new: str) -> str:
        # As Kafka: a new cluster gets a new id (or cluster.id), never the log dir's, so a
        # log dir from another cluster (or from single-node mode) is refused, not adopted.
        try:
            self.zk.create(zk.CLUSTER_ID, zk.encode_cluster_id(new), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.zk.get(zk.CLUSTER_ID)
        cluster_id = zk.decode_cluster_id(data)
        if local is not None and local != cluster_id:
            raise ConfigError(f"The Cluster ID {cluster_id} doesn't match stored clusterId {local} in the log dir's "
                              "metadata. The broker is trying to join the wrong cluster. Configured "
                              "zookeeper.connect may be wrong.")
        return cluster_id

    # --- registration ---------------------------------------------------------------------------
    def _register(self) -> None:
        path = zk.broker_id_path(self.broker_id)
        # A broker restarted right after a crash finds its previous session's registration
        # still there until that session times out: wait for it (one session timeout),
        # rather than fail as Kafka does, so that a restart needs no operator.
        deadline = time.monotonic() + self.zk._session_timeout / 1000 + 2
        while True:
            try:
                self.zk.create(path, zk.encode_broker(self.advertised, extra=self.extra_registration), ephemeral=True,
                               makepath=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if stat.ephemeralOwner == self.zk.client_id[0]:
                    break
                if time.monotonic() > deadline:
                    raise ConfigError(f"Error while creating ephemeral at {path}, node already exists and owner "
                                      f"'{stat.ephemeralOwner}' does not match current session "
                                      f"'{self.zk.client_id[0]}': broker.id {self.broker_id} is taken") from None
                log.info("broker.id %d is still registered by an earlier session; waiting for it to expire",
                         self.broker_id)
                time.sleep(0.5)
        log.info("registered broker %d at %s with endpoints %s", self.broker_id, path,
                 ",".join(map(str, self.advertised)))

    def _on_brokers(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        listener = self.inter_broker_listener
        found: dict[int, tuple[str, int]] = {}
        endpoints: dict[int, dict[str, tuple[str, int]]] = {}
        epochs: dict[int, int] = {}
        registry_urls: dict[int, str] = {}
        for child in children:
            try:
                data, stat = self.zk.get(f"{zk.BROKER_IDS}/{child}")
            except NoNodeError:
                continue  # gone between the listing and the read
            except ZK_FAILURES:
                return True  # ZooKeeper went away: the last view stands; reconnecting lists again
            reg = zk.decode_broker(data)
            epochs[int(child)] = stat.czxid
            if isinstance(reg.get(zk.SCHEMA_REGISTRY_URL), str):
                registry_urls[int(child)] = reg[zk.SCHEMA_REGISTRY_URL]
            endpoints[int(child)] = zk.all_endpoints(reg)
            endpoint = endpoints[int(child)].get(listener)
            if endpoint is not None:
                found[int(child)] = endpoint
        self.brokers = dict(sorted(found.items()))
        self.endpoints = endpoints
        self.broker_epochs = epochs
        self.schema_registry_urls = registry_urls
        self._changed()
        return True

    def schema_registry_url(self, broker_id: int) -> str | None:
        return self.schema_registry_urls.get(broker_id)

    def live_endpoints(self, listener: str | None) -> list[tuple[int, str, int]]:
        """(id, host, port) of every live broker on ``listener`` (brokers without it are left
        out, as Kafka leaves them out of Metadata); None: the inter-broker listener."""
        if listener is None or listener == self.inter_broker_listener:
            return [(bid, host, port) for bid, (host, port) in self.brokers.items()]
        out = []
        for bid in self.brokers:
            ep = self.endpoints.get(bid, {}).get(listener)
            if ep is not None:
                out.append((bid, ep[0], ep[1]))
        return out

    def _changed(self) -> None:
        self.version += 1
        if self.on_change is not None:
            self.on_change()

    # --- controller election ------------------------------------------------------------------
    def _elect(self) -> None:
        """Kafka's registerControllerAndIncrementControllerEpoch: create the ephemeral
        /controller and bump /controller_epoch (conditional on its version) in one
        transaction; whoever loses reads the winner. Then watch /controller."""
        try:
            data, stat = self.zk.get(zk.CONTROLLER_EPOCH)
            epoch, version = zk.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                self.zk.create(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(zk.INITIAL_CONTROLLER_EPOCH))
            except NodeExistsError:
                pass
            data, stat = self.zk.get(zk.CONTROLLER_EPOCH)
            epoch, version = zk.decode_controller_epoch(data), stat.version
        tx = self.zk.transaction()
        tx.create(zk.CONTROLLER, zk.encode_controller(self.broker_id), ephemeral=True)
        tx.set_data(zk.CONTROLLER_EPOCH, zk.encode_controller_epoch(epoch + 1), version=version)
        results = tx.commit()
        # a lost race shows as NodeExistsError (/controller) or BadVersionError (the epoch)
        if not any(isinstance(r, Exception) for r in results):
            self.controller_id, self.controller_epoch = self.broker_id, epoch + 1
            log.info("broker %d is the controller (epoch %d)", self.broker_id, epoch + 1)
        self.zk.DataWatch(zk.CONTROLLER, self._on_controller)

    def _on_controller(self, data: bytes | None, stat, event=None) -> bool:
        if self._stopped:
            return False
        if data is None:
            self.controller_id = None
            if event is not None and event.type == EventType.DELETED:
                # the controller's session ended: run for it (on kazoo's thread, not in the watch)
                self.zk.handler.spawn(self._rejoin_election)
                return False  # _elect sets a new watch
        else:
            self.controller_id = zk.decode_controller(data)
            try:
                self.controller_epoch = zk.decode_controller_epoch(self.zk.get(zk.CONTROLLER_EPOCH)[0])
            except (NoNodeError, *ZK_FAILURES):
                pass  # the epoch is read again with the next change, or on reconnection
        self._changed()
        return True

    # --- session ------------------------------------------------------------------------------
    def _on_state(self, state: str) -> None:
        if self._stopped:
            return
        if state == KazooState.LOST:
            self._lost = True
            self.controller_id = None
            log.warning("ZooKeeper session lost: registering again when reconnected")
        elif state == KazooState.SUSPENDED:
            self._suspended = True
            log.warning("ZooKeeper connection lost; serving with the metadata last read, reconnecting")
        elif state == KazooState.CONNECTED:
            if self._suspended or self._lost:
                log.info("ZooKeeper connection re-established%s", " (new session)" if self._lost else "")
            self._suspended = False
            if self._lost:
                self._lost = False
                self.zk.handler.spawn(self._rejoin)

    def _rejoin_election(self) -> None:
        """_elect after the controller left, until it gets through: ZooKeeper going away
        meanwhile must not leave this broker without a watch on /controller."""
        while not self._stopped and not self._lost:  # a new session rejoins the election itself
            try:
                self._elect()
                return
            except ZK_FAILURES as exc:
                log.warning("running for controller failed (%s); trying again", describe(exc))
                time.sleep(1)

    def _rejoin(self) -> None:
        """Register again and rejoin the election after a new session, until it gets
        through: a failure while the connection stays up (a timed-out call, the old
        session's registration outliving the wait) must not leave the broker unregistered,
        which would keep it silently out of every ISR. One rejoin runs at a time."""
        if not self._rejoining.acquire(blocking=False):
            return
        try:
            while not self._stopped:
                try:
                    self._register()
                    self._elect()
                    return
                except (*ZK_FAILURES, ConfigError) as exc:
                    log.warning("re-registering in ZooKeeper failed (%s); trying again",
                                describe(exc) if isinstance(exc, ZK_FAILURES) else exc)
                time.sleep(1)
        finally:
            self._rejoining.release()
