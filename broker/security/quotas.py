"""Client quotas: how fast a user / client id may produce, fetch and use the broker's
request handling time, and how long a client that went over must wait. The pure core is
:class:`QuotaManager` (no I/O, time passed in as milliseconds); the functions at the end
(``produce_throttle``, ``fetch_throttle``, ``fetch_max_bytes``, ``request_throttle``,
``mute``) are the broker's hooks into it.

Follows Kafka's ClientQuotaManager / ClientRequestQuotaManager with the default quota
callback:

- quotas are the entity configs ``producer_byte_rate``, ``consumer_byte_rate`` and
  ``request_percentage`` of ``users/<user>/clients/<client-id>``, ``users/<user>/clients/
  <default>``, ``users/<user>``, ``users/<default>/clients/<client-id>``, ``users/<default>/
  clients/<default>``, ``users/<default>``, ``clients/<client-id>``, ``clients/<default>``
  (broker.security_store); the first of these eight that has the key applies, in this
  order (DefaultQuotaCallback.quotaLimit);
- clients whose quota comes from the same entity share one rate (the quota's "metric tags",
  DefaultQuotaCallback.quotaMetricTags): a ``users/alice`` quota is shared by all of
  alice's client ids, a ``clients/<default>`` quota is per client id;
- a rate is Kafka's Rate over a WindowedSum: ``quota.window.num`` samples (11) of
  ``quota.window.size.seconds`` (1 s), the window padded to ``samples - 1`` full windows
  while younger than that (so the first burst may reach ``quota * 10 s``);
- each request is recorded, then the rate measured; over the quota, the client waits
  ``(observed - quota) / quota * window`` ms (QuotaUtils.throttleTime), the time that
  brings the observed rate back to the quota if nothing more is recorded. The request quota
  caps it at one quota window (ClientRequestQuotaManager); byte-rate throttles are not
  capped, as in Kafka.

One deliberate difference: Kafka records into a sensor whenever any quota of the type
exists, even for a client no quota applies to; here such a client records nothing (one
dict look-up per request), so a quota added later starts from an empty window.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .store import CLIENT_ID, USER, parse_entity_path

if TYPE_CHECKING:
    from ..broker import Broker
    from ..server import RequestContext

__all__ = [
    "PRODUCE", "FETCH", "REQUEST", "QUOTA_KEYS", "USER_CLIENT_QUOTA_KEYS", "Rate", "QuotaManager",
    "quotas_of", "produce_throttle", "fetch_throttle", "fetch_max_bytes", "request_throttle",
]

PRODUCE, FETCH, REQUEST = "Produce", "Fetch", "Request"  # Kafka's QuotaType names
#: the entity config key of each quota type
QUOTA_KEYS = {PRODUCE: "producer_byte_rate", FETCH: "consumer_byte_rate", REQUEST: "request_percentage"}
#: QuotaConfig.userAndClientQuotaConfigs: key -> Kafka's ConfigDef type (controller_mutation_rate
#: is accepted and stored but not enforced: Krait has no controller mutation quota)
USER_CLIENT_QUOTA_KEYS = {"producer_byte_rate": "LONG", "consumer_byte_rate": "LONG",
                          "request_percentage": "DOUBLE", "controller_mutation_rate": "DOUBLE"}

NUM_QUOTA_SAMPLES_CONFIG = "quota.window.num"
QUOTA_WINDOW_SIZE_SECONDS_CONFIG = "quota.window.size.seconds"
NUM_QUOTA_SAMPLES_DEFAULT = 11
QUOTA_WINDOW_SIZE_SECONDS_DEFAULT = 1
#: ClientQuotaManager.InactiveSensorExpirationTimeSeconds
INACTIVE_SENSOR_EXPIRATION_MS = 3600 * 1000

# QuotaTypes: which kinds of entity have a quota decides how clients share rates
_CLIENT_ID_ENABLED, _USER_ENABLED, _USER_CLIENT_ID_ENABLED = 1, 2, 4
_DEFAULT = None  # the <default> entity name, as parse_entity_path gives it
_ABSENT = ""  # no such part in the entity (Kafka's empty metric tag)


class Rate:
    """Kafka's Rate(WindowedSum): ``samples + 1`` ring slots (the extra one for the sample
    overlapping the window's start), each [value, start_ms, last_event_ms]."""

    __slots__ = ("samples", "window_ms", "_ring", "_current", "last_record_ms")

    def __init__(self, samples: int, window_ms: int):
        self.samples = samples
        self.window_ms = window_ms
        self._ring: list[list[float]] = []
        self._current = 0
        self.last_record_ms = 0

    def record(self, value: float, now_ms: int) -> None:
        ring = self._ring
        if not ring:
            ring.append([0.0, now_ms, now_ms])
        sample = ring[self._current]
        if now_ms - sample[1] >= self.window_ms:  # Sample.isComplete (no event window)
            self._current = (self._current + 1) % (self.samples + 1)
            if self._current >= len(ring):
                sample = [0.0, now_ms, now_ms]
                ring.append(sample)
            else:
                sample = ring[self._current]
                sample[0], sample[1], sample[2] = 0.0, now_ms, now_ms
        sample[0] += value
        sample[2] = now_ms
        self.last_record_ms = now_ms

    def _purge(self, now_ms: int) -> None:
        # SampledStat.purgeObsoleteSamples: samples with no event within the whole window reset
        expire = self.samples * self.window_ms
        for s in self._ring:
            if now_ms - s[2] >= expire:
                s[0], s[1], s[2] = 0.0, now_ms, now_ms

    def window_size_ms(self, now_ms: int) -> int:
        """Rate.windowSize: time since the oldest sample started, at least ``samples - 1``
        full windows, at least 1 ms."""
        self._purge(now_ms)
        if not self._ring:
            self._ring.append([0.0, now_ms, now_ms])
        elapsed = now_ms - min(s[1] for s in self._ring)
        full = elapsed // self.window_ms
        if full < self.samples - 1:
            elapsed += (self.samples - 1 - full) * self.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(s[0] for s in self._ring)

    def measure(self, now_ms: int) -> float:
        """Units per second over the window."""
        total = self.total(now_ms)
        return total / (self.window_size_ms(now_ms) / 1000.0)


