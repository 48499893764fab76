"""The JVM connector's glue (spark/connector.py, spark/bridge.py) without
Spark: building and finding the jar, the reason a read runs on the Python
source, option engine on the Python side, and the planner process's answers."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from logbroker.spark import bridge, connector, source
from logbroker.spark.options import SparkSourceError
from tests.support.fixtures import fill


def test_why_python_names_the_missing_step(monkeypatch, tmp_path):
    monkeypatch.setenv("LOGBROKER_SPARK_JAR", str(tmp_path / "none.jar"))
    monkeypatch.setattr(connector, "JAR", str(tmp_path / "none.jar"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert "cannot be built: no JDK" in connector.why_python()
    jar = tmp_path / "built.jar"
    jar.write_bytes(b"PK")
    monkeypatch.setenv("LOGBROKER_SPARK_JAR", str(jar))
    assert "not on this session's classpath" in connector.why_python()
    assert connector.main(["path"]) == 0


def test_build_without_a_jdk_is_a_clear_error(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(connector, "JAR", str(tmp_path / "x.jar"))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert connector.main(["build"]) == 1
    assert connector.main(["build", "--if-jdk"]) == 0
    assert "no JDK" in capsys.readouterr().err
    assert connector.main(["nonsense"]) == 2


def test_engine_option_on_the_python_source(monkeypatch, caplog):
    monkeypatch.setattr(source, "_said", False)
    with pytest.raises(SparkSourceError, match="option engine must be"):
        source._say_engine({"engine": "fast"}, "")
    with pytest.raises(SparkSourceError, match="engine jvm: the JVM connector"):
        source._say_engine({"ENGINE": "jvm"}, "")
    source._say_engine({"engine": "python"}, "")
    source._say_engine({}, "127.0.0.1:9")  # bootstrap reads are the Python engine's
    assert not caplog.records
    with caplog.at_level(logging.WARNING, "logbroker.spark"):
        source._say_engine({}, "")
        source._say_engine({}, "")
    assert len(caplog.records) == 1 and "reading with the Python source" in caplog.text


def test_planner_process_answers_plans_and_errors(tmp_path):
    s = fill(tmp_path / "data", partitions=2, batches=20)
    s.close()
    requests = [{"op": "hello"},
                {"op": "plan", "options": {"path": str(tmp_path / "data"), "subscribe": "orders"},
                 "columns": ["offset"],
                 "filters": {"and": [{"col": "partition", "op": "=", "value": 1},
                                     {"col": "offset", "op": ">=", "value": 150}]}},
                {"op": "plan", "options": {"path": str(tmp_path / "data"), "subscribe": "nope"}},
                {"op": "what"}]
    done = subprocess.run([sys.executable, "-m", "logbroker.spark.bridge"], text=True,
                          input="".join(json.dumps(r) + "\n" for r in requests),
                          capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    hello, plan, unknown, what = [json.loads(line) for line in done.stdout.splitlines()]
    assert hello == {"version": bridge.VERSION}
    assert [(s["partition"], s["start"], s["end"]) for s in plan["splits"]] == [(1, 150, 200)]
    assert plan["splits"][0]["bytes"] > 0 and plan["splits"][0]["hint_segment"] >= 0
    assert unknown["error"].startswith("unknown topic(s) nope")
    assert what == {"error": "unknown op 'what'"}
