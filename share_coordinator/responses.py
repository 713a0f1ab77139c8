"""Building the kio responses of the five share-group-state APIs from per-share-partition
outcomes, in the version the request came in.

The coordinator decides an :class:`Outcome` per share-partition; the response is built from
them only when asked, so that the shell can turn the outcomes whose records failed to
replicate into errors (:meth:`share_coordinator.coordinator.Result.response`) without the
coordinator knowing about the write path.

The error answers carry what Kafka's ``toErrorResponseData`` helpers carry: the code, the
message, and the fields' defaults (0, no batches, DeliveryCompleteCount -1).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from types import ModuleType
from typing import Any

from kio.schema.delete_share_group_state.v0 import response as delete_v0
from kio.schema.errors import ErrorCode
from kio.schema.initialize_share_group_state.v0 import response as initialize_v0
from kio.schema.read_share_group_state.v0 import response as read_v0
from kio.schema.read_share_group_state_summary.v0 import response as summary_v0
from kio.schema.read_share_group_state_summary.v1 import response as summary_v1
from kio.schema.write_share_group_state.v0 import response as write_v0
from kio.schema.write_share_group_state.v1 import response as write_v1

from protocol.error_messages import MESSAGES

__all__ = ["Api", "Outcome", "build_response"]


class Api(Enum):
    """The share coordinator's APIs: (response modules by version, topic result class name)."""

    INITIALIZE = ({0: initialize_v0}, "InitializeStateResult", "InitializeShareGroupStateResponse")
    READ = ({0: read_v0}, "ReadStateResult", "ReadShareGroupStateResponse")
    WRITE = ({0: write_v0, 1: write_v1}, "WriteStateResult", "WriteShareGroupStateResponse")
    DELETE = ({0: delete_v0}, "DeleteStateResult", "DeleteShareGroupStateResponse")
    SUMMARY = ({0: summary_v0, 1: summary_v1}, "ReadStateSummaryResult", "ReadShareGroupStateSummaryResponse")

    def module(self, version: int) -> ModuleType:
        modules: dict[int, ModuleType] = self.value[0]
        # A version newer than kio's: answer in the newest we know (the handler's declared
        # range keeps this from happening on the wire).
        return modules.get(version, modules[max(modules)])


@dataclass(slots=True)
class Outcome:
    """The answer for one share-partition of a request."""

    topic_id: uuid.UUID | None
    partition: int
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    #: the success payload (API-specific PartitionResult fields)
    fields: dict[str, Any] = field(default_factory=dict)
    #: the write whose records must be durable before this answer holds
    write_id: int | None = None

    @classmethod
    def failed(cls, topic_id: uuid.UUID | None, partition: int, error: ErrorCode,
               message: str | None = None) -> Outcome:
        return cls(topic_id, partition, error, message if message is not None else MESSAGES.get(error.value))


# Each PartitionResult's fields besides partition/error, with their defaults for an error.
_ERROR_DEFAULTS: dict[Api, dict[str, Any]] = {
    Api.INITIALIZE: {},
    Api.READ: {"state_epoch": 0, "start_offset": 0, "state_batches": ()},
    Api.WRITE: {},
    Api.DELETE: {},
    Api.SUMMARY: {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "delivery_complete_count": -1},
}


def _partition_result(api: Api, mod: ModuleType, version: int, o: Outcome) -> Any:
    values = dict(_ERROR_DEFAULTS[api])
    if o.error is ErrorCode.none:
        values.update(o.fields)
    if api is Api.READ:
        values["state_batches"] = tuple(
            mod.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                           delivery_state=b.delivery_state, delivery_count=b.delivery_count)
            for b in values["state_batches"])
    if api is Api.SUMMARY and version < 1:
        values.pop("delivery_complete_count")  # v1 (KIP-1226) added it
    return mod.PartitionResult(partition=o.partition, error_code=o.error,
                               error_message=None if o.error is ErrorCode.none else o.message, **values)


def build_response(api: Api, version: int, outcomes: Iterable[Outcome]) -> Any:
    """The response: one topic result per topic id, in the order the request named them."""
    mod = api.module(version)
    by_topic: dict[uuid.UUID | None, list[Any]] = {}
    for o in outcomes:
        by_topic.setdefault(o.topic_id, []).append(_partition_result(api, mod, version, o))
    topic_cls = getattr(mod, api.value[1])
    response_cls = getattr(mod, api.value[2])
    return response_cls(results=tuple(topic_cls(topic_id=t, partitions=tuple(ps)) for t, ps in by_topic.items()))