def _java_round(x: float) -> int:
    return math.floor(x + 0.5)


class _ClientQuota:
    """One quota type (Produce, Fetch or Request): the overrides and the shared rates."""

    def __init__(self, key: str, samples: int, window_ms: int, max_throttle_ms: int | None):
        self.key = key
        self.samples = samples
        self.window_ms = window_ms
        self.max_throttle_ms = max_throttle_ms
        #: (user, client id) -> bound; user/client id is a name, _DEFAULT or _ABSENT
        self.overrides: dict[tuple[str | None, str | None], float] = {}
        self.enabled = 0
        #: (user, client id) of a client -> (rate tags, bound), or None: no quota applies
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        #: rate tags -> Rate, kept across config changes as Kafka keeps its sensors
        self.rates: dict[tuple[str, str], Rate] = {}

    def set_overrides(self, overrides: dict[tuple[str | None, str | None], float]) -> None:
        self.overrides = overrides
        enabled = 0
        for user, client in overrides:
            if user != _ABSENT:
                enabled |= _USER_CLIENT_ID_ENABLED if client != _ABSENT else _USER_ENABLED
            else:
                enabled |= _CLIENT_ID_ENABLED
        self.enabled = enabled
        self._resolved = {}

    # --- DefaultQuotaCallback ------------------------------------------------------------
    def _tags(self, user: str, client: str) -> tuple[str, str]:
        """quotaMetricTags: which shared rate a client's usage goes to."""
        enabled = self.enabled
        if enabled in (0, _CLIENT_ID_ENABLED):
            return (_ABSENT, client)
        if enabled == _USER_ENABLED:
            return (user, _ABSENT)
        if enabled == _USER_CLIENT_ID_ENABLED:
            return (user, client)
        o = self.overrides
        if (user, client) in o or (user, _DEFAULT) in o:
            return (user, client)
        if (user, _ABSENT) in o:
            return (user, _ABSENT)
        if (_DEFAULT, client) in o or (_DEFAULT, _DEFAULT) in o:
            return (user, client)
        if (_DEFAULT, _ABSENT) in o:
            return (user, _ABSENT)
        return (_ABSENT, client)

    def limit(self, tags: tuple[str, str]) -> float | None:
        """quotaLimit: the bound of the most specific entity that has one (eight levels)."""
        user, client = tags
        o = self.overrides
        if user and client:
            candidates = ((user, client), (user, _DEFAULT), (_DEFAULT, client), (_DEFAULT, _DEFAULT))
        elif user:
            candidates = ((user, _ABSENT), (_DEFAULT, _ABSENT))
        elif client:
            candidates = ((_ABSENT, client), (_ABSENT, _DEFAULT))
        else:
            return None
        for c in candidates:
            bound = o.get(c)
            if bound is not None:
                return bound
        return None

    def resolve(self, user: str, client: str) -> tuple[tuple[str, str], float] | None:
        key = (user, client)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        tags = self._tags(user, client)
        bound = self.limit(tags)
        out = None if bound is None else (tags, bound)
        if len(self._resolved) > 100_000:  # client ids are chosen by clients: keep it bounded
            self._resolved.clear()
        self._resolved[key] = out
        return out

    # --- recording -------------------------------------------------------------------------
    def record(self, user: str, client: str, value: float, now_ms: int) -> int:
        """Record ``value`` and answer the throttle time in ms (0 within the quota)."""
        if not self.enabled:
            return 0
        res = self._resolved.get((user, client), 0)
        if res == 0:
            res = self.resolve(user, client)
        if res is None:
            return 0
        tags, bound = res
        rate = self.rates.get(tags)
        if rate is None:
            rate = self.rates[tags] = Rate(self.samples, self.window_ms)
        rate.record(value, now_ms)
        observed = rate.measure(now_ms)
        if observed <= bound:  # Quota.acceptable (upper bound)
            return 0
        throttle = _java_round((observed - bound) / bound * rate.window_size_ms(now_ms))
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(throttle)

    def unrecord(self, user: str, client: str, value: float, now_ms: int) -> None:
        """unrecordQuotaSensor: take back a recorded value (a throttled fetch sends nothing)."""
        res = self.resolve(user, client) if self.enabled else None
        if res is not None and res[0] in self.rates:
            self.rates[res[0]].record(-value, now_ms)

    def max_value_in_window(self, user: str, client: str) -> float | None:
        """getMaxValueInQuotaWindow: ``quota * (samples - 1) * window``, None without a quota."""
        res = self.resolve(user, client) if self.enabled else None
        if res is None:
            return None
        return res[1] * (self.samples - 1) * (self.window_ms / 1000.0)

    def expire(self, now_ms: int) -> None:
        for tags in [t for t, r in self.rates.items() if now_ms - r.last_record_ms >= INACTIVE_SENSOR_EXPIRATION_MS]:
            del self.rates[tags]


