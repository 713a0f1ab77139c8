"""The follower's side of replication (Kafka's ReplicaFetcherManager and
ReplicaFetcherThread): one fetch loop per leader broker, as an asyncio task, sending Fetch
(v12: replica id, current leader epoch, last fetched epoch) for every partition this
broker follows on that leader, and for each answer: append the leader's batches as they
are, take the leader's high watermark (capped at our log end), truncate when the leader
reports a diverging epoch (KIP-320: our log holds records of an epoch the leader does not
have), or reset to the leader's log start when we fell below it.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Callable
from typing import Any

from protocol.apis import ApiKey
from protocol.errors import ErrorCode, KafkaError, ProtocolError
from storage.errors import KafkaStorageError

from ..cluster.broker_channel import Peer
from ..security.client_security import ClientSecurity
from ..security.inter_broker import open_broker_connection
from .manager import ReplicaManager

log = logging.getLogger("krait.replica_fetcher")

TopicPartition = tuple[str, int]
FETCH_VERSION = 12
_SIZE = struct.Struct(">i")
#: a Fetch unanswered this long past replica.fetch.wait.max.ms is overdue: the leader is
#: asked on a new connection whether it answers (and again every PROBE_EVERY_S)
OVERDUE_S = 2.0
PROBE_EVERY_S = 1.0
#: how long a probe's connection and ApiVersions may take
PROBE_TIMEOUT_S = 1.0


def _discard(task: asyncio.Future) -> None:
    """Give up a task nobody waits for any more: cancel it, or, when it has just ended (as
    the fetcher was stopped), take its exception so that asyncio does not log it as never
    retrieved (seen at a broker's shutdown: a Fetch whose connection had closed)."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


class ReplicaFetcher:
    """Fetches every partition this broker follows on one leader."""

    def __init__(self, manager: ReplicaFetcherManager, leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        #: followed partitions: tp -> the leader epoch we follow at
        self.partitions: dict[TopicPartition, int] = {}
        #: partitions backing off after an error: tp -> loop time to retry at
        self.delayed: dict[TopicPartition, float] = {}
        self.task: asyncio.Task | None = None
        #: loop time the Fetch in flight was sent at (None: none in flight)
        self.sent_at: float | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        m = self.manager
        peer: Peer | None = None
        while True:
            try:
                if not self.partitions:
                    await asyncio.sleep(0.1)
                    continue
                if peer is None:
                    endpoint = m.endpoint_of(self.leader_id)
                    if endpoint is None:
                        await asyncio.sleep(m.backoff_s)
                        continue
                    reader, writer = await open_broker_connection(endpoint, m.security, max(m.backoff_s * 5, 5.0))
                    peer = Peer(reader, writer)
                if not await self._fetch_once(peer):
                    await asyncio.sleep(min(m.backoff_s, 0.1))
            except asyncio.CancelledError:
                if peer is not None:
                    peer.close()
                raise
            except (OSError, EOFError, ConnectionError, asyncio.IncompleteReadError, TimeoutError, KafkaError) as exc:
                log.warning("fetching from broker %d failed: %s; retrying in %.1fs", self.leader_id, exc, m.backoff_s)
                if peer is not None:
                    peer.close()
                    peer = None
                await asyncio.sleep(m.backoff_s)
            except Exception:
                log.exception("replica fetcher for broker %d failed", self.leader_id)
                if peer is not None:
                    peer.close()
                    peer = None
                await asyncio.sleep(m.backoff_s)

    def _request_partitions(self) -> dict[str, list[dict]]:
        rm = self.manager.replicas
        now = asyncio.get_running_loop().time()
        topics: dict[str, list[dict]] = {}
        for tp, epoch in self.partitions.items():
            if self.delayed.get(tp, 0) > now:
                continue
            plog = rm.logs.get(*tp)
            if plog is None or plog.offline:
                continue  # Kafka removes an offline partition from its fetcher
            topics.setdefault(tp[0], []).append(dict(
                partition=tp[1], current_leader_epoch=epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=plog.latest_epoch, log_start_offset=plog.log_start_offset,
                partition_max_bytes=self.manager.fetch_max_bytes))
        return topics

    async def _fetch_once(self, peer: Peer) -> bool:
        """One Fetch round trip; False when there was nothing to ask for."""
        m = self.manager
        topics = self._request_partitions()
        if not topics:
            return False
        sent = {(t, p["partition"]): (self.partitions[(t, p["partition"])], p["fetch_offset"])
                for t, ps in topics.items() for p in ps}
        self.sent_at = asyncio.get_running_loop().time()
        fetch = asyncio.ensure_future(peer.request(
            ApiKey.FETCH, FETCH_VERSION, f"broker-{m.broker_id}-fetcher-{self.leader_id}",
            replica_id=m.broker_id, max_wait=m.max_wait_ms, min_bytes=1, max_bytes=m.response_max_bytes,
            isolation_level=0, session_id=0, session_epoch=-1,
            topics=[dict(topic=t, partitions=ps) for t, ps in topics.items()],
            forgotten_topics_data=[], rack_id=""))
        try:
            resp = await self._answer(fetch)
        finally:
            self.sent_at = None
            _discard(fetch)
        if resp.error_code:
            raise KafkaError(ErrorCode(resp.error_code), "fetch from leader refused")
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                if tp not in sent or self.partitions.get(tp) != sent[tp][0]:
                    continue  # no longer followed here, or followed at another epoch now
                try:
                    self._handle(tp, sent[tp][1], p)
                except KafkaStorageError as exc:
                    # our log dir failed (the failure channel has it): only this partition
                    # stops, the others keep replicating (Kafka's markPartitionFailed)
                    log.error("%s-%d: stopped fetching from broker %d: %s", tp[0], tp[1], self.leader_id, exc)
        return True

    async def _answer(self, fetch: asyncio.Future) -> Any:
        """The Fetch's answer, within replica.socket.timeout.ms (a connection whose packets
        are dropped never fails by itself: TCP retries for many minutes).

        Sooner than that, a connection that outlived a network fault is given up: once the
        answer is overdue (the leader holds a Fetch at most replica.fetch.wait.max.ms), the
        leader is asked on a new connection, and if it answers there, this one is dropped
        and the loop reconnects. An answer lost while the network was cut waits on the
        leader's TCP retransmission backoff, which doubles with every try: after a 15 s cut
        the next try comes about 10 s after the network is back, and the follower stays
        out of the ISR for that long (seen in chaos runs: partitions unwritable for 27 s).
        A paused or overloaded leader does not answer the probe either, so its connection
        is kept."""
        m = self.manager
        loop = asyncio.get_running_loop()
        sent = loop.time()
        deadline = sent + m.socket_timeout_s
        wait = m.max_wait_ms / 1000 + OVERDUE_S
        while True:
            done, _ = await asyncio.wait({fetch}, timeout=max(0.0, min(wait, deadline - loop.time())))
            if done:
                return fetch.result()
            if loop.time() >= deadline:
                raise TimeoutError(f"no answer within replica.socket.timeout.ms ({m.socket_timeout_s * 1000:.0f})")
            probe = asyncio.ensure_future(self._answers_on_new_connection())
            try:
                done, _ = await asyncio.wait({fetch, probe}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                _discard(probe)
            if fetch in done:
                return fetch.result()
            if probe.result():
                raise ConnectionError(f"Fetch unanswered for {loop.time() - sent:.1f}s while the broker answers on a new "
                                      "connection: reconnecting")
            wait = PROBE_EVERY_S

    async def _answers_on_new_connection(self) -> bool:
        """Whether the leader answers ApiVersions on a new connection within PROBE_TIMEOUT_S."""
        m = self.manager
        endpoint = m.endpoint_of(self.leader_id)
        if endpoint is None:
            return False
        peer = None
        try:
            async with asyncio.timeout(PROBE_TIMEOUT_S):
                reader, writer = await open_broker_connection(endpoint, m.security, PROBE_TIMEOUT_S)
                peer = Peer(reader, writer)
                await peer.request(ApiKey.API_VERSIONS, 0, f"broker-{m.broker_id}-fetcher-{self.leader_id}")
            return True
        except (OSError, EOFError, ConnectionError, TimeoutError, KafkaError, ProtocolError):
            return False
        finally:
            if peer is not None:
                peer.close()

    def _handle(self, tp: TopicPartition, fetch_offset: int, p) -> None:
        rm = self.manager.replicas
        part = rm.partitions.get(tp)
        if part is None or part.is_leader or part.leader_id != self.leader_id \
                or part.leader_epoch != self.partitions.get(tp):
            # only a follower of this leader at this epoch takes its batches: a batch of the
            # old epoch appended after this broker was elected would sit where its own epoch
            # starts, and its followers would truncate and re-fetch it for ever (seen in a
            # soak after a ZooKeeper pause, when a stopped fetcher's answer still came in)
            return
        plog = rm.logs.get(*tp)
        if plog is None or plog.log_end_offset != fetch_offset:
            return
        code = p.error_code
        if code == ErrorCode.none:
            div = p.diverging_epoch
            if div is not None and div.epoch >= 0:
                self._truncate_on_divergence(plog, div.epoch, div.end_offset)
                return
            if p.records:
                plog.append_as_follower(p.records)
            plog.update_high_watermark(min(p.high_watermark, plog.log_end_offset))
            if p.log_start_offset > plog.log_start_offset and p.log_start_offset <= plog.high_watermark:
                plog.delete_records_before(p.log_start_offset)
            self.delayed.pop(tp, None)
            rm.purgatory.notify(tp)
        elif code == ErrorCode.offset_out_of_range:
            self._reset_out_of_range(plog, fetch_offset, p)
        else:
            # NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH, UNKNOWN_TOPIC...: the
            # leader's view and ours differ for now; ZooKeeper's next state settles it
            log.debug("%s-%d: leader %d answered %s", tp[0], tp[1], self.leader_id, ErrorCode(code).name)
            self.delayed[tp] = asyncio.get_running_loop().time() + self.manager.backoff_s

    def _truncate_on_divergence(self, plog, leader_epoch: int, leader_end: int) -> None:
        """KIP-320 / Kafka's getOffsetTruncationState: truncate to where our log and the
        leader's agree, as far as we can tell; the next fetch sends our (new) last epoch,
        so further rounds settle the rest."""
        epoch, end = plog.end_offset_for_epoch(leader_epoch)
        if epoch >= 0 and epoch != leader_epoch:
            # we never had the leader's epoch: cut back to the end of our largest epoch
            # below it; the next fetch asks again from there (truncation not complete)
            target = min(end, plog.log_end_offset)
        else:
            target = min(leader_end, plog.log_end_offset)
        target = max(target, plog.log_start_offset)
        log.info("%s: truncating from %d to %d (leader %d: epoch %d ends at %d)", plog.name,
                 plog.log_end_offset, target, self.leader_id, leader_epoch, leader_end)
        plog.truncate_to(target)

    def _reset_out_of_range(self, plog, fetch_offset: int, p) -> None:
        leader_start = p.log_start_offset
        if 0 <= leader_start and fetch_offset < leader_start:
            log.info("%s: below the leader's log start %d: starting over there", plog.name, leader_start)
            plog.truncate_fully_and_start_at(leader_start)
        elif p.high_watermark >= 0 and fetch_offset > p.high_watermark:
            plog.truncate_to(max(p.high_watermark, plog.log_start_offset))
        else:
            self.delayed[(plog.topic, plog.partition)] = asyncio.get_running_loop().time() + self.manager.backoff_s

    def stuck(self, longer_than: float) -> bool:
        """A Fetch has been in flight for more than ``longer_than`` seconds."""
        return self.sent_at is not None and asyncio.get_running_loop().time() - self.sent_at > longer_than

    def stop(self) -> None:
        self.partitions = {}
        if self.task is not None:
            self.task.cancel()


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader it follows partitions on."""

    def __init__(self, broker_id: int, replicas: ReplicaManager, endpoint_of: Callable[[int], tuple[str, int] | None],
                 *, fetch_max_bytes: int, response_max_bytes: int, max_wait_ms: int, backoff_ms: int,
                 socket_timeout_ms: int = 30000, security: ClientSecurity | None = None) -> None:
        self.broker_id = broker_id
        #: TLS / SASL towards the leaders (the inter-broker listener's)
        self.security = security
        self.replicas = replicas
        self.endpoint_of = endpoint_of
        self.fetch_max_bytes = fetch_max_bytes
        self.response_max_bytes = response_max_bytes
        self.max_wait_ms = max_wait_ms
        self.backoff_s = backoff_ms / 1000
        self.socket_timeout_s = max(socket_timeout_ms, max_wait_ms) / 1000
        self.fetchers: dict[int, ReplicaFetcher] = {}

    def update(self, follow: dict[TopicPartition, tuple[int, int]]) -> None:
        """Follow exactly these partitions: {tp: (leader, leader epoch)}."""
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, (leader, epoch) in follow.items():
            by_leader.setdefault(leader, {})[tp] = epoch
        for leader_id, fetcher in list(self.fetchers.items()):
            if leader_id not in by_leader:
                fetcher.stop()
                del self.fetchers[leader_id]
        for leader_id, parts in by_leader.items():
            fetcher = self.fetchers.get(leader_id)
            if fetcher is None:
                fetcher = self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
                fetcher.start()
            changed = [tp for tp in fetcher.partitions if parts.get(tp) != fetcher.partitions[tp]]
            for tp in changed:
                fetcher.delayed.pop(tp, None)
            fetcher.partitions = parts
            if changed and fetcher.stuck(self.max_wait_ms / 1000 + 1.0):
                # a new epoch of the same leader (it was re-elected, e.g. after a network
                # cut healed) while our Fetch has been out longer than the leader may hold
                # it: that connection predates the change and may be waiting out TCP's
                # retransmission backoff (seen: 12 s after a cut healed); start afresh
                log.info("fetch from broker %d unanswered for %.1fs: reconnecting", leader_id,
                         asyncio.get_running_loop().time() - fetcher.sent_at)
                fetcher.stop()
                fetcher = self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
                fetcher.partitions = parts
                fetcher.start()

    def stop(self) -> None:
        for f in self.fetchers.values():
            f.stop()
        self.fetchers.clear()
