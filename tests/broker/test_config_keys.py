"""Each config key is declared once, and everything else agrees with its declaration:
DescribeConfigs over the wire (type, read-only, sensitive, default, synonyms) against a real
broker, the dynamic-update rules (IncrementalAlterConfigs, validate-only, for every key at
both levels), the README's table, and the one .properties reader against Java's own."""

from __future__ import annotations

import ast
import re
from collections import Counter
from pathlib import Path

from broker.config_keys import BROKER_KEYS, RESTART_ONLY, readme_table
from broker.dynamic_keys import SSL_PER_LISTENER
from broker.properties import parse_properties
from broker.tools.wire import WireClient
from protocol.apis import ApiKey
from storage.config import LOG_KEYS, TOPIC_CONFIG_NAMES, TOPIC_KEYS
from storage.config_def import ACCEPTED, PASSWORD, PER_BROKER, QUOTA, READ_ONLY, USED, walk
from tests.krait_harness import REPO, JavaProgram

# The modules that held the parallel tables; a key's facts may be written only in the
# declarations (the first three)
DECLARATIONS = ("storage/config.py", "broker/config_keys.py", "broker/dynamic_keys.py")
CONFIG_MODULES = (*DECLARATIONS, "storage/config_def.py", "broker/config.py", "broker/config_admin.py",
                  "broker/handlers/describe_configs.py", "broker/handlers/alter_configs.py",
                  "broker/handlers/incremental_alter_configs.py", "broker/security/client_security.py",
                  "broker/tools/configs_cli.py")
_DECLARE = {"ConfigKey", "TopicSynonym", "_accepted", "_hours"}
TYPE_IDS = {"BOOLEAN": 1, "STRING": 2, "INT": 3, "SHORT": 4, "LONG": 5, "DOUBLE": 6, "LIST": 7, "CLASS": 8,
            "PASSWORD": 9}
SOURCE_DEFAULT, SOURCE_STATIC = 5, 4
SET = 0


def _all_names() -> set[str]:
    return set(BROKER_KEYS) | set(TOPIC_KEYS)


def test_each_key_is_declared_once():
    declared = [k.name for k in walk(LOG_KEYS)] + [n for n, k in BROKER_KEYS.items() if k.name not in
                                                   {x.name for x in walk(LOG_KEYS)}]
    assert not [n for n, c in Counter(declared).items() if c > 1]
    topics = [k.topic_name for k in walk(LOG_KEYS) if k.topic_name]
    assert not [n for n, c in Counter(topics).items() if c > 1]


def test_no_key_is_written_outside_its_declaration():
    """A key name may appear in the config modules once, in its declaration; elsewhere only
    where code reads a value (``values["node.id"]``, ``get(props, "log.cleaner.threads")``)."""
    names = _all_names()
    facts: dict[str, list[str]] = {}
    for rel in CONFIG_MODULES:
        tree = ast.parse((REPO / rel).read_text())
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Constant) and node.value in names):
                continue
            parent = parents[node]
            if isinstance(parent, ast.Subscript) and parent.slice is node:
                continue  # a read
            if isinstance(parent, ast.Call) and node in parent.args:
                func = parent.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called not in _DECLARE:
                    continue  # a read
            facts.setdefault(node.value, []).append(f"{rel}:{node.lineno}")
    twice = {n: where for n, where in facts.items() if len(where) > 1}
    assert not twice, f"keys written more than once: {twice}"
    outside = {n: where for n, where in facts.items() if not where[0].startswith(DECLARATIONS)}
    assert not outside, f"keys written outside their declarations: {outside}"


def test_readme_table_is_generated_from_the_declarations():
    text = (REPO / "README.md").read_text()
    m = re.search(r"<!-- config-keys:begin[^>]*-->\n(.*?)<!-- config-keys:end -->", text, re.S)
    assert m, "README.md has no generated config-keys block"
    assert m.group(1) == readme_table(), "README's config table is stale: run python -m broker.config_keys"


def _describe(port: int, rtype: int, name: str) -> dict:
    with WireClient("127.0.0.1", port, timeout=10) as c:
        resp = c.request(ApiKey.DESCRIBE_CONFIGS, 4, resources=[dict(
            resource_type=rtype, resource_name=name, configuration_keys=None)],
            include_synonyms=True, include_documentation=False)
    (result,) = resp.results
    assert result.error_code == 0, result.error_message
    return {c.name: c for c in result.configs}


def test_describe_configs_agrees_with_the_declarations(broker):
    entries = _describe(broker.port, 4, "1")
    listed = {n for n, k in BROKER_KEYS.items() if k.use in (USED, ACCEPTED)}
    assert listed <= set(entries)
    for name, e in entries.items():
        key = BROKER_KEYS.get(name)
        if key is None:
            continue  # a custom key the harness set
        assert e.config_type == TYPE_IDS[key.type], name
        assert e.read_only == (key.dynamic == READ_ONLY or key.use == QUOTA), name
        assert e.is_sensitive == (key.type == PASSWORD), name
        if e.config_source == SOURCE_DEFAULT:
            assert e.value == (None if key.sensitive else key.default), name
        if e.config_source in (SOURCE_DEFAULT, SOURCE_STATIC) and key.default is not None:
            assert e.synonyms, name
        if e.synonyms:
            # Kafka's ConfigHelper.configSynonyms: the key itself first (a higher-precedence
            # synonym of another name is dropped), then only its own lower-precedence forms
            assert e.synonyms[0].name == name, name
            assert {s.name for s in e.synonyms} <= {name, *(s.name for s in key.synonyms)}, name
    # Kafka 4 changes advertised.listeners only with a restart
    assert entries["advertised.listeners"].read_only


