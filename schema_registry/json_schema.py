"""The JSON Schema type ("JSON"): Confluent's ``JsonSchemaProvider`` and ``JsonSchema``.

Parsing (``parse(text, references)``):

- the text is read as Confluent's Jackson ``ObjectMapper`` reads it: decimals kept exactly
  as written (``1.0`` stays ``1.0``, ``1e2`` is ``1E+2``), a repeated key's last value in its
  first place, ``NaN``/``Infinity`` accepted, anything after the first JSON value ignored;
  the root must be an object or a boolean;
- ``$schema`` picks the draft as Confluent's ``SpecificationVersion`` does (draft-04/06/07,
  2019-09, 2020-12 at http or https, a trailing ``#`` allowed; draft-07 otherwise) and the
  schema must be valid against that draft's metaschema (``jsonschema``);
- ``references`` maps the name a ``$ref`` uses to the referenced schema's text; ``$ref``s are
  resolved (``referencing``) against them, the metaschemas and the schema itself, never
  fetched; one that cannot be resolved makes the schema invalid. A top-level
  ``definitions`` is also reachable as ``#/$defs/...`` (Confluent's ``mergeDefBuckets``);
- the schema is then loaded into the model Confluent's compatibility check compares
  (:mod:`schema_registry.json_schema_model`, :mod:`schema_registry.json_schema_modern`),
  which rejects what Confluent's loaders reject (an unknown ``type``, a regular expression
  that does not compile, ...).

``canonical_string()`` is Confluent's ``canonicalString()``: the parsed JSON written compactly
in the keys' written order (Confluent does not sort them). ``normalize()`` sorts every object's
keys, as Confluent's ``normalize()`` (re-reading the canonical string with a sorting
``ObjectMapper``) does; nothing else changes. ``is_backward_compatible`` is
:mod:`schema_registry.json_schema_diff`, its messages
:mod:`schema_registry.json_schema_difference`'s with the schemas' roles filled in ("The new
schema has an open content model ...").
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

import jsonschema_specifications
from jsonschema import Draft4Validator, Draft6Validator, Draft7Validator, Draft201909Validator, Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Specification
from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012

from schema_registry import schema_types
from schema_registry.json_schema_diff import compare
from schema_registry.json_schema_difference import COMPATIBLE_CHANGES_LENIENT, COMPATIBLE_CHANGES_STRICT, Difference
from schema_registry.json_schema_model import EveritLoader, Schema
from schema_registry.json_schema_modern import ModernLoader
from schema_registry.schema_types import InvalidSchemaError, ParsedSchema

if TYPE_CHECKING:
    from referencing._core import Resolver

SCHEMA_TYPE = "JSON"
DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"

# ---------------------------------------------------------------------------------------------
# JSON as Jackson reads and writes it

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_DECODER = json.JSONDecoder(parse_float=Decimal, parse_constant=_CONSTANTS.__getitem__)


def load_json(text: str) -> Any:
    """One JSON value, as Jackson's ``readTree`` reads it (what follows it is not read)."""
    start = len(text) - len(text.lstrip(_WHITESPACE))
    if start == len(text):
        raise InvalidSchemaError("Invalid JSON: no content")
    try:
        value, _ = _DECODER.raw_decode(text, start)
    except (ValueError, RecursionError) as e:
        raise InvalidSchemaError(f"Invalid JSON: {e}") from None
    return value


_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}


def _string(s: str) -> str:
    if not any(c in _SHORT_ESCAPES or c < " " for c in s):
        return f'"{s}"'
    out = []
    for c in s:
        if c in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[c])
        elif c < " ":
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _utf16(key: str) -> bytes:
    # Java orders strings by UTF-16 code unit
    return key.encode("utf-16-be", "surrogatepass")


def dump_json(value: Any, sort_keys: bool = False) -> str:
    """Compact JSON as Jackson writes it: no spaces, only ``"``, ``\\`` and control characters
    escaped, decimals as ``BigDecimal.toString()``, NaN and infinities as strings; keys in
    their order, or (``sort_keys``) in Java's ``String`` order."""
    if isinstance(value, dict):
        keys = sorted(value, key=_utf16) if sort_keys else value
        return "{" + ",".join(f"{_string(k)}:{dump_json(value[k], sort_keys)}" for k in keys) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump_json(v, sort_keys) for v in value) + "]"
    if isinstance(value, str):
        return _string(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, Decimal):
        return str(value.copy_abs() if value.is_zero() else value)
    if isinstance(value, float):
        return '"NaN"' if math.isnan(value) else ('"Infinity"' if value > 0 else '"-Infinity"')
    return str(value)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value, key=_utf16)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


