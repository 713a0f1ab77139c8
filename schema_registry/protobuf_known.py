"""The .proto files Confluent's registry resolves without references
(``ProtobufSchema.KNOWN_DEPENDENCIES``): Google's well-known types (google/protobuf/*, from
the protobuf runtime), Google's common types (google/type/*) and Confluent's own
(confluent/meta.proto, confluent/type/decimal.proto and variant.proto), the last two
groups carried here as their serialized ``FileDescriptorProto`` (as googleapis-common-protos
and Confluent's protobuf-types publish them). Each is read as Confluent reads a descriptor
(:func:`.protobuf_descriptor.from_descriptor`), once, when first needed. Pure.
"""

from __future__ import annotations

from base64 import b64decode
from functools import cache

from google.protobuf import (
    any_pb2,
    api_pb2,
    descriptor_pb2,
    duration_pb2,
    empty_pb2,
    field_mask_pb2,
    source_context_pb2,
    struct_pb2,
    timestamp_pb2,
    type_pb2,
    wrappers_pb2,
)

from .protobuf_descriptor import from_descriptor
from .protobuf_model import ProtoFile

_RUNTIME = (any_pb2, api_pb2, descriptor_pb2, duration_pb2, empty_pb2, field_mask_pb2, source_context_pb2,
            struct_pb2, timestamp_pb2, type_pb2, wrappers_pb2)

