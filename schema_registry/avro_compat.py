"""Can a reader schema read what a writer schema wrote: Avro's Java
``SchemaCompatibility.checkReaderWriterCompatibility`` (Avro 1.12), which Confluent's
``AvroSchema.isBackwardCompatible`` runs with the new schema as reader and the previous one
as writer, then words each incompatibility with its ``Difference`` class.

The rules, as Avro has them: the same primitive; a promotion (int to long, float, double;
long to float, double; float to double; string to bytes and back); arrays by items, maps by
values; named types by unqualified name or a reader alias naming the writer's full name,
fixed types by size, enums by the writer's symbols (all must be in the reader unless the
reader has a default symbol); records field by field (a reader field found in the writer by
name or alias must read its type, one not found needs a default); a writer union branch by
branch, a reader union when any branch reads the writer. Each pair of types is checked once
(a recursive type ends there), so a named type used twice reports its incompatibilities at
the place it was first compared, as Avro does. Locations are JSON pointers into the reader
schema: ``/fields/1/type/symbols``.
"""

from __future__ import annotations

from schema_registry import avro_json
from schema_registry.avro_model import Array, AvroType, Enum, Field, Fixed, Map, Named, Record, Union

NAME_MISMATCH = "NAME_MISMATCH"
FIXED_SIZE_MISMATCH = "FIXED_SIZE_MISMATCH"
MISSING_ENUM_SYMBOLS = "MISSING_ENUM_SYMBOLS"
READER_FIELD_MISSING_DEFAULT_VALUE = "READER_FIELD_MISSING_DEFAULT_VALUE"
TYPE_MISMATCH = "TYPE_MISMATCH"
MISSING_UNION_BRANCH = "MISSING_UNION_BRANCH"

#: writer types each reader type reads besides its own (Avro's promotions)
_PROMOTIONS = {
    "long": ("int",),
    "float": ("int", "long"),
    "double": ("int", "long", "float"),
    "bytes": ("string",),
    "string": ("bytes",),
}


class Incompatibility:
    """One reason the reader cannot read the writer's data: ``SchemaCompatibility.Incompatibility``."""

    __slots__ = ("location", "message", "type")

    def __init__(self, type_: str, message: str, location: tuple[str, ...]) -> None:
        self.type = type_
        self.message = message
        #: the path from the root ("" first), as Avro's location deque
        self.location = location

    @property
    def path(self) -> str:
        """``getLocation()``: a JSON pointer, ``/`` for the root."""
        return "/" + "/".join(t.replace("~", "~0").replace("/", "~1") for t in self.location[1:])

    def describe(self) -> str:
        """Confluent's ``Difference.toString()``: ``{errorType:..., description:...,
        additionalInfo:...}``; the description has two ``%s`` (reader, then writer), which
        Confluent's validator fills with "new"/"old" (BACKWARD) or "old"/"new" (FORWARD)."""
        path, message = self.path, self.message
        if self.type == FIXED_SIZE_MISMATCH:
            description = (f"The size of FIXED type field at path '{path}' in the %s "
                           "schema does not match with the %s schema")
        elif self.type == TYPE_MISMATCH:
            description = f"The type (path '{path}') of a field in the %s schema does not match with the %s schema"
        elif self.type == NAME_MISMATCH:
            description = f"The name of the schema has changed (path '{path}')"
        elif self.type == MISSING_ENUM_SYMBOLS:
            description = f"The %s schema is missing enum symbols '{message}' at path '{path}' in the %s schema"
        elif self.type == MISSING_UNION_BRANCH:
            description = f"The %s schema is missing a type inside a union field at path '{path}' in the %s schema"
        elif self.type == READER_FIELD_MISSING_DEFAULT_VALUE:
            description = (f"The field '{message}' at path '{path}' in the %s schema has no default value and is "
                           "missing in the %s schema")
        else:
            description = ""
        return f"{{errorType:'{self.type}', description:'{description}', additionalInfo:'{message}'}}"

    def __repr__(self) -> str:
        return f"Incompatibility({self.type}, {self.path}, {self.message!r})"


class CheckError(Exception):
    """Avro's checker threw (a reader field whose name and aliases match several writer
    fields); Confluent answers "Unexpected exception during compatibility check: ..."."""


class _Result:
    __slots__ = ("items", "kind")

    def __init__(self, kind: str, items: tuple[Incompatibility, ...] = ()) -> None:
        #: "COMPATIBLE", "INCOMPATIBLE" or "RECURSION_IN_PROGRESS"
        self.kind = kind
        self.items = items

    def merged(self, other: _Result) -> _Result:
        kind = other.kind if self.kind == "COMPATIBLE" else "INCOMPATIBLE"
        return _Result(kind, self.items + other.items)


_COMPATIBLE = _Result("COMPATIBLE")
_IN_PROGRESS = _Result("RECURSION_IN_PROGRESS")


def incompatibilities(reader: AvroType, writer: AvroType) -> list[Incompatibility]:
    """Every incompatibility, in Avro's order (empty: the reader reads all the writer's data)."""
    return list(_Checker().compatibility(reader, writer).items)


def lookup_writer_field(writer: Record, reader_field: Field) -> Field | None:
    """``lookupWriterField``: the writer's field of the reader field's name or aliases."""
    found = [f for f in (writer.field(reader_field.name),) if f is not None]
    found += [f for a in reader_field.aliases or () if (f := writer.field(a)) is not None]
    if len(found) > 1:
        raise CheckError(f"Reader record field {reader_field} matches multiple fields in writer record schema {writer}")
    return found[0] if found else None


