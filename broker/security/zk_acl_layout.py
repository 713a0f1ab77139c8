"""Kafka's ZooKeeper-mode layout of the security metadata (pure: paths and JSON), which
ZkSecurityStore reads and writes, so that an operator (or a Kafka tool) recognises the
nodes:

- entity configs (AdminZkClient / ConfigEntityZNode): ``/config/users/<user>``,
  ``/config/clients/<client-id>``, ``/config/users/<user>/clients/<client-id>`` (names
  sanitized, ``<default>`` for the default entity) holding ``{"version":1,"config":{...}}``,
  each change announced by a sequential ``/config/changes/config_change_<seq>`` holding
  ``{"version":2,"entity_path":"users/alice"}``; an emptied entity's node goes as
  AdminZkClient.tryCleanQuotaNodes removes it;
- ACLs (AclAuthorizer / ZkAclStore / ResourceZNode): ``/kafka-acl/<Type>/<name>`` for
  LITERAL patterns, ``/kafka-acl-extended/prefixed/<Type>/<name>`` for PREFIXED ones,
  holding ``{"version":1,"acls":[{"principal":..,"permissionType":"Allow","operation":"Read","host":"*"}]}``,
  read-modify-written on the znode version, the node deleted with its last ACL; changes
  announced by ``/kafka-acl-changes/acl_changes_<seq>`` (``TOPIC:name``) and
  ``/kafka-acl-extended-changes/acl_changes_<seq>`` (ExtendedAclChangeEvent JSON).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable

from ..cluster import zk_layout as zk
from ..cluster.zk_layout import _json as _jackson
from .acls import AclPermissionType, PatternType
from .operations import AclOperation, ResourceType
from .store import DEFAULT_ENTITY, desanitize, sanitize

log = logging.getLogger("krait.security")

CONFIG_USERS = "/config/users"
CONFIG_CLIENTS = "/config/clients"
#: group configs (Kafka keeps them in KRaft's metadata log; Kafka's ZooKeeper mode, gone
#: before group configs came, would have put them beside the other entity configs)
CONFIG_GROUPS = "/config/groups"
#: ZkAclStore: LITERAL patterns here, other specific patterns under EXTENDED_ACLS/<pattern>
LITERAL_ACLS = "/kafka-acl"
EXTENDED_ACLS = "/kafka-acl-extended"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
#: ZkAclChangeStore.SequenceNumberPrefix
ACL_CHANGE_PREFIX = "acl_changes_"
#: AclEntry.RESOURCE_TYPES: every concrete type has a directory (KafkaZkClient.createAclPaths)
ACL_RESOURCE_TYPES = tuple(t for t in ResourceType if t not in (ResourceType.UNKNOWN, ResourceType.ANY))
#: each notification path and the prefix of its sequential nodes
CHANGE_PREFIXES = {zk.CONFIG_CHANGES: zk.CONFIG_CHANGE_PREFIX, LITERAL_ACL_CHANGES: ACL_CHANGE_PREFIX,
                    EXTENDED_ACL_CHANGES: ACL_CHANGE_PREFIX}
#: characters ZooKeeper's PathUtils.validatePath refuses (Java sees astral characters as
#: surrogate pairs, which it refuses too)
_BAD_PATH_CHARS = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\uf8ff\ufff0-\uffff\U00010000-\U0010ffff]")

#: (resource type, name, pattern type) with the enum names of acls.binding_to_dict
AclKey = tuple[str, str, str]
#: (principal, host, operation, permission type), enum names as in binding_to_dict
AclEntry = tuple[str, str, str, str]


def pascal(name: str) -> str:
    """SecurityUtils.toPascalCase: TRANSACTIONAL_ID -> TransactionalId."""
    return "".join(part.capitalize() for part in name.split("_") if part)


def enum_name(enum: type, text: str) -> str:
    """The member name for any of Kafka's spellings (Topic, TOPIC, TransactionalId)."""
    key = text.replace("_", "").upper()
    for member in enum:
        if member.name.replace("_", "") == key:
            return member.name
    raise ValueError(f"unknown {enum.__name__} {text!r}")