#: import path -> base64 of its serialized FileDescriptorProto
_EMBEDDED = {
    "confluent/meta.proto": (
        "ChRjb25mbHVlbnQvbWV0YS5wcm90bxIJY29uZmx1ZW50GiBnb29nbGUvcHJvdG9idWYvZGVzY3JpcHRvci5wcm90byKdAQoETWV0"
        "YRILCgNkb2MYASABKAkSKwoGcGFyYW1zGAIgAygLMhsuY29uZmx1ZW50Lk1ldGEuUGFyYW1zRW50cnkSDAoEdGFncxgDIAMoCRIe"
        "CgVydWxlcxgEIAMoCzIPLmNvbmZsdWVudC5SdWxlGi0KC1BhcmFtc0VudHJ5EgsKA2tleRgBIAEoCRINCgV2YWx1ZRgCIAEoCToC"
        "OAEiPAoEUnVsZRIMCgRuYW1lGAEgASgJEgsKA2RvYxgCIAEoCRIMCgRleHByGAMgASgJEgsKA3NxbBgEIAEoCTpBCglmaWxlX21l"
        "dGESHC5nb29nbGUucHJvdG9idWYuRmlsZU9wdGlvbnMYwAggASgLMg8uY29uZmx1ZW50Lk1ldGE6RwoMbWVzc2FnZV9tZXRhEh8u"
        "Z29vZ2xlLnByb3RvYnVmLk1lc3NhZ2VPcHRpb25zGMAIIAEoCzIPLmNvbmZsdWVudC5NZXRhOkMKCmZpZWxkX21ldGESHS5nb29n"
        "bGUucHJvdG9idWYuRmllbGRPcHRpb25zGMAIIAEoCzIPLmNvbmZsdWVudC5NZXRhOkEKCWVudW1fbWV0YRIcLmdvb2dsZS5wcm90"
        "b2J1Zi5FbnVtT3B0aW9ucxjACCABKAsyDy5jb25mbHVlbnQuTWV0YTpMCg9lbnVtX3ZhbHVlX21ldGESIS5nb29nbGUucHJvdG9i"
        "dWYuRW51bVZhbHVlT3B0aW9ucxjACCABKAsyDy5jb25mbHVlbnQuTWV0YUIOWgwuLi9jb25mbHVlbnRiBnByb3RvMw=="
    ),
    "confluent/type/decimal.proto": (
        "Chxjb25mbHVlbnQvdHlwZS9kZWNpbWFsLnByb3RvEg5jb25mbHVlbnQudHlwZSI6CgdEZWNpbWFsEg0KBXZhbHVlGAEgASgMEhEK"
        "CXByZWNpc2lvbhgCIAEoDRINCgVzY2FsZRgDIAEoBWIGcHJvdG8z"
    ),
    "confluent/type/variant.proto": (
        "Chxjb25mbHVlbnQvdHlwZS92YXJpYW50LnByb3RvEg5jb25mbHVlbnQudHlwZSIqCgdWYXJpYW50EhAKCG1ldGFkYXRhGAEgASgM"
        "Eg0KBXZhbHVlGAIgASgMYgZwcm90bzM="
    ),
    "google/type/calendar_period.proto": (
        "CiFnb29nbGUvdHlwZS9jYWxlbmRhcl9wZXJpb2QucHJvdG8SC2dvb2dsZS50eXBlKn8KDkNhbGVuZGFyUGVyaW9kEh8KG0NBTEVO"
        "REFSX1BFUklPRF9VTlNQRUNJRklFRBAAEgcKA0RBWRABEggKBFdFRUsQAhINCglGT1JUTklHSFQQAxIJCgVNT05USBAEEgsKB1FV"
        "QVJURVIQBRIICgRIQUxGEAYSCAoEWUVBUhAHQngKD2NvbS5nb29nbGUudHlwZUITQ2FsZW5kYXJQZXJpb2RQcm90b1ABWkhnb29n"
        "bGUuZ29sYW5nLm9yZy9nZW5wcm90by9nb29nbGVhcGlzL3R5cGUvY2FsZW5kYXJwZXJpb2Q7Y2FsZW5kYXJwZXJpb2SiAgNHVFBi"
        "BnByb3RvMw=="
    ),
    "google/type/color.proto": (
        "Chdnb29nbGUvdHlwZS9jb2xvci5wcm90bxILZ29vZ2xlLnR5cGUaHmdvb2dsZS9wcm90b2J1Zi93cmFwcGVycy5wcm90byJdCgVD"
        "b2xvchILCgNyZWQYASABKAISDQoFZ3JlZW4YAiABKAISDAoEYmx1ZRgDIAEoAhIqCgVhbHBoYRgEIAEoCzIbLmdvb2dsZS5wcm90"
        "b2J1Zi5GbG9hdFZhbHVlQl0KD2NvbS5nb29nbGUudHlwZUIKQ29sb3JQcm90b1ABWjZnb29nbGUuZ29sYW5nLm9yZy9nZW5wcm90"
        "by9nb29nbGVhcGlzL3R5cGUvY29sb3I7Y29sb3KiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/date.proto": (
        "ChZnb29nbGUvdHlwZS9kYXRlLnByb3RvEgtnb29nbGUudHlwZSIwCgREYXRlEgwKBHllYXIYASABKAUSDQoFbW9udGgYAiABKAUS"
        "CwoDZGF5GAMgASgFQloKD2NvbS5nb29nbGUudHlwZUIJRGF0ZVByb3RvUAFaNGdvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dv"
        "b2dsZWFwaXMvdHlwZS9kYXRlO2RhdGWiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/datetime.proto": (
        "Chpnb29nbGUvdHlwZS9kYXRldGltZS5wcm90bxILZ29vZ2xlLnR5cGUaHmdvb2dsZS9wcm90b2J1Zi9kdXJhdGlvbi5wcm90byLg"
        "AQoIRGF0ZVRpbWUSDAoEeWVhchgBIAEoBRINCgVtb250aBgCIAEoBRILCgNkYXkYAyABKAUSDQoFaG91cnMYBCABKAUSDwoHbWlu"
        "dXRlcxgFIAEoBRIPCgdzZWNvbmRzGAYgASgFEg0KBW5hbm9zGAcgASgFEi8KCnV0Y19vZmZzZXQYCCABKAsyGS5nb29nbGUucHJv"
        "dG9idWYuRHVyYXRpb25IABIqCgl0aW1lX3pvbmUYCSABKAsyFS5nb29nbGUudHlwZS5UaW1lWm9uZUgAQg0KC3RpbWVfb2Zmc2V0"
        "IicKCFRpbWVab25lEgoKAmlkGAEgASgJEg8KB3ZlcnNpb24YAiABKAlCZgoPY29tLmdvb2dsZS50eXBlQg1EYXRlVGltZVByb3Rv"
        "UAFaPGdvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dvb2dsZWFwaXMvdHlwZS9kYXRldGltZTtkYXRldGltZaICA0dUUGIGcHJv"
        "dG8z"
    ),
    "google/type/dayofweek.proto": (
        "Chtnb29nbGUvdHlwZS9kYXlvZndlZWsucHJvdG8SC2dvb2dsZS50eXBlKoQBCglEYXlPZldlZWsSGwoXREFZX09GX1dFRUtfVU5T"
        "UEVDSUZJRUQQABIKCgZNT05EQVkQARILCgdUVUVTREFZEAISDQoJV0VETkVTREFZEAMSDAoIVEhVUlNEQVkQBBIKCgZGUklEQVkQ"
        "BRIMCghTQVRVUkRBWRAGEgoKBlNVTkRBWRAHQmkKD2NvbS5nb29nbGUudHlwZUIORGF5T2ZXZWVrUHJvdG9QAVo+Z29vZ2xlLmdv"
        "bGFuZy5vcmcvZ2VucHJvdG8vZ29vZ2xlYXBpcy90eXBlL2RheW9md2VlaztkYXlvZndlZWuiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/decimal.proto": (
        "Chlnb29nbGUvdHlwZS9kZWNpbWFsLnByb3RvEgtnb29nbGUudHlwZSIYCgdEZWNpbWFsEg0KBXZhbHVlGAEgASgJQmMKD2NvbS5n"
        "b29nbGUudHlwZUIMRGVjaW1hbFByb3RvUAFaOmdvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dvb2dsZWFwaXMvdHlwZS9kZWNp"
        "bWFsO2RlY2ltYWyiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/expr.proto": (
        "ChZnb29nbGUvdHlwZS9leHByLnByb3RvEgtnb29nbGUudHlwZSJQCgRFeHByEhIKCmV4cHJlc3Npb24YASABKAkSDQoFdGl0bGUY"
        "AiABKAkSEwoLZGVzY3JpcHRpb24YAyABKAkSEAoIbG9jYXRpb24YBCABKAlCWgoPY29tLmdvb2dsZS50eXBlQglFeHByUHJvdG9Q"
        "AVo0Z29vZ2xlLmdvbGFuZy5vcmcvZ2VucHJvdG8vZ29vZ2xlYXBpcy90eXBlL2V4cHI7ZXhwcqICA0dUUGIGcHJvdG8z"
    ),
    "google/type/fraction.proto": (
        "Chpnb29nbGUvdHlwZS9mcmFjdGlvbi5wcm90bxILZ29vZ2xlLnR5cGUiMgoIRnJhY3Rpb24SEQoJbnVtZXJhdG9yGAEgASgDEhMK"
        "C2Rlbm9taW5hdG9yGAIgASgDQmYKD2NvbS5nb29nbGUudHlwZUINRnJhY3Rpb25Qcm90b1ABWjxnb29nbGUuZ29sYW5nLm9yZy9n"
        "ZW5wcm90by9nb29nbGVhcGlzL3R5cGUvZnJhY3Rpb247ZnJhY3Rpb26iAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/interval.proto": (
        "Chpnb29nbGUvdHlwZS9pbnRlcnZhbC5wcm90bxILZ29vZ2xlLnR5cGUaH2dvb2dsZS9wcm90b2J1Zi90aW1lc3RhbXAucHJvdG8i"
        "aAoISW50ZXJ2YWwSLgoKc3RhcnRfdGltZRgBIAEoCzIaLmdvb2dsZS5wcm90b2J1Zi5UaW1lc3RhbXASLAoIZW5kX3RpbWUYAiAB"
        "KAsyGi5nb29nbGUucHJvdG9idWYuVGltZXN0YW1wQmYKD2NvbS5nb29nbGUudHlwZUINSW50ZXJ2YWxQcm90b1ABWjxnb29nbGUu"
        "Z29sYW5nLm9yZy9nZW5wcm90by9nb29nbGVhcGlzL3R5cGUvaW50ZXJ2YWw7aW50ZXJ2YWyiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/latlng.proto": (
        "Chhnb29nbGUvdHlwZS9sYXRsbmcucHJvdG8SC2dvb2dsZS50eXBlIi0KBkxhdExuZxIQCghsYXRpdHVkZRgBIAEoARIRCglsb25n"
        "aXR1ZGUYAiABKAFCYAoPY29tLmdvb2dsZS50eXBlQgtMYXRMbmdQcm90b1ABWjhnb29nbGUuZ29sYW5nLm9yZy9nZW5wcm90by9n"
        "b29nbGVhcGlzL3R5cGUvbGF0bG5nO2xhdGxuZ6ICA0dUUGIGcHJvdG8z"
    ),
    "google/type/money.proto": (
        "Chdnb29nbGUvdHlwZS9tb25leS5wcm90bxILZ29vZ2xlLnR5cGUiPAoFTW9uZXkSFQoNY3VycmVuY3lfY29kZRgBIAEoCRINCgV1"
        "bml0cxgCIAEoAxINCgVuYW5vcxgDIAEoBUJdCg9jb20uZ29vZ2xlLnR5cGVCCk1vbmV5UHJvdG9QAVo2Z29vZ2xlLmdvbGFuZy5v"
        "cmcvZ2VucHJvdG8vZ29vZ2xlYXBpcy90eXBlL21vbmV5O21vbmV5ogIDR1RQYgZwcm90bzM="
    ),
    "google/type/month.proto": (
        "Chdnb29nbGUvdHlwZS9tb250aC5wcm90bxILZ29vZ2xlLnR5cGUqsAEKBU1vbnRoEhUKEU1PTlRIX1VOU1BFQ0lGSUVEEAASCwoH"
        "SkFOVUFSWRABEgwKCEZFQlJVQVJZEAISCQoFTUFSQ0gQAxIJCgVBUFJJTBAEEgcKA01BWRAFEggKBEpVTkUQBhIICgRKVUxZEAcS"
        "CgoGQVVHVVNUEAgSDQoJU0VQVEVNQkVSEAkSCwoHT0NUT0JFUhAKEgwKCE5PVkVNQkVSEAsSDAoIREVDRU1CRVIQDEJdCg9jb20u"
        "Z29vZ2xlLnR5cGVCCk1vbnRoUHJvdG9QAVo2Z29vZ2xlLmdvbGFuZy5vcmcvZ2VucHJvdG8vZ29vZ2xlYXBpcy90eXBlL21vbnRo"
        "O21vbnRoogIDR1RQYgZwcm90bzM="
    ),
    "google/type/phone_number.proto": (
        "Ch5nb29nbGUvdHlwZS9waG9uZV9udW1iZXIucHJvdG8SC2dvb2dsZS50eXBlIqsBCgtQaG9uZU51bWJlchIVCgtlMTY0X251bWJl"
        "chgBIAEoCUgAEjgKCnNob3J0X2NvZGUYAiABKAsyIi5nb29nbGUudHlwZS5QaG9uZU51bWJlci5TaG9ydENvZGVIABIRCglleHRl"
        "bnNpb24YAyABKAkaMAoJU2hvcnRDb2RlEhMKC3JlZ2lvbl9jb2RlGAEgASgJEg4KBm51bWJlchgCIAEoCUIGCgRraW5kQnEKD2Nv"
        "bS5nb29nbGUudHlwZUIQUGhvbmVOdW1iZXJQcm90b1ABWkRnb29nbGUuZ29sYW5nLm9yZy9nZW5wcm90by9nb29nbGVhcGlzL3R5"
        "cGUvcGhvbmVfbnVtYmVyO3Bob25lX251bWJlcqICA0dUUGIGcHJvdG8z"
    ),
    "google/type/postal_address.proto": (
        "CiBnb29nbGUvdHlwZS9wb3N0YWxfYWRkcmVzcy5wcm90bxILZ29vZ2xlLnR5cGUi/QEKDVBvc3RhbEFkZHJlc3MSEAoIcmV2aXNp"
        "b24YASABKAUSEwoLcmVnaW9uX2NvZGUYAiABKAkSFQoNbGFuZ3VhZ2VfY29kZRgDIAEoCRITCgtwb3N0YWxfY29kZRgEIAEoCRIU"
        "Cgxzb3J0aW5nX2NvZGUYBSABKAkSGwoTYWRtaW5pc3RyYXRpdmVfYXJlYRgGIAEoCRIQCghsb2NhbGl0eRgHIAEoCRITCgtzdWJs"
        "b2NhbGl0eRgIIAEoCRIVCg1hZGRyZXNzX2xpbmVzGAkgAygJEhIKCnJlY2lwaWVudHMYCiADKAkSFAoMb3JnYW5pemF0aW9uGAsg"
        "ASgJQnUKD2NvbS5nb29nbGUudHlwZUISUG9zdGFsQWRkcmVzc1Byb3RvUAFaRmdvb2dsZS5nb2xhbmcub3JnL2dlbnByb3RvL2dv"
        "b2dsZWFwaXMvdHlwZS9wb3N0YWxhZGRyZXNzO3Bvc3RhbGFkZHJlc3OiAgNHVFBiBnByb3RvMw=="
    ),
    "google/type/quaternion.proto": (
        "Chxnb29nbGUvdHlwZS9xdWF0ZXJuaW9uLnByb3RvEgtnb29nbGUudHlwZSI4CgpRdWF0ZXJuaW9uEgkKAXgYASABKAESCQoBeRgC"
        "IAEoARIJCgF6GAMgASgBEgkKAXcYBCABKAFCbAoPY29tLmdvb2dsZS50eXBlQg9RdWF0ZXJuaW9uUHJvdG9QAVpAZ29vZ2xlLmdv"
        "bGFuZy5vcmcvZ2VucHJvdG8vZ29vZ2xlYXBpcy90eXBlL3F1YXRlcm5pb247cXVhdGVybmlvbqICA0dUUGIGcHJvdG8z"
    ),
    "google/type/timeofday.proto": (
        "Chtnb29nbGUvdHlwZS90aW1lb2ZkYXkucHJvdG8SC2dvb2dsZS50eXBlIksKCVRpbWVPZkRheRINCgVob3VycxgBIAEoBRIPCgdt"
        "aW51dGVzGAIgASgFEg8KB3NlY29uZHMYAyABKAUSDQoFbmFub3MYBCABKAVCaQoPY29tLmdvb2dsZS50eXBlQg5UaW1lT2ZEYXlQ"
        "cm90b1ABWj5nb29nbGUuZ29sYW5nLm9yZy9nZW5wcm90by9nb29nbGVhcGlzL3R5cGUvdGltZW9mZGF5O3RpbWVvZmRheaICA0dU"
        "UGIGcHJvdG8z"
    ),
}

#: the import paths the registry knows without references
KNOWN_PATHS = frozenset([*(m.DESCRIPTOR.name for m in _RUNTIME), *_EMBEDDED])


@cache
def known_dependencies() -> dict[str, ProtoFile]:
    """Import path -> elements of every file in :data:`KNOWN_PATHS`."""
    files = {}
    for module in _RUNTIME:
        proto = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
        files[module.DESCRIPTOR.name] = from_descriptor(proto)
    for path, encoded in _EMBEDDED.items():
        files[path] = from_descriptor(descriptor_pb2.FileDescriptorProto.FromString(b64decode("".join(encoded))))
    return files