def test_topic_describe_configs_agrees_with_the_declarations(broker):
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("config-keys-topic", 1, 1)])["config-keys-topic"].result(10)
    entries = _describe(broker.port, 2, "config-keys-topic")
    assert set(entries) == set(TOPIC_CONFIG_NAMES)
    for name, e in entries.items():
        key = TOPIC_KEYS[name]
        assert e.config_type == TYPE_IDS[key.type] and not e.read_only and not e.is_sensitive, name
        if e.synonyms:
            assert e.synonyms[0].name == key.name or e.synonyms[0].name in {s.name for s in key.synonyms}, name


def _value(key) -> str:  # a valid value of the key, for validate-only updates
    if key.default is not None:
        return key.default
    return {"INT": "1", "LONG": "1", "SHORT": "1", "DOUBLE": "0.5", "BOOLEAN": "false"}.get(key.type, "x")


def _alter_validate_only(port: int, name: str, key: str, value: str) -> tuple[int, str | None]:
    with WireClient("127.0.0.1", port, timeout=10) as c:
        resp = c.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, resources=[dict(
            resource_type=4, resource_name=name, configs=[dict(name=key, config_operation=SET, value=value)])],
            validate_only=True)
    (r,) = resp.responses
    return r.error_code, r.error_message


def test_dynamic_update_rules_agree_with_the_declarations(broker):
    """Every declared key, set (validate only) on this broker and as the cluster-wide default:
    refused exactly as its update mode says, with Kafka's messages."""
    for name, key in BROKER_KEYS.items():
        for level in ("1", ""):
            code, message = _alter_validate_only(broker.port, level, name, _value(key))
            if key.dynamic == READ_ONLY and key.use != QUOTA:
                expected = f"Cannot update these configs dynamically: Set({name})"
            elif RESTART_ONLY in key.tags:
                expected = f"Cannot update these configs dynamically (Krait binds its listeners at start-up): Set({name})"
            elif SSL_PER_LISTENER in key.tags:
                expected = ("These security configs can be dynamically updated only per-listener using the listener "
                            f"prefix: Set({name})")
            elif level == "" and key.dynamic == PER_BROKER:
                expected = f"Cannot update these configs at default cluster level, broker id must be specified: Set({name})"
            else:
                expected = None
            assert (code, message) == ((0, None) if expected is None else (42, expected)), (name, level)


# --- the one .properties reader, against Java's Properties.load ----------------------------

JAVA_PROPERTIES = r"""
import java.io.FileInputStream;
import java.util.*;

// Prints each key and value of a .properties file as UTF-16 code units in hex.
public class LoadProps {
  static String hex(String s) {
    StringBuilder b = new StringBuilder();
    for (char c : s.toCharArray()) b.append(Integer.toHexString(c)).append(' ');
    return b.toString().trim();
  }
  public static void main(String[] a) throws Exception {
    Properties p = new Properties();
    try (FileInputStream in = new FileInputStream(a[0])) { p.load(in); }
    for (String k : new TreeSet<>(p.stringPropertyNames())) System.out.println(hex(k) + "=" + hex(p.getProperty(k)));
  }
}
"""

PROPERTIES = (
    b"# a comment\n! another, ending with a backslash \\\nplain=1\n  indented = two words  \n"
    b"colon:3\nspace 4\ntab\t5\nff\f6\nempty=\nkeyonly\n=novalue\n"
    b"cont=a\\\n    b\\\n\tc\ncont.comment=x\\\n# not a comment\n"
    b"even.backslashes=x\\\\\nafter.even=1\nodd.then.empty=y\\\n\nafter.empty=2\n"
    b"esc\\=key\\:with\\ seps=v\nunicode=\\u00e9\\u4e2d\\t\\n\\r\\f\\q\nlatin1=\xe9\n"
    b"windows=1\r\nmac=2\rdup=first\ndup=second\nsep.twice==x\nsep.space = : y\n"
    b"last=end\\"
)


def _hex(s: str) -> str:
    return " ".join(f"{ord(c):x}" for c in s)


def test_properties_reader_matches_java(tmp_path):
    f = tmp_path / "t.properties"
    f.write_bytes(PROPERTIES)
    java = JavaProgram(JAVA_PROPERTIES, "LoadProps", tmp_path)
    run = java.run(str(f))
    assert run.returncode == 0, run.stderr
    ours = parse_properties(PROPERTIES.decode("latin-1"))
    assert [f"{_hex(k)}={_hex(v)}" for k, v in sorted(ours.items())] == run.stdout.splitlines()


def test_server_and_client_properties_use_the_same_reader(tmp_path):
    from broker.config import read_properties
    from broker.security.client_security import read_client_properties

    f = tmp_path / "both.properties"
    f.write_bytes(PROPERTIES)
    assert read_properties(f) == read_client_properties(f) == parse_properties(PROPERTIES.decode("latin-1"))
    assert not Path(REPO / "broker" / "key_types.py").exists()