# ---------------------------------------------------------------------------------------------
# Drafts

#: Confluent's SpecificationVersion: $schema (without a trailing #) -> draft
_DRAFT_BY_URL = {
    "http://json-schema.org/draft-04/schema": "draft-04", "https://json-schema.org/draft-04/schema": "draft-04",
    "http://json-schema.org/schema": "draft-04", "https://json-schema.org/schema": "draft-04",
    "http://json-schema.org/draft-06/schema": "draft-06", "https://json-schema.org/draft-06/schema": "draft-06",
    "http://json-schema.org/draft-07/schema": "draft-07", "https://json-schema.org/draft-07/schema": "draft-07",
    "http://json-schema.org/draft/2019-09/schema": "2019-09", "https://json-schema.org/draft/2019-09/schema": "2019-09",
    "http://json-schema.org/draft/2020-12/schema": "2020-12", "https://json-schema.org/draft/2020-12/schema": "2020-12",
}
_VALIDATORS = {"draft-04": Draft4Validator, "draft-06": Draft6Validator, "draft-07": Draft7Validator,
               "2019-09": Draft201909Validator, "2020-12": Draft202012Validator}
_SPECIFICATIONS: dict[str, Specification[Any]] = {
    "draft-04": DRAFT4, "draft-06": DRAFT6, "draft-07": DRAFT7, "2019-09": DRAFT201909, "2020-12": DRAFT202012}
#: everit's own $schema lookup (a prefix match) for the drafts it loads; draft 7 otherwise
_EVERIT_DRAFTS = (("http://json-schema.org/draft-04/schema", 4), ("https://json-schema.org/draft-04/schema", 4),
                  ("http://json-schema.org/draft-06/schema", 6), ("https://json-schema.org/draft-06/schema", 6),
                  ("http://json-schema.org/draft-07/schema", 7), ("https://json-schema.org/draft-07/schema", 7))


def _metaschema_registry() -> Registry[Any]:
    # the metaschemas a $ref may name, at each address Confluent knows them by
    registry: Registry[Any] = jsonschema_specifications.REGISTRY
    aliases = []
    for url in _DRAFT_BY_URL:
        canonical = url.replace("https://", "http://") if "draft-0" in url else url.replace("http://", "https://")
        if url not in registry and canonical in registry:
            aliases.append((url, registry[canonical]))
    return registry.with_resources(aliases)


_METASCHEMAS = _metaschema_registry()


def draft_of(node: Any) -> str:
    """The draft Confluent reads a schema as: "draft-04", "draft-06", "draft-07", "2019-09" or
    "2020-12"."""
    url = node.get("$schema") if isinstance(node, dict) else None
    if isinstance(url, str):
        return _DRAFT_BY_URL.get(url.removesuffix("#"), "draft-07")
    return "draft-07"


def _everit_draft(node: dict[str, Any]) -> int:
    url = node.get("$schema")
    if isinstance(url, str):
        for prefix, draft in _EVERIT_DRAFTS:
            if url.startswith(prefix):
                return draft
    return 7


def _with_defs(node: Any) -> Any:
    """Confluent's ``mergeDefBuckets(json, "definitions", "$defs")``: top-level definitions
    also under ``$defs`` (``$defs`` wins), for ``$ref``s to ``#/$defs/...``."""
    if not isinstance(node, dict):
        return node
    source, target = node.get("definitions"), node.get("$defs")
    if not isinstance(source, dict) or not source or (target is not None and not isinstance(target, dict)):
        return node
    return {**node, "$defs": {**source, **(target or {})}}


def _check_metaschema(node: Any, draft: str) -> None:
    validator_class = _VALIDATORS[draft]
    error = best_match(validator_class(validator_class.META_SCHEMA).iter_errors(node))
    if error is not None:
        where = error.json_path if error.path else "the root"
        raise InvalidSchemaError(f"Invalid JSON schema ({draft}): {error.message} at {where}")


