"""``krait schemas``: the Schema Registry from the command line, over its REST API (any
Confluent-compatible registry, Krait's built-in one by default at http://127.0.0.1:8081):

    krait schemas list [--deleted] [--prefix P]          subjects and their versions
    krait schemas show SUBJECT [--version V] | --id N    a version (or a schema by id)
    krait schemas register SUBJECT FILE [--type T] [--reference NAME=SUBJECT:VERSION ...] [--normalize]
    krait schemas check SUBJECT FILE [--version V] [--type T]   compatibility (exit 1: incompatible)
    krait schemas delete SUBJECT [--version V] [--permanent]
    krait schemas config [SUBJECT] [--set LEVEL]

``--registry URL`` (or ``$SCHEMA_REGISTRY_URL``), ``--user USER:PASSWORD`` for basic auth,
``--ca FILE`` to verify an https registry. Errors print the registry's code and message
on one line and exit 1.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, TextIO

from .command import CommandError, Parser, run

__all__ = ["RegistryClient", "main"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
DEFAULT_URL = "http://127.0.0.1:8081"


class RegistryClient:
    """The REST calls the command makes; CommandError with the registry's message on an error."""

    def __init__(self, url: str, user: str | None = None, ca: str | None = None, timeout: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self.user = user
        self.timeout = timeout
        self.context = ssl.create_default_context(cafile=ca) if ca else None

    def call(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", CONTENT_TYPE)
        if self.user:
            req.add_header("Authorization", "Basic " + base64.b64encode(self.user.encode()).decode())
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                payload = resp.read()
        except urllib.error.HTTPError as err:
            payload = err.read()
            try:
                doc = json.loads(payload)
                message = f"{doc['error_code']}: {doc['message']}"
            except (ValueError, KeyError, TypeError):
                message = f"HTTP {err.code}: {payload[:200].decode(errors='replace')}"
            # one line, whatever the answer holds (a 42201 quotes the schema as submitted)
            raise CommandError(" ".join(message.split())) from None
        except (urllib.error.URLError, OSError) as exc:
            raise CommandError(f"cannot reach the schema registry at {self.url}: "
                               f"{getattr(exc, 'reason', exc)}") from None
        try:
            return json.loads(payload)
        except ValueError:
            return payload.decode(errors="replace")


def _build() -> argparse.ArgumentParser:
    p = Parser(prog="krait schemas", description="Schema Registry subjects, versions and compatibility")
    p.add_argument("--registry", default=os.environ.get("SCHEMA_REGISTRY_URL", DEFAULT_URL),
                   help=f"the registry's URL (default $SCHEMA_REGISTRY_URL or {DEFAULT_URL})")
    p.add_argument("--user", help="USER:PASSWORD for basic auth")
    p.add_argument("--ca", help="CA certificate (PEM) to verify an https registry")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    ls = sub.add_parser("list", help="subjects and their versions")
    ls.add_argument("--deleted", action="store_true", help="include soft-deleted subjects and versions")
    ls.add_argument("--prefix", help="only subjects starting with this")
    show = sub.add_parser("show", help="one version of a subject, or a schema by id")
    show.add_argument("subject", nargs="?")
    show.add_argument("--version", default="latest")
    show.add_argument("--id", type=int)
    for name, help_ in (("register", "register a schema from a file"),
                        ("check", "test a schema file's compatibility with a subject")):
        c = sub.add_parser(name, help=help_)
        c.add_argument("subject")
        c.add_argument("file")
        c.add_argument("--type", default=None, help="AVRO, JSON or PROTOBUF (default: from the file's suffix: "
                                                    ".avsc AVRO, .json JSON, .proto PROTOBUF)")
        c.add_argument("--reference", action="append", default=[], metavar="NAME=SUBJECT:VERSION")
        c.add_argument("--normalize", action="store_true")
        if name == "check":
            c.add_argument("--version", help="check against this version only (default: as the level says)")
    d = sub.add_parser("delete", help="delete a subject or one version (soft; --permanent after a soft delete)")
    d.add_argument("subject")
    d.add_argument("--version")
    d.add_argument("--permanent", action="store_true")
    cfg = sub.add_parser("config", help="show or set the compatibility level (global, or of a subject)")
    cfg.add_argument("subject", nargs="?")
    cfg.add_argument("--set", metavar="LEVEL", help="NONE, BACKWARD, FORWARD, FULL (and their _TRANSITIVE)")
    return p


def _schema_request(args: argparse.Namespace) -> dict:
    path = Path(args.file)
    try:
        text = path.read_text()
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    schema_type = (args.type or {".proto": "PROTOBUF", ".json": "JSON"}.get(path.suffix, "AVRO")).upper()
    body: dict[str, Any] = {"schema": text}
    if schema_type != "AVRO":
        body["schemaType"] = schema_type
    refs = []
    for ref in args.reference:
        name, eq, rest = ref.partition("=")
        subject, colon, version = rest.rpartition(":")
        if not eq or not colon or not version.lstrip("-").isdigit():
            raise CommandError(f"bad --reference {ref!r}: expected NAME=SUBJECT:VERSION")
        refs.append({"name": name, "subject": subject, "version": int(version)})
    if refs:
        body["references"] = refs
    return body


def _q(subject: str) -> str:
    return urllib.request.quote(subject, safe="")


def _body(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    c = RegistryClient(args.registry, args.user, args.ca)
    deleted = "?deleted=true" if getattr(args, "deleted", False) else ""
    if args.command == "list":
        subjects = c.call("GET", "/subjects" + deleted + (("&" if deleted else "?") + "subjectPrefix="
                                                          + urllib.request.quote(args.prefix) if args.prefix else ""))
        width = max((len(s) for s in subjects), default=7)
        print(f"{'SUBJECT':<{width}}  VERSIONS", file=out)
        for s in subjects:
            versions = c.call("GET", f"/subjects/{_q(s)}/versions{deleted}")
            print(f"{s:<{width}}  {','.join(map(str, versions))}", file=out)
        return 0
    if args.command == "show":
        if args.id is not None:
            doc = c.call("GET", f"/schemas/ids/{args.id}")
        elif args.subject:
            doc = c.call("GET", f"/subjects/{_q(args.subject)}/versions/{args.version}")
        else:
            raise CommandError("show needs a SUBJECT or --id")
        print(json.dumps(doc, indent=2), file=out)
        return 0
    if args.command == "register":
        norm = "?normalize=true" if args.normalize else ""
        doc = c.call("POST", f"/subjects/{_q(args.subject)}/versions{norm}", _schema_request(args))
        version = c.call("POST", f"/subjects/{_q(args.subject)}{norm}", _schema_request(args))["version"]
        print(f"Registered {args.subject} version {version} with id {doc['id']}", file=out)
        return 0
    if args.command == "check":
        path = f"/compatibility/subjects/{_q(args.subject)}/versions"
        if args.version:
            path += f"/{args.version}"
        doc = c.call("POST", path + "?verbose=true" + ("&normalize=true" if args.normalize else ""),
                     _schema_request(args))
        if doc.get("is_compatible"):
            print(f"Compatible with {args.subject}", file=out)
            return 0
        print(f"Incompatible with {args.subject}:", file=out)
        for message in doc.get("messages", []):
            print(f"  {message}", file=out)
        return 1
    if args.command == "delete":
        perm = "?permanent=true" if args.permanent else ""
        if args.version:
            v = c.call("DELETE", f"/subjects/{_q(args.subject)}/versions/{args.version}{perm}")
            print(f"Deleted {args.subject} version {v}{' permanently' if args.permanent else ''}", file=out)
        else:
            vs = c.call("DELETE", f"/subjects/{_q(args.subject)}{perm}")
            print(f"Deleted {args.subject} versions {','.join(map(str, vs))}"
                  f"{' permanently' if args.permanent else ''}", file=out)
        return 0
    # config
    path = "/config" + (f"/{_q(args.subject)}" if args.subject else "")
    if args.set:
        c.call("PUT", path, {"compatibility": args.set.upper()})
    doc = c.call("GET", path + ("?defaultToGlobal=true" if args.subject else ""))
    print(f"{args.subject or '(global)'}: {doc['compatibilityLevel']}", file=out)
    return 0


def main(argv: list[str], out: TextIO | None = None, err: TextIO | None = None) -> int:
    return run("krait schemas", "Error: ", _build, _body, argv, out, err)
