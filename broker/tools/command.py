"""What the admin commands (``krait topics``, ``krait groups``, ``krait log-dirs``,
``krait acls``, ``krait configs``) share: argument errors, one-line error output, exit
codes and the admin connection (secured by ``--command-config`` where a command has it).

A command prints one line on stderr for an error and exits 1, never a traceback: Kafka
errors as ``NAME: message`` (:func:`protocol.client_errors.describe`), after the prefix its
Kafka counterpart uses (``Error while executing topic command : ``, ``Error: ``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TextIO

from protocol.client_errors import describe
from protocol.errors import KafkaError

from ..security.client_security import ClientSecurity
from .admin_client import AdminClient

__all__ = ["CommandError", "Parser", "UsageError", "client_security", "connect_admin", "run"]


class UsageError(Exception):
    """Bad command-line arguments (exit 1 with the message and a usage hint)."""


class CommandError(Exception):
    """A refused command (exit 1 with the message)."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose errors go through :func:`run` (argparse would exit 2)."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def run(prog: str, prefix: str, build: Callable[[], argparse.ArgumentParser],
        body: Callable[[argparse.Namespace, TextIO, TextIO], int], argv: list[str],
        out: TextIO | None = None, err: TextIO | None = None) -> int:
    """Parse ``argv`` with ``build()``, run ``body``, turn errors into one line; the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    parser = build()
    try:
        args = parser.parse_args(argv)
        return body(args, out, err)
    except UsageError as exc:
        print(f"{prefix}{exc}", file=err)
        print(f"(run {prog} --help for usage)", file=err)
        return 1
    except (KafkaError, CommandError) as exc:
        print(f"{prefix}{describe(exc)}", file=err)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. piped into head: stop quietly
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return 1


def client_security(args: argparse.Namespace) -> ClientSecurity | None:
    """The security settings of a command's ``--command-config`` (Kafka client properties:
    security.protocol, ssl.*, sasl.*), None without one."""
    path = getattr(args, "command_config", None)
    return ClientSecurity.from_file(path) if path else None


def connect_admin(args: argparse.Namespace) -> AdminClient:
    """The admin client for a command's ``--bootstrap-server``, ``--timeout`` and (when the
    command has it) ``--command-config``."""
    return AdminClient(args.bootstrap_server, timeout=getattr(args, "timeout", 30.0), security=client_security(args))
