"""Confluent's compatibility levels and the check a new schema passes against a subject's
earlier versions (``CompatibilityChecker``): BACKWARD asks whether the new schema reads data
written with the earlier ones, FORWARD whether the earlier ones read the new one's data,
FULL both; the ``_TRANSITIVE`` levels check every earlier live version, the others only the
latest; NONE checks nothing. What "can read" means is each schema type's own rule
(:meth:`ParsedSchema.is_backward_compatible`). Pure."""

from __future__ import annotations

from collections.abc import Sequence

from .schema_types import ParsedSchema

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"


def is_level(value: object) -> bool:
    return isinstance(value, str) and value.upper() in LEVELS


def check(level: str, new: ParsedSchema, previous: Sequence[tuple[int, ParsedSchema, str]]) -> list[str]:
    """Confluent's messages for why ``new`` may not follow ``previous`` ((version, parsed,
    schema text), oldest first) under ``level``; empty when it may. The messages end, as
    Confluent's do, with the version and text of the schema it failed against and the
    level."""
    level = level.upper()
    if level == "NONE" or not previous:
        return []
    targets = list(previous) if level.endswith("_TRANSITIVE") else [previous[-1]]
    base = level.removesuffix("_TRANSITIVE")
    for version, old, text in reversed(targets):  # the latest first, as Confluent checks
        errors: list[str] = []
        if base in ("BACKWARD", "FULL"):
            errors += new.is_backward_compatible(old)
        if base in ("FORWARD", "FULL"):
            errors += old.is_backward_compatible(new, reader="old", writer="new")
        if errors:
            return [*errors, f"{{oldSchemaVersion: {version}}}", f"{{oldSchema: '{text}'}}",
                    f"{{validateFields: 'false', compatibility: '{level}'}}"]
    return []


def incompatible_message(subject: str, messages: list[str]) -> str:
    """The 409 answer's message, as Confluent words it."""
    return (f"Schema being registered is incompatible with an earlier schema for subject \"{subject}\", "
            f"details: [{', '.join(messages)}]")
