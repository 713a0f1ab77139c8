"""The Iceberg catalog the tables live in, and the name of a topic's table.

- embedded (the default, nothing to set up): pyiceberg's SQL catalog in the SQLite file
  ``<first log dir>/krait-iceberg/catalog.db``, the warehouse
  ``<first log dir>/krait-iceberg/warehouse``;
- ``catalog_uri`` a SQLAlchemy URL (``postgresql+psycopg2://user:pw@host/db``,
  ``sqlite:////path/catalog.db``): the SQL catalog in that database, shared by a cluster;
- ``catalog_uri`` ``http(s)://...``: an Iceberg REST catalog.

``warehouse`` overrides the warehouse: a local or mounted path, or a URI that passes
through to pyiceberg/pyarrow (``s3://bucket/prefix``, ``file:///...``).

S3 is configured as any AWS client is, from the environment: pyarrow's S3 filesystem takes
its credentials from ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` (or ``~/.aws``) by
itself, but pyiceberg's FileIO reads the endpoint and the region only from the catalog's
properties (``s3.endpoint``, ``s3.region``) and, without ``s3.region``, asks AWS for the
bucket's region (a request to amazonaws.com even when the endpoint is another store). So
:func:`s3_properties_from_env` fills those two from ``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL`` and ``AWS_REGION`` / ``AWS_DEFAULT_REGION`` where ``properties`` do not
set them (tests/tables/test_s3_warehouse.py runs a broker on moto's S3 that way).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping

from pyiceberg.catalog import Catalog
from pyiceberg.catalog.rest import RestCatalog
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError

__all__ = ["CATALOG_NAME", "DEFAULT_NAMESPACE", "EMBEDDED_DIR", "embedded_paths", "ensure_namespace", "open_catalog",
           "s3_properties_from_env", "table_identifier", "table_name"]

CATALOG_NAME = "krait"
DEFAULT_NAMESPACE = "krait"
#: the directory under the first log dir that holds the embedded catalog and warehouse
EMBEDDED_DIR = "krait-iceberg"
_NAME_OK = re.compile(r"^[A-Za-z0-9_\-~]+$")


def embedded_paths(first_log_dir: str) -> tuple[str, str]:
    """(catalog file, warehouse directory) of the embedded default under a log dir."""
    root = os.path.join(os.path.abspath(first_log_dir), EMBEDDED_DIR)
    return os.path.join(root, "catalog.db"), os.path.join(root, "warehouse")


def _warehouse_uri(warehouse: str) -> str:
    if "://" in warehouse:
        return warehouse
    path = os.path.abspath(warehouse)
    os.makedirs(path, exist_ok=True)
    return "file://" + path


#: pyiceberg's S3 property -> the standard AWS environment variables that give it, first set wins
_S3_ENV = {"s3.endpoint": ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
           "s3.region": ("AWS_REGION", "AWS_DEFAULT_REGION")}


def s3_properties_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``s3.endpoint`` and ``s3.region`` from the AWS environment variables that are set
    (see the module doc: pyiceberg's FileIO does not read them itself)."""
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    for prop, names in _S3_ENV.items():
        value = next((env[n] for n in names if env.get(n)), None)
        if value is not None:
            out[prop] = value
    return out


def open_catalog(first_log_dir: str | None = None, *, catalog_uri: str | None = None, warehouse: str | None = None,
                 name: str = CATALOG_NAME, properties: Mapping[str, str] | None = None) -> Catalog:
    """The catalog (see the module doc). ``first_log_dir`` is needed where the embedded
    catalog or warehouse is used; ``properties`` go to pyiceberg as they are (REST
    credentials, S3 settings), over those :func:`s3_properties_from_env` finds."""
    props = {**s3_properties_from_env(), **(properties or {})}
    if catalog_uri is None or warehouse is None:
        if first_log_dir is None:
            raise ValueError("the embedded Iceberg catalog or warehouse needs the first log dir")
        db, wh = embedded_paths(first_log_dir)
        if catalog_uri is None:
            os.makedirs(os.path.dirname(db), exist_ok=True)
            catalog_uri = "sqlite:///" + db
        if warehouse is None:
            warehouse = wh
    if catalog_uri.startswith(("http://", "https://")):
        return RestCatalog(name, **{"uri": catalog_uri, "warehouse": warehouse, **props})
    props = {"uri": catalog_uri, "warehouse": _warehouse_uri(warehouse), **props}
    # Two brokers (or writers) opening a new database at once may both try to create the
    # catalog's tables: the loser's CREATE fails; a second attempt finds them.
    for attempt in range(5):
        try:
            return SqlCatalog(name, **props)
        except Exception:  # sqlalchemy's OperationalError/IntegrityError: table exists, database locked
            if attempt == 4:
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


def table_name(topic: str) -> str:
    """The table of a topic. Kafka topic names are ``[A-Za-z0-9._-]``; the dot separates
    namespaces in Iceberg identifiers (and SQL), so it becomes ``_``, which cannot collide
    since Kafka refuses topics that differ only by ``.`` and ``_``. ``~`` is kept for the
    dead-letter tables (``<topic>~dlq``), a name no topic can have."""
    name = topic.replace(".", "_")
    if not _NAME_OK.match(name):
        raise ValueError(f"no Iceberg table name for topic {topic!r}")
    return name


def table_identifier(topic: str, namespace: str = DEFAULT_NAMESPACE) -> tuple[str, str]:
    return (namespace, table_name(topic))


def ensure_namespace(catalog: Catalog, namespace: str = DEFAULT_NAMESPACE) -> None:
    """Create the namespace unless it exists; another writer creating it at the same time
    is fine (its insert wins, ours fails on the key)."""
    try:
        catalog.create_namespace_if_not_exists(namespace)
    except NamespaceAlreadyExistsError:
        pass
    except Exception:
        if not _namespace_exists(catalog, namespace):
            raise


def _namespace_exists(catalog: Catalog, namespace: str) -> bool:
    try:
        catalog.load_namespace_properties(namespace)
        return True
    except Exception:
        return False