def names_equal(reader: Named, writer: Named) -> bool:
    """``schemaNameEquals``: the same unqualified name, or a reader alias is the writer's
    full name."""
    return reader.name == writer.name or writer.full_name in reader.alias_names()


class _Checker:
    """``ReaderWriterCompatibilityChecker``: results memoised per (reader, writer) object pair."""

    def __init__(self) -> None:
        self.memo: dict[tuple[int, int], _Result] = {}

    def compatibility(self, reader: AvroType, writer: AvroType) -> _Result:
        return self._get("", reader, writer, [])

    def _get(self, token: str, reader: AvroType, writer: AvroType, location: list[str]) -> _Result:
        location.append(token)
        key = (id(reader), id(writer))
        result = self.memo.get(key)
        if result is not None:
            if result.kind == "RECURSION_IN_PROGRESS":
                result = _COMPATIBLE
        else:
            self.memo[key] = _IN_PROGRESS
            result = self._calculate(reader, writer, location)
            self.memo[key] = result
        location.pop()
        return result

    @staticmethod
    def _incompatible(type_: str, message: str, location: list[str]) -> _Result:
        return _Result("INCOMPATIBLE", (Incompatibility(type_, message, tuple(location)),))

    def _type_mismatch(self, reader: AvroType, writer: AvroType, location: list[str]) -> _Result:
        message = f"reader type: {reader.type.upper()} not compatible with writer type: {writer.type.upper()}"
        return self._incompatible(TYPE_MISMATCH, message, location)

    def _calculate(self, reader: AvroType, writer: AvroType, location: list[str]) -> _Result:
        result = _COMPATIBLE
        if reader.type == writer.type:
            if isinstance(reader, Array) and isinstance(writer, Array):
                return result.merged(self._get("items", reader.items, writer.items, location))
            if isinstance(reader, Map) and isinstance(writer, Map):
                return result.merged(self._get("values", reader.values, writer.values, location))
            if isinstance(reader, Fixed) and isinstance(writer, Fixed):
                result = result.merged(self._names(reader, writer, location))
                return result.merged(self._fixed_size(reader, writer, location))
            if isinstance(reader, Enum) and isinstance(writer, Enum):
                result = result.merged(self._names(reader, writer, location))
                return result.merged(self._enum_symbols(reader, writer, location))
            if isinstance(reader, Record) and isinstance(writer, Record):
                result = result.merged(self._names(reader, writer, location))
                return result.merged(self._record_fields(reader, writer, location))
            if isinstance(reader, Union) and isinstance(writer, Union):
                for i, branch in enumerate(writer.types):
                    location.append(str(i))
                    if self.compatibility(reader, branch).kind == "INCOMPATIBLE":
                        message = f"reader union lacking writer type: {branch.type.upper()}"
                        result = result.merged(self._incompatible(MISSING_UNION_BRANCH, message, location))
                    location.pop()
            return result
        if isinstance(writer, Union):
            for i, branch in enumerate(writer.types):
                result = result.merged(self._get(str(i), reader, branch, location))
            return result
        if isinstance(reader, Union):
            for branch in reader.types:
                if self.compatibility(branch, writer).kind == "COMPATIBLE":
                    return result
            message = f"reader union lacking writer type: {writer.type.upper()}"
            return result.merged(self._incompatible(MISSING_UNION_BRANCH, message, location))
        if writer.type in _PROMOTIONS.get(reader.type, ()):
            return result
        return result.merged(self._type_mismatch(reader, writer, location))

    def _record_fields(self, reader: Record, writer: Record, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("fields")
        for reader_field in reader.fields:
            location.append(str(reader_field.pos))
            writer_field = lookup_writer_field(writer, reader_field)
            if writer_field is not None:
                result = result.merged(self._get("type", reader_field.schema, writer_field.schema, location))
            elif not reader_field.has_default:
                if isinstance(reader_field.schema, Enum) and reader_field.schema.default is not None:
                    # as Avro has it: the field's enum against the writer's record
                    result = result.merged(self._get("type", reader_field.schema, writer, location))
                else:
                    result = result.merged(
                        self._incompatible(READER_FIELD_MISSING_DEFAULT_VALUE, reader_field.name, location))
            location.pop()
        location.pop()
        return result

    def _enum_symbols(self, reader: Enum, writer: Enum, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("symbols")
        missing = avro_json.java_sorted(set(writer.symbols) - set(reader.symbols))
        if missing and not (reader.default is not None and reader.default in reader.symbols):
            result = self._incompatible(MISSING_ENUM_SYMBOLS, "[" + ", ".join(missing) + "]", location)
        location.pop()
        return result

    def _fixed_size(self, reader: Fixed, writer: Fixed, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("size")
        if reader.size != writer.size:
            result = self._incompatible(FIXED_SIZE_MISMATCH, f"expected: {writer.size}, found: {reader.size}", location)
        location.pop()
        return result

    def _names(self, reader: Named, writer: Named, location: list[str]) -> _Result:
        result = _COMPATIBLE
        location.append("name")
        if not names_equal(reader, writer):
            result = self._incompatible(NAME_MISMATCH, f"expected: {writer.full_name}", location)
        location.pop()
        return result
