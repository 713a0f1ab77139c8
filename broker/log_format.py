"""The broker's log line formats (``krait.log.format``): ``text`` (the default,
``[time] LEVEL logger: message``) or ``json``: one JSON object a line with ``ts`` (ISO 8601,
UTC, milliseconds), ``level``, ``logger``, ``message`` and, when a record carries one,
``exception`` (the formatted traceback)."""

from __future__ import annotations

import datetime
import json
import logging

TEXT_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = record.stack_info
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(fmt: str, level: str | int = "INFO") -> None:
    """Log to stderr as ``fmt`` (text or json) at ``level``, replacing the root logger's handlers."""
    if fmt not in ("text", "json"):
        raise ValueError(f"Invalid value {fmt} for configuration krait.log.format: must be text or json")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT_FORMAT))
    logging.basicConfig(level=level, handlers=[handler], force=True)
