"""The AVRO schema type: Confluent's ``AvroSchemaProvider`` and ``AvroSchema``
(io.confluent.kafka.schemaregistry.avro), over Avro 1.12's Java ``Schema``, which is what
Confluent's registry 8.x runs.

- :func:`parse` (registered as "AVRO"): the referenced schemas' texts are parsed first into
  the same names, then the schema, as ``AvroSchema``'s constructor does; see
  :mod:`schema_registry.avro_parser` for what is refused and with which message.
- :meth:`AvroSchema.canonical_string` is ``canonicalString()``: Avro's ``Schema.toString()``
  with the referenced schemas' names known, so they are written by name
  (:mod:`schema_registry.avro_model`).
- :meth:`AvroSchema.normalize` is ``normalize()``: ``toNormalizedString`` parsed again
  (:mod:`schema_registry.avro_normalize`).
- :meth:`AvroSchema.is_backward_compatible` is ``isBackwardCompatible``: Avro's
  ``SchemaCompatibility`` with this schema as reader (:mod:`schema_registry.avro_compat`).

Avro is parsed here rather than with fastavro, because what the registry stores and
compares is Java's text of Java's model: fastavro drops custom attributes, reorders keys,
refuses a named type defined twice the same way and a name used before its definition (both
of which Avro 1.12 accepts), and checks a union's default against the first branch only.
"""

from __future__ import annotations

from schema_registry import schema_types
from schema_registry.avro_compat import CheckError, Incompatibility, incompatibilities
from schema_registry.avro_model import AvroType, Record, to_string
from schema_registry.avro_normalize import normalized_text
from schema_registry.avro_parser import Parser, validate_names
from schema_registry.schema_types import ParsedSchema

DIFFERENT_SCHEMA_TYPE = "Incompatible because of different schema type"


class AvroSchema(ParsedSchema):
    """A parsed Avro schema with the referenced schemas it was parsed with."""

    schema_type = "AVRO"

    def __init__(self, schema: AvroType, references: dict[str, str], reference_names: list[str],
                 validate_as_new: bool) -> None:
        #: the parsed schema (Java's ``rawSchema()``)
        self.schema = schema
        self.references = dict(references)
        #: the full names of the referenced schemas' top-level types
        self.reference_names = reference_names
        self.validate_as_new = validate_as_new
        self._canonical: str | None = None

    def canonical_string(self) -> str:
        if self._canonical is None:
            self._canonical = to_string(self.schema, set(self.reference_names))
        return self._canonical

    def normalize(self) -> AvroSchema:
        """Confluent's ``normalize()``: the text ``AvroSchemaUtils.toNormalizedString`` makes
        (full names, attributes in a fixed order, the others sorted, aliases sorted, defaults
        read with the field's type), parsed again with the same references and validation."""
        return parse(normalized_text(self.schema, self.reference_names), self.references,
                     validate_as_new=self.validate_as_new)

    def name(self) -> str | None:
        """Confluent's ``name()``: a record's full name, else None."""
        return self.schema.full_name if isinstance(self.schema, Record) else None

    def incompatibilities(self, previous: AvroSchema) -> list[Incompatibility]:
        """Avro's incompatibilities of this schema reading data written with ``previous``."""
        return incompatibilities(self.schema, previous.schema)

    def compatibility_templates(self, previous: schema_types.ParsedSchema) -> list[str]:
        """Exactly what Confluent's ``isBackwardCompatible`` returns: each description with
        two ``%s`` for the reader's and the writer's role, which Confluent's
        ``SchemaValidatorBuilder`` fills with ("new", "old") when the new schema reads
        (BACKWARD) and ("old", "new") when the previous one does (FORWARD)."""
        if not isinstance(previous, AvroSchema):
            return [DIFFERENT_SCHEMA_TYPE]
        try:
            return [i.describe() for i in self.incompatibilities(previous)]
        except CheckError as e:
            return [f"Unexpected exception during compatibility check: {e}"]

    def is_backward_compatible(self, previous: schema_types.ParsedSchema, reader: str = "new",
                               writer: str = "old") -> list[str]:
        """Why this schema cannot read data written with ``previous``, one message per
        incompatibility, as Confluent words them with this schema as the "new" one; pass
        ``reader="old", writer="new"`` when this is the previous schema reading the new one
        (FORWARD)."""
        return [fill(t, reader, writer) for t in self.compatibility_templates(previous)]

    def __repr__(self) -> str:
        return f"AvroSchema({self.canonical_string()})"


def fill(template: str, reader: str, writer: str) -> str:
    """Java's ``String.format(template, reader, writer)`` for templates with ``%s`` only."""
    return template.replace("%s", reader, 1).replace("%s", writer, 1)


def parse(text: str, references: dict[str, str], *, validate_as_new: bool = True) -> AvroSchema:
    """Parse an Avro schema as Confluent's ``AvroSchemaProvider`` does.

    ``references``: the referenced schemas' texts, each after those it references.
    ``validate_as_new``: a schema being registered (Confluent's ``validateAsNew``): names
    checked with Avro's strict ASCII rules, defaults validated. False for a schema already
    registered (looked up, or read back): no default validation, and the Unicode name rules
    on names, fields and symbols only (Confluent's ``validateNames``).

    Raises :class:`~schema_registry.schema_types.InvalidSchemaError` with Avro's message.
    """
    parser = Parser(validate_as_new)
    reference_names = [parser.parse(ref).full_name for ref in references.values()]
    schema = parser.parse(text)
    if not validate_as_new:
        validate_names(schema)
    return AvroSchema(schema, references, reference_names, validate_as_new)


schema_types.register("AVRO", parse)
