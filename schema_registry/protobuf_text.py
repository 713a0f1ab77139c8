"""Reads .proto text into :mod:`.protobuf_model` elements, as Confluent's provider does with
Square Wire's ``ProtoParser``.

The grammar is proto-schema-parser's (Buf's ANTLR grammar for proto2, proto3 and editions);
its lexer and parser give the parse tree, read here rather than through the library's own
AST, which drops what Confluent keeps: an option's literal as written (``0x1F`` is not the
string ``"0x1F"``), concatenated string literals, ``(a).(b)`` option names. Comments are
set aside before parsing, so they may stand anywhere whitespace may.

On top of the grammar, the rules Wire's parser enforces (Confluent refuses what it refuses):
a field has a label unless the file is proto3 (or it is a map), ``required`` is not proto3,
two top-level types or services do not share a name, ``edition`` is not read. Pure.
"""

from __future__ import annotations

from typing import Any

from antlr4 import CommonTokenStream, InputStream, Token
from antlr4.error.ErrorListener import ErrorListener
from antlr4.Token import CommonToken
from proto_schema_parser.antlr.ProtobufLexer import ProtobufLexer
from proto_schema_parser.antlr.ProtobufParser import ProtobufParser

from .protobuf_model import (
    BOOLEAN,
    ENUM,
    LIST,
    MAP,
    MAX_TAG_VALUE,
    NUMBER,
    OPTION,
    STRING,
    Enum,
    EnumConstant,
    Extend,
    Extensions,
    Field,
    Group,
    Message,
    OneOf,
    Option,
    Primitive,
    ProtoFile,
    RangeValue,
    Reserved,
    Rpc,
    Service,
)
from .schema_types import InvalidSchemaError

P = ProtobufParser
_COMMENTS = (ProtobufLexer.LINE_COMMENT, ProtobufLexer.BLOCK_COMMENT)
_SUFFIXED = (ProtobufLexer.INVALID_INT_LITERAL, ProtobufLexer.INVALID_FLOAT_LITERAL)
#: the key a list-valued option is wrapped under while parsing (see _wrap_list_values)
_LIST_KEY = "__krait_option_list__"
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


class _RaiseOnError(ErrorListener):
    def syntaxError(self, recognizer, offendingSymbol, line, column, msg, e):
        raise InvalidSchemaError(f"Syntax error at line {line}, column {column + 1}: {msg}")


def parse_proto(text: str) -> ProtoFile:
    """The elements of a .proto file; InvalidSchemaError when the text is not one Confluent
    reads."""
    lexer = ProtobufLexer(InputStream(text))
    lexer.removeErrorListeners()
    lexer.addErrorListener(_RaiseOnError())
    tokens = CommonTokenStream(lexer)
    tokens.fill()
    for token in tokens.tokens:
        if token.type in _COMMENTS:
            token.channel = Token.HIDDEN_CHANNEL
        elif token.type in _SUFFIXED and token.text[-1:] in ("f", "F") and token.text[0].isdigit():
            token.type = ProtobufLexer.FLOAT_LITERAL  # text format's 1.5f, which Wire reads as a number
    _wrap_list_values(tokens)
    tokens.seek(0)  # the stream settled on its first token before the comments were set aside
    parser = ProtobufParser(tokens)
    parser.removeErrorListeners()
    parser.addErrorListener(_RaiseOnError())
    tree = parser.file_()
    return _Reader().file(tree)


