"""What the registry asks of a schema type (Confluent's ``SchemaProvider`` and
``ParsedSchema``): parse a schema's text with its references into a :class:`ParsedSchema`,
which gives the canonical string the registry stores and compares, its normalised form
(``normalize=true``), and the reasons it cannot read data written with an earlier schema
(Confluent's ``isBackwardCompatible``). Each type lives in its own module (``avro``,
``json_schema``, ``protobuf``) and registers its parser in :data:`PARSERS`.

Pure: no I/O. The registry core resolves references (transitively, through the subjects'
versions) before it calls a parser.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Reference:
    """One entry of a schema's ``references``: the name the schema uses for it (an Avro
    full type name, a JSON Schema ``$ref`` URL, a .proto import path), and the subject
    version that holds it."""

    name: str
    subject: str
    version: int


class InvalidSchemaError(ValueError):
    """The schema's text is not a valid schema of its type: Confluent's 42201
    ``Invalid schema``; the message says why (shown to the client after Confluent's
    prefix)."""


class ParsedSchema(ABC):
    """A parsed schema of one type."""

    #: Confluent's name of the type: "AVRO", "JSON" or "PROTOBUF"
    schema_type: ClassVar[str]

    @abstractmethod
    def canonical_string(self) -> str:
        """The text the registry stores and compares (Confluent's ``canonicalString()``):
        two registrations are the same schema when these are equal (and their references
        are)."""

    @abstractmethod
    def normalize(self) -> ParsedSchema:
        """The normalised schema (``normalize=true`` on register, lookup and compatibility
        checks), as Confluent's ``normalize()`` makes it for this type."""

    @abstractmethod
    def is_backward_compatible(self, previous: ParsedSchema, reader: str = "new", writer: str = "old") -> list[str]:
        """Why data written with ``previous`` cannot be read with this schema: Confluent's
        ``isBackwardCompatible(previousSchema)`` messages, one per incompatibility, in
        Confluent's words (e.g. ``{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE',
        description:'The field 'f2' at path '/fields/1' in the new schema has no default
        value and is missing in the old schema', additionalInfo:'f2'}`` for Avro); empty when
        it can. Confluent's messages name the reader's and the writer's roles, which
        ``SchemaValidatorBuilder`` fills with ("new", "old") for BACKWARD: FORWARD asks
        ``previous.is_backward_compatible(new, reader="old", writer="new")``, FULL both."""


#: (schema text, {reference name: referenced schema text}, ordered so that each referenced
#: schema comes after those it references itself) -> ParsedSchema; raises
#: InvalidSchemaError
Parser = Callable[[str, dict[str, str]], ParsedSchema]

#: schema type name -> its parser; filled by the type modules when imported
PARSERS: dict[str, Parser] = {}


def register(schema_type: str, parser: Parser) -> None:
    PARSERS[schema_type] = parser