def acl_store_path(pattern_type: str) -> str:
    """ZkAclStore.aclPath: /kafka-acl, or /kafka-acl-extended/<pattern type lower-cased>."""
    return LITERAL_ACLS if pattern_type == "LITERAL" else f"{EXTENDED_ACLS}/{pattern_type.lower()}"


def acl_node_path(key: AclKey) -> str:
    """ResourceZNode.path: ``/kafka-acl/Topic/orders``, ``/kafka-acl-extended/prefixed/Group/app-``
    (the name is not sanitized, as in Kafka)."""
    resource_type, name, pattern_type = key
    return f"{acl_store_path(pattern_type)}/{pascal(resource_type)}/{name}"


def storable_name(name: str) -> bool:
    """Whether ZooKeeper accepts the resource name as the last element(s) of a path: Kafka
    writes a name with '/' as nested znodes, which works unless an element is empty, '.'
    or '..'."""
    return bool(name) and not _BAD_PATH_CHARS.search(name) and all(
        part not in ("", ".", "..") for part in name.split("/"))


def encode_acls(entries: Iterable[AclEntry]) -> bytes:
    """ResourceZNode.encode (AclEntry.toJsonCompatibleMap), entries in a stable order."""
    return _jackson({"version": 1, "acls": [
        {"principal": p, "permissionType": pascal(perm), "operation": pascal(op), "host": host}
        for p, host, op, perm in sorted(entries)]})


def decode_acls(data: bytes | None, path: str = "") -> frozenset[AclEntry]:
    """ResourceZNode.decode (AclEntry.fromBytes): version 1 only; names in any of Kafka's
    spellings. What cannot be read is left out (and logged)."""
    try:
        doc = json.loads(data) if data else {"version": 1}
        if int(doc.get("version", -1)) != 1:
            raise ValueError(f"unsupported ACL node version {doc.get('version')!r}")
    except ValueError as exc:
        log.warning("ignoring the ACLs of %s: %s", path, exc)
        return frozenset()
    out = set()
    for item in doc.get("acls") or []:
        try:
            if ":" not in str(item["principal"]):
                raise ValueError(f"expected a string in format principalType:principalName but got {item['principal']}")
            out.add((str(item["principal"]), str(item["host"]), enum_name(AclOperation, item["operation"]),
                     enum_name(AclPermissionType, item["permissionType"])))
        except (KeyError, ValueError, TypeError) as exc:
            log.warning("ignoring an unreadable ACL entry %r: %s", item, exc)
    return frozenset(out)


def encode_acl_change(key: AclKey) -> bytes:
    """LiteralAclChangeStore: ``TOPIC:name`` (ResourceType.toString, the enum name);
    ExtendedAclChangeStore: ExtendedAclChangeEvent, version 1."""
    resource_type, name, pattern_type = key
    if pattern_type == "LITERAL":
        return f"{resource_type}:{name}".encode()
    return _jackson({"version": 1, "resourceType": resource_type, "name": name, "patternType": pattern_type})


def decode_acl_change(root: str, data: bytes) -> AclKey:
    """The resource a change notification names (the decoders of ZkAclChangeStore)."""
    if root == LITERAL_ACL_CHANGES:
        resource_type, sep, name = data.decode().partition(":")
        if not sep:
            raise ValueError(f"expected a string in format ResourceType:ResourceName but got {data.decode()}")
        return enum_name(ResourceType, resource_type), name, "LITERAL"
    doc = json.loads(data)
    if int(doc["version"]) > 1:
        raise ValueError(f"Acl change event received for unsupported version: {doc['version']}")
    return (enum_name(ResourceType, doc["resourceType"]), str(doc["name"]),
            enum_name(PatternType, doc["patternType"]))


def entity_znode(path: str) -> str:
    """ConfigEntityZNode.path of an entity path: users/alice -> /config/users/alice."""
    return f"/config/{path}"


def normalized_name(name: str) -> str:
    """store.sanitize's spelling of a znode's name (Kafka's Sanitizer escapes '~' too)."""
    return name if name == DEFAULT_ENTITY else sanitize(desanitize(name))


def sequence_number(child: str, prefix: str) -> int | None:
    digits = child[len(prefix):]
    return int(digits) if child.startswith(prefix) and digits.isdigit() else None
