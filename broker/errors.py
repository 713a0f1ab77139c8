"""The broker's one exception type: a Kafka error code with an optional message, raised
where a request (or one partition or topic of it) fails, and turned into that error code
in the response. The group coordinator maps it through its ``error_code`` attribute."""

from __future__ import annotations

from protocol.errors import ErrorCode


class ApiError(Exception):
    def __init__(self, error_code: ErrorCode, message: str | None = None):
        super().__init__(message or error_code.name)
        self.error_code = error_code
        self.message = message