def _wrap_list_values(stream: CommonTokenStream) -> None:
    """Wire reads an option set to a list (``option (a).tags = ["x", "y"];``, and Confluent
    prints such options so); the grammar takes lists only inside ``{...}``. ``= [`` occurs
    nowhere else, so each such list is wrapped as ``= {<_LIST_KEY>: [...]}`` here and read
    back as a list by :meth:`_Reader.option`."""
    visible = [t for t in stream.tokens if t.channel == Token.DEFAULT_CHANNEL]
    wraps: list[tuple[Token, Token]] = []
    for i in range(len(visible) - 1):
        if visible[i].type == ProtobufLexer.EQUALS and visible[i + 1].type == ProtobufLexer.L_BRACKET:
            depth = 0
            for closing in visible[i + 1:]:
                depth += {ProtobufLexer.L_BRACKET: 1, ProtobufLexer.R_BRACKET: -1}.get(closing.type, 0)
                if depth == 0:
                    wraps.append((visible[i + 1], closing))
                    break
    if not wraps:
        return
    before = {id(opening): opening for opening, _ in wraps}
    after = {id(closing): closing for _, closing in wraps}
    rebuilt: list[Token] = []
    for token in stream.tokens:
        if id(token) in before:
            rebuilt += [_token(ProtobufLexer.L_BRACE, "{", token), _token(ProtobufLexer.IDENTIFIER, _LIST_KEY, token),
                        _token(ProtobufLexer.COLON, ":", token)]
        rebuilt.append(token)
        if id(token) in after:
            rebuilt.append(_token(ProtobufLexer.R_BRACE, "}", token))
    for index, token in enumerate(rebuilt):
        token.tokenIndex = index
    stream.tokens = rebuilt


def _token(kind: int, text: str, at: Token) -> CommonToken:
    token = CommonToken(type=kind)
    token.text, token.line, token.column = text, at.line, at.column
    return token


# --- literals, as Wire's SyntaxReader reads them --------------------------------------------

def decode_string(ctx: Any) -> str:
    """A string literal (adjacent ones concatenated) with Wire's escapes: ``\\a \\b \\f \\n \\r
    \\t \\v``, ``\\xHH``, octal ``\\NNN``; any other escaped character stands for itself."""
    return "".join(_unescape(t.getText()[1:-1]) for t in ctx.STRING_LITERAL())


def _unescape(body: str) -> str:
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        c = body[i]
        i += 1
        if c != "\\" or i >= n:
            out.append(c)
            continue
        c = body[i]
        i += 1
        if c in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[c])
        elif c in "xX":
            digits = ""
            while i < n and len(digits) < 2 and body[i] in "0123456789abcdefABCDEF":
                digits += body[i]
                i += 1
            if not digits:
                raise InvalidSchemaError("Syntax error: expected a digit after \\x or \\X")
            out.append(chr(int(digits, 16)))
        elif c in "01234567":
            digits = c
            while i < n and len(digits) < 3 and body[i] in "01234567":
                digits += body[i]
                i += 1
            out.append(chr(int(digits, 8)))
        else:
            out.append(c)
    return "".join(out)


def read_int(text: str) -> int:
    """Wire's ``readInt``: decimal, or hexadecimal after ``0x``; a 32-bit int."""
    try:
        value = int(text[2:], 16) if text[:2] in ("0x", "0X") else int(text, 10)
    except ValueError:
        value = None
    if value is None or not -(2**31) <= value < 2**31:
        raise InvalidSchemaError(f"Syntax error: expected an integer but was {text}")
    return value


def _range_end(ctx: Any, number: Any) -> int:
    return MAX_TAG_VALUE if ctx.MAX() is not None else read_int(number.getText())


def _option_name(text: str) -> tuple[str, bool, list[str]]:
    """(name, parenthesized, sub-names) of an option name as written, e.g. ``(a.b).c.(d)``
    -> ("a.b", True, ["c", "(d)"]); Wire reads an unparenthesized dotted name as one name."""
    parts: list[str] = []
    depth, start = 0, 0
    for i, c in enumerate(text):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "." and depth == 0 and i > start:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    if not parts[0].startswith("("):
        if "(" in text:
            raise InvalidSchemaError(f"Syntax error: expected '=' in option {text}")
        return text, False, []
    return parts[0][1:-1], True, parts[1:]


# --- the parse tree -> elements -------------------------------------------------------------