def _load_model(node: Any, draft: str, references: dict[str, Any]) -> Schema:
    specification = _SPECIFICATIONS[draft]
    root = _with_defs(node)
    root_resource = specification.create_resource(root)
    root_id = root_resource.id()
    registry = _METASCHEMAS
    for name, contents in references.items():
        resource = specification.create_resource(_with_defs(contents))
        uris = {name}
        if root_id:
            uris.add(urljoin(root_id, name))
        if draft in ("2019-09", "2020-12") and not name.startswith(".") and ":" not in name:
            uris.add("./" + name)
        registry = registry.with_resources((uri, resource) for uri in uris)
    resolver: Resolver[Any] = registry.resolver_with_root(root_resource)
    if draft in ("2019-09", "2020-12"):
        return ModernLoader(specification).load_root(root, resolver)
    return EveritLoader(specification, _everit_draft(root) if isinstance(root, dict) else 7).load(root, resolver)


# ---------------------------------------------------------------------------------------------
# The parsed schema


class JsonSchema(ParsedSchema):
    """A parsed JSON Schema: its JSON, its references' JSON and the model compatibility
    checks compare."""

    schema_type = SCHEMA_TYPE

    def __init__(self, node: Any, references: dict[str, Any]) -> None:
        self.node = node
        self.references = references
        self.draft = draft_of(node)
        self.model = _load_model(node, self.draft, references)
        self._canonical = dump_json(node)

    def canonical_string(self) -> str:
        return self._canonical

    def normalize(self) -> JsonSchema:
        return JsonSchema(_sorted(self.node), self.references)

    def differences(self, previous: ParsedSchema) -> list[Difference]:
        """Every difference (compatible or not) reading ``previous``'s data with this schema."""
        if not isinstance(previous, JsonSchema):
            raise TypeError(f"not a JSON schema: {previous!r}")
        return compare(previous.model, self.model)

    def compatibility_templates(self, previous: ParsedSchema, lenient: bool = False) -> list[str]:
        """Confluent's ``isBackwardCompatible(policy, previous)`` verbatim, with the STRICT
        policy (Confluent's default) or, ``lenient``, the LENIENT one: one message per
        incompatible difference, ``%s`` where Confluent's validator puts the two schemas' roles
        (reader first)."""
        if previous.schema_type != self.schema_type or not isinstance(previous, JsonSchema):
            return [DIFFERENT_SCHEMA_TYPE]
        compatible = COMPATIBLE_CHANGES_LENIENT if lenient else COMPATIBLE_CHANGES_STRICT
        try:
            differences = compare(previous.model, self.model, compatible)
        except RecursionError:
            # (Confluent's Java stack would overflow here too: an error, never "compatible")
            return ["The schemas are nested too deeply to be compared"]
        return [d.message() for d in differences if d.type not in compatible]

    def is_backward_compatible(self, previous: ParsedSchema, reader: str = "new", writer: str = "old",
                               lenient: bool = False) -> list[str]:
        """Why this schema cannot read data written with ``previous``: the messages of
        :meth:`compatibility_templates` with the roles filled in as Confluent's
        ``SchemaValidatorBuilder`` fills them, this schema the "new" one; pass ``reader="old",
        writer="new"`` when this is the previous schema reading the new one (FORWARD)."""
        return [fill(t, reader, writer) for t in self.compatibility_templates(previous, lenient)]

    def __repr__(self) -> str:
        return f"JsonSchema({self._canonical})"


def fill(template: str, reader: str, writer: str) -> str:
    """Java's ``String.format(template, reader, writer)`` for templates with ``%s`` only."""
    return template.replace("%s", reader, 1).replace("%s", writer, 1)


def parse(text: str, references: dict[str, str]) -> JsonSchema:
    """The Parser registered for "JSON"; raises InvalidSchemaError."""
    node = load_json(text)
    if not isinstance(node, (dict, bool)):
        found = "ARRAY" if isinstance(node, list) else "STRING" if isinstance(node, str) else (
            "NULL" if node is None else "NUMBER")
        raise InvalidSchemaError(f"Invalid JSON schema: expected an object or boolean at the root, found {found}")
    parsed_references = {}
    for name, reference in references.items():
        try:
            parsed_references[name] = load_json(reference)
        except InvalidSchemaError as e:
            raise InvalidSchemaError(f"reference '{name}': {e}") from None
    try:
        _check_metaschema(node, draft_of(node))
        return JsonSchema(node, parsed_references)
    except RecursionError:
        raise InvalidSchemaError("Invalid JSON schema: nested too deeply") from None


schema_types.register(SCHEMA_TYPE, parse)