def _window_config(originals: Mapping[str, Any]) -> tuple[int, int]:
    """(samples, window seconds) from ``quota.window.num`` / ``quota.window.size.seconds``
    (INT, at least 1, Kafka's defaults 11 and 1)."""
    out = []
    for key, default in ((NUM_QUOTA_SAMPLES_CONFIG, NUM_QUOTA_SAMPLES_DEFAULT),
                         (QUOTA_WINDOW_SIZE_SECONDS_CONFIG, QUOTA_WINDOW_SIZE_SECONDS_DEFAULT)):
        raw = originals.get(key)
        value = default if raw in (None, "") else int(str(raw).strip())
        if value < 1:
            raise ValueError(f"Invalid value {value} for configuration {key}: Value must be at least 1")
        out.append(value)
    return out[0], out[1]


class QuotaManager:
    """The three client quotas of a broker. ``update(entities)`` takes the security store's
    entity configs (path -> {key: value}); ``record_*`` answer throttle times in ms."""

    def __init__(self, num_samples: int = NUM_QUOTA_SAMPLES_DEFAULT,
                 window_size_seconds: int = QUOTA_WINDOW_SIZE_SECONDS_DEFAULT,
                 clock: Callable[[], int] | None = None):
        self.num_samples = num_samples
        self.window_size_seconds = window_size_seconds
        window_ms = window_size_seconds * 1000
        #: milliseconds, monotonic: only differences matter to a rate
        self.clock = clock or (lambda: int(time.monotonic() * 1000))
        self.quotas = {
            PRODUCE: _ClientQuota(QUOTA_KEYS[PRODUCE], num_samples, window_ms, None),
            FETCH: _ClientQuota(QUOTA_KEYS[FETCH], num_samples, window_ms, None),
            # ClientRequestQuotaManager: maxThrottleTimeMs = quota.window.size.seconds
            REQUEST: _ClientQuota(QUOTA_KEYS[REQUEST], num_samples, window_ms, window_ms),
        }
        self._next_expiry = 0

    @classmethod
    def from_originals(cls, originals: Mapping[str, Any], clock: Callable[[], int] | None = None) -> QuotaManager:
        samples, window = _window_config(originals)
        return cls(samples, window, clock)

    @property
    def enabled(self) -> bool:
        return any(q.enabled for q in self.quotas.values())

    def update(self, entities: Mapping[str, Mapping[str, str]]) -> None:
        """Rebuild the overrides from entity configs (called on every store change)."""
        per_type: dict[str, dict[tuple[str | None, str | None], float]] = {t: {} for t in self.quotas}
        for path, cfg in entities.items():
            keys = [t for t, q in self.quotas.items() if q.key in cfg]
            if not keys:
                continue
            try:
                entity = parse_entity_path(path)
            except ValueError:
                continue
            ident = (entity.get(USER, _ABSENT), entity.get(CLIENT_ID, _ABSENT))
            for t in keys:
                try:
                    bound = float(cfg[self.quotas[t].key])
                except ValueError:
                    continue  # refused by AlterClientQuotas; a hand-edited file must not stop the broker
                per_type[t][ident] = bound
        for t, q in self.quotas.items():
            q.set_overrides(per_type[t])

    def quota(self, qtype: str, user: str, client_id: str) -> float | None:
        """The bound applying to a client (None: unlimited)."""
        res = self.quotas[qtype].resolve(user, client_id)
        return None if res is None else res[1]

    def _record(self, qtype: str, user: str, client_id: str, value: float, now_ms: int) -> int:
        if now_ms >= self._next_expiry:
            self._next_expiry = now_ms + 60_000
            for q in self.quotas.values():
                q.expire(now_ms)
        return self.quotas[qtype].record(user, client_id, value, now_ms)

    def record_produce(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        return self._record(PRODUCE, user, client_id, nbytes, now_ms) if self.quotas[PRODUCE].enabled else 0

    def record_fetch(self, user: str, client_id: str, nbytes: int, now_ms: int) -> int:
        return self._record(FETCH, user, client_id, nbytes, now_ms) if self.quotas[FETCH].enabled else 0

    def unrecord_fetch(self, user: str, client_id: str, nbytes: int, now_ms: int) -> None:
        self.quotas[FETCH].unrecord(user, client_id, nbytes, now_ms)

    def record_request_time(self, user: str, client_id: str, cpu_ms: float, now_ms: int) -> int:
        """Request handling time as a percentage of one thread (Kafka: nanos * 100 / 1e9 per
        second of window): 100 ms of handling in one second is 10 %."""
        if not self.quotas[REQUEST].enabled:
            return 0
        return self._record(REQUEST, user, client_id, cpu_ms * 0.1, now_ms)

    def fetch_max_bytes(self, user: str, client_id: str) -> int | None:
        v = self.quotas[FETCH].max_value_in_window(user, client_id)
        return None if v is None else int(min(v, 2**31 - 1))


# --- the broker's hooks --------------------------------------------------------------------
def _user(ctx: RequestContext) -> str:
    # KafkaPrincipal.getName: the part after "User:"
    principal = ctx.principal
    return principal.partition(":")[2] if ":" in principal else principal


def quotas_of(broker: Broker) -> QuotaManager:
    """The broker's QuotaManager (Broker keeps it in step with the security store)."""
    return broker.quotas


def produce_throttle(broker: Broker, ctx: RequestContext, request_bytes: int) -> int:
    """Produce: record the request's size (Kafka's request.sizeInBytes) against the
    producer's byte rate; the throttle time to answer in ``throttle_time_ms`` and to mute
    the connection for (:func:`mute`). Kafka records it after the append, before answering."""
    qm = quotas_of(broker)
    if not qm.quotas[PRODUCE].enabled:
        return 0
    return qm.record_produce(_user(ctx), ctx.client_id, request_bytes, qm.clock())


def fetch_throttle(broker: Broker, ctx: RequestContext, response_bytes: int) -> int:
    """Fetch (consumers only, never a follower): record the response's size; when over the
    quota the value is taken back and the caller answers an empty response (no topics)
    carrying the throttle time and mutes the connection (KafkaApis.handleFetchRequest,
    fetchContext.getThrottledResponse)."""
    qm = quotas_of(broker)
    if not qm.quotas[FETCH].enabled:
        return 0
    user, now = _user(ctx), qm.clock()
    throttle = qm.record_fetch(user, ctx.client_id, response_bytes, now)
    if throttle > 0:
        qm.unrecord_fetch(user, ctx.client_id, response_bytes, now)
    return throttle


def fetch_max_bytes(broker: Broker, ctx: RequestContext, max_bytes: int) -> int:
    """A consumer's fetch is capped to what its quota allows in one full window, so a fetch
    with nothing recorded cannot be throttled by its own size alone."""
    qm = quotas_of(broker)
    if not qm.quotas[FETCH].enabled:
        return max_bytes
    cap = qm.fetch_max_bytes(_user(ctx), ctx.client_id)
    return max_bytes if cap is None else min(max_bytes, cap)


def request_throttle(broker: Broker, ctx: RequestContext, handling_ms: float) -> int:
    """Every client request (not a follower's fetch): the time the event loop spent on it,
    against ``request_percentage``; the throttle time (at most one quota window)."""
    qm = quotas_of(broker)
    if not qm.quotas[REQUEST].enabled:
        return 0
    return qm.record_request_time(_user(ctx), ctx.client_id, handling_ms, qm.clock())