class _Reader:
    def __init__(self) -> None:
        self.syntax: str | None = None

    def file(self, ctx: Any) -> ProtoFile:
        proto = ProtoFile()
        if ctx.editionDecl() is not None:
            raise InvalidSchemaError("Syntax error: edition is not currently supported")
        if ctx.syntaxDecl() is not None:
            syntax = decode_string(ctx.syntaxDecl().syntaxLevel().stringLiteral())
            if syntax not in ("proto2", "proto3"):
                raise InvalidSchemaError(f"Syntax error: unexpected syntax: {syntax}")
            self.syntax = proto.syntax = syntax
        package_seen = False
        for element in ctx.fileElement():
            child = element.getChild(0)
            if isinstance(child, P.ImportDeclContext):
                path = decode_string(child.importedFileName().stringLiteral())
                target = (proto.public_imports if child.PUBLIC() is not None
                          else proto.weak_imports if child.WEAK() is not None else proto.imports)
                target.append(path)
            elif isinstance(child, P.PackageDeclContext):
                if package_seen:
                    raise InvalidSchemaError("Syntax error: too many package declarations")
                package_seen = True
                proto.package = child.packageName().getText()
            elif isinstance(child, P.OptionDeclContext):
                proto.options.append(self.option(child))
            elif isinstance(child, (P.MessageDeclContext, P.EnumDeclContext)):
                declared = self.message(child) if isinstance(child, P.MessageDeclContext) else self.enum(child)
                if any(t.name == declared.name for t in proto.types):
                    raise InvalidSchemaError(f"{declared.name} is already defined")
                proto.types.append(declared)
            elif isinstance(child, P.ExtensionDeclContext):
                proto.extends.append(self.extend(child))
            elif isinstance(child, P.ServiceDeclContext):
                service = self.service(child)
                if any(s.name == service.name for s in proto.services):
                    raise InvalidSchemaError(f"{service.name} is already defined")
                proto.services.append(service)
        return proto

    # --- messages ---------------------------------------------------------------------------
    def message(self, ctx: Any) -> Message:
        message = Message(ctx.messageName().getText())
        for element in ctx.messageElement():
            child = element.getChild(0)
            if isinstance(child, (P.MessageFieldDeclContext, P.MapFieldDeclContext)):
                message.fields.append(self.field(child))
            elif isinstance(child, P.GroupDeclContext):
                message.groups.append(self.group(child))
            elif isinstance(child, P.OneofDeclContext):
                message.oneofs.append(self.oneof(child))
            elif isinstance(child, P.OptionDeclContext):
                message.options.append(self.option(child))
            elif isinstance(child, P.ExtensionRangeDeclContext):
                options = self.compact_options(child.compactOptions())
                message.extensions.append(Extensions(self.tag_ranges(child.tagRanges()), options))
            elif isinstance(child, P.MessageReservedDeclContext):
                message.reserveds.append(self.reserved(child.tagRanges(), child.names()))
            elif isinstance(child, P.MessageDeclContext):
                message.nested.append(self.message(child))
            elif isinstance(child, P.EnumDeclContext):
                message.nested.append(self.enum(child))
            elif isinstance(child, P.ExtensionDeclContext):
                message.extends.append(self.extend(child))
        return message

    def field(self, ctx: Any) -> Field:
        """A message's or an extension's field (``map<K, V>`` ones too)."""
        if isinstance(ctx, P.MapFieldDeclContext):
            map_type = ctx.mapType()
            label, type_name = None, f"map<{map_type.mapKeyType().getText()}, {map_type.typeName().getText()}>"
        else:
            with_label = ctx.fieldDeclWithCardinality()
            if with_label is not None:
                ctx = with_label
                label = ctx.fieldCardinality().getText()
                type_name = ctx.fieldDeclTypeName().getText()
            else:
                label = None
                type_ctx = (ctx.messageFieldDeclTypeName() if isinstance(ctx, P.MessageFieldDeclContext)
                            else ctx.extensionFieldDeclTypeName())
                type_name = type_ctx.getText()
            self.check_label(label, type_name)
        return self.field_rest(ctx, label, type_name)

    def check_label(self, label: str | None, type_name: str) -> None:
        if label == "required" and self.syntax == "proto3":
            raise InvalidSchemaError("Syntax error: 'required' label forbidden in proto3 field declarations")
        if label is None and self.syntax != "proto3":
            raise InvalidSchemaError(f"Syntax error: unexpected label: {type_name}")

    def field_rest(self, ctx: Any, label: str | None, type_name: str) -> Field:
        options = self.compact_options(ctx.compactOptions())
        default = _strip_value("default", options)
        json_name = _strip_value("json_name", options)
        return Field(label, type_name, ctx.fieldName().getText(), read_int(ctx.fieldNumber().getText()),
                     default, json_name, options)

    def group(self, ctx: Any, in_oneof: bool = False) -> Group:
        label = None if in_oneof or ctx.fieldCardinality() is None else ctx.fieldCardinality().getText()
        if ctx.compactOptions() is not None:
            raise InvalidSchemaError("Syntax error: expected '{' after a group's number")
        group = Group(label, ctx.fieldName().getText(), read_int(ctx.fieldNumber().getText()))
        for element in ctx.messageElement():
            child = element.getChild(0)
            if isinstance(child, (P.MessageFieldDeclContext, P.MapFieldDeclContext)):
                group.fields.append(self.field(child))
            elif not isinstance(child, P.EmptyDeclContext):
                raise InvalidSchemaError(f"Syntax error: expected field declaration in group {group.name}")
        return group

    def oneof(self, ctx: Any) -> OneOf:
        oneof = OneOf(ctx.oneofName().getText())
        for element in ctx.oneofElement():
            child = element.getChild(0)
            if isinstance(child, P.OptionDeclContext):
                oneof.options.append(self.option(child))
            elif isinstance(child, P.OneofFieldDeclContext):
                oneof.fields.append(self.field_rest(child, None, child.oneofFieldDeclTypeName().getText()))
            elif isinstance(child, P.OneofGroupDeclContext):
                oneof.groups.append(self.group(child, in_oneof=True))
        return oneof

    def tag_ranges(self, ctx: Any) -> list[RangeValue]:
        values: list[RangeValue] = []
        for tag_range in ctx.tagRange():
            start = read_int(tag_range.tagRangeStart().fieldNumber().getText())
            end = tag_range.tagRangeEnd()
            values.append(start if end is None else (start, _range_end(end, end.fieldNumber())))
        return values

    def reserved(self, ranges: Any, names: Any) -> Reserved:
        if ranges is not None:
            if isinstance(ranges, P.TagRangesContext):
                return Reserved(self.tag_ranges(ranges))
            values: list[RangeValue] = []
            for value_range in ranges.enumValueRange():
                start = read_int(value_range.enumValueRangeStart().enumValueNumber().getText())
                end = value_range.enumValueRangeEnd()
                values.append(start if end is None else (start, _range_end(end, end.enumValueNumber())))
            return Reserved(values)
        return Reserved([decode_string(name) for name in names.stringLiteral()])

    # --- enums, extends, services -----------------------------------------------------------
    def enum(self, ctx: Any) -> Enum:
        enum = Enum(ctx.enumName().getText())
        for element in ctx.enumElement():
            child = element.getChild(0)
            if isinstance(child, P.OptionDeclContext):
                enum.options.append(self.option(child))
            elif isinstance(child, P.EnumValueDeclContext):
                enum.constants.append(EnumConstant(child.enumValueName().getText(),
                                                   read_int(child.enumValueNumber().getText()),
                                                   self.compact_options(child.compactOptions())))
            elif isinstance(child, P.EnumReservedDeclContext):
                enum.reserveds.append(self.reserved(child.enumValueRanges(), child.names()))
        return enum

    def extend(self, ctx: Any) -> Extend:
        extend = Extend(ctx.extendedMessage().getText())
        for element in ctx.extensionElement():
            child = element.getChild(0)
            if isinstance(child, P.ExtensionFieldDeclContext):  # Wire drops an extension's groups
                extend.fields.append(self.field(child))
        return extend

    def service(self, ctx: Any) -> Service:
        service = Service(ctx.serviceName().getText())
        for element in ctx.serviceElement():
            child = element.getChild(0)
            if isinstance(child, P.OptionDeclContext):
                service.options.append(self.option(child))
            elif isinstance(child, P.MethodDeclContext):
                request = child.inputType().messageType()
                response = child.outputType().messageType()
                rpc = Rpc(child.methodName().getText(), request.methodDeclTypeName().getText(),
                          response.methodDeclTypeName().getText(), request.STREAM() is not None,
                          response.STREAM() is not None)
                rpc.options = [self.option(m.optionDecl()) for m in child.methodElement()
                               if m.optionDecl() is not None]
                service.rpcs.append(rpc)
        return service

    # --- options ----------------------------------------------------------------------------
    def compact_options(self, ctx: Any) -> list[Option]:
        if ctx is None:
            return []
        return [self.option(option) for option in ctx.compactOption()]

    def option(self, ctx: Any) -> Option:
        name, parenthesized, sub_names = _option_name(ctx.optionName().getText())
        value_ctx = ctx.optionValue()
        if value_ctx.scalarValue() is not None:
            kind, value = _scalar(value_ctx.scalarValue())
        else:
            kind, value = MAP, self.text_format(value_ctx.messageLiteralWithBraces().messageTextFormat())
            if list(value) == [_LIST_KEY]:
                kind, value = LIST, value[_LIST_KEY]
        for sub_name in reversed(sub_names):
            sub_parenthesized = sub_name.startswith("(")
            value = Option(sub_name[1:-1] if sub_parenthesized else sub_name, kind, value, sub_parenthesized)
            kind = OPTION
        return Option(name, kind, value, parenthesized)

    def text_format(self, ctx: Any) -> dict[str, Any]:
        """A message literal as Wire's OptionReader.readMap makes it: a key set twice collects
        its values into a list."""
        result: dict[str, Any] = {}
        for entry in ctx.messageLiteralField():
            name_ctx = entry.messageLiteralFieldName()
            special = name_ctx.specialFieldName()
            name = f"[{special.getText()}]" if special is not None else name_ctx.fieldName().getText()
            if entry.value() is not None:
                value = self.value(entry.value())
            else:
                message_value = entry.messageValue()
                if message_value.messageLiteral() is not None:
                    value = self.message_literal(message_value.messageLiteral())
                else:
                    value = [self.message_literal(m) for m in message_value.listOfMessagesLiteral().messageLiteral()]
            previous = result.get(name)
            if name not in result:
                result[name] = value
            elif isinstance(previous, list):
                previous.extend(value) if isinstance(value, list) else previous.append(value)
            else:
                result[name] = [previous, *value] if isinstance(value, list) else [previous, value]
        return result

    def message_literal(self, ctx: Any) -> dict[str, Any]:
        if ctx.messageLiteralWithBraces() is None:
            raise InvalidSchemaError("Syntax error: expected '{' (Confluent's parser does not read '<...>' "
                                     "message literals)")
        return self.text_format(ctx.messageLiteralWithBraces().messageTextFormat())

    def value(self, ctx: Any) -> Any:
        if ctx.scalarValue() is not None:
            return _wrapped(*_scalar(ctx.scalarValue()))
        if ctx.messageLiteral() is not None:
            return self.message_literal(ctx.messageLiteral())
        items: list[Any] = []
        for element in ctx.listLiteral().listElement():
            if element.scalarValue() is not None:
                items.append(_wrapped(*_scalar(element.scalarValue())))
            else:
                items.append(self.message_literal(element.messageLiteral()))
        return items


def _scalar(ctx: Any) -> tuple[str, str]:
    """(kind, value) of a scalar option value, as Wire's readKindAndValue: a number keeps its
    text; ``inf`` and ``nan`` alone are ENUM words, ``-inf`` a NUMBER."""
    if ctx.stringLiteral() is not None:
        return STRING, decode_string(ctx.stringLiteral())
    if ctx.intLiteral() is not None or ctx.floatLiteral() is not None:
        return NUMBER, ctx.getText()
    if ctx.specialFloatLiteral() is not None:
        special = ctx.specialFloatLiteral()
        return (NUMBER if special.MINUS() is not None else ENUM), special.getText()
    word = ctx.getText()
    return (BOOLEAN if word in ("true", "false") else ENUM), word


def _wrapped(kind: str, value: str) -> Any:
    """A scalar inside a message literal or list: Wire keeps strings bare and wraps the rest."""
    return value if kind == STRING else Primitive(kind, value)


def _strip_value(name: str, options: list[Option]) -> str | None:
    """Wire's stripValue: ``default`` and ``json_name`` are not options; the last one wins."""
    result = None
    for option in [o for o in options if o.name == name]:
        options.remove(option)
        result = option.value if isinstance(option.value, str) else str(option.value)
    return result

