"""The JVM connector's jar: built from our Java source, found, put on a session.

    python -m logbroker.spark.connector build            # javac against pyspark's jars
    python -m logbroker.spark.connector build --if-jdk   # the same; without a JDK, say so, exit 0
    python -m logbroker.spark.connector path             # the jar, if built

The Java source lies beside this file (``jvm/``); ``build`` compiles it with
the JDK's ``javac --release 17`` against the installed pyspark's jars (no
jar is downloaded) and writes ``jvm/logbroker-spark.jar`` (git ignores it),
only when a source is newer than the jar. A session gets the jar at start:
``spark.jars`` (``with_connector(builder)`` sets it), ``--jars`` of
spark-submit, or a copy in ``$SPARK_HOME/jars``. Without it (no JDK, not
built, not on the classpath) format ``logbroker`` is the Python source, and
its first batch read says why in one log line (``why_python``).
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

log = logging.getLogger("logbroker.spark")
HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(HERE, "jvm")
JAR = os.path.join(SOURCE, "logbroker-spark.jar")
PROVIDER = "org.logbroker.spark.LogbrokerProvider"
_SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"


class ConnectorUnavailable(Exception):
    """The jar cannot be built here (no JDK, no pyspark); the message says why."""


def jar_path() -> "str | None":
    """The built jar (``LOGBROKER_SPARK_JAR`` overrides), or None."""
    path = os.environ.get("LOGBROKER_SPARK_JAR") or JAR
    return path if os.path.isfile(path) else None


def sources() -> list[str]:
    return sorted(glob.glob(os.path.join(SOURCE, "**", "*.java"), recursive=True))


def pyspark_jars() -> str:
    try:
        import pyspark
    except ImportError:
        raise ConnectorUnavailable("pyspark is not installed (pip install 'logbroker[spark]')") from None
    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    if not os.path.isdir(jars):
        raise ConnectorUnavailable(f"pyspark has no jars directory ({jars})")
    return jars


def javac() -> str:
    home = os.environ.get("JAVA_HOME")
    found = os.path.join(home, "bin", "javac") if home else shutil.which("javac")
    if not found or not os.path.isfile(found):
        raise ConnectorUnavailable("no JDK: javac is not on PATH nor in $JAVA_HOME/bin "
                                   "(Debian: apt-get install openjdk-17-jdk-headless)")
    return found


def up_to_date() -> bool:
    if not os.path.isfile(JAR):
        return False
    built = os.path.getmtime(JAR)
    return all(os.path.getmtime(s) <= built for s in sources())


def build(force: bool = False) -> str:
    """Compile the Java source into ``JAR`` (unless up to date); its path.
    ConnectorUnavailable without a JDK or pyspark; RuntimeError with
    javac's output when the source does not compile."""
    if not force and up_to_date():
        return JAR
    compiler, jars = javac(), pyspark_jars()
    with tempfile.TemporaryDirectory(prefix="logbroker-jvm-") as tmp:
        classes = os.path.join(tmp, "classes")
        cmd = [compiler, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-d", classes,
               "-cp", os.path.join(jars, "*"), *sources()]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed ({done.returncode}):\n{done.stdout}{done.stderr}")
        partial = JAR + ".tmp"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: logbroker\n")
            jar.writestr(_SERVICE, PROVIDER + "\n")
            for root, _, files in os.walk(classes):
                for name in sorted(files):
                    full = os.path.join(root, name)
                    jar.write(full, os.path.relpath(full, classes))
        os.replace(partial, JAR)
    return JAR


def with_connector(builder, build_first: bool = False):
    """``builder`` (a SparkSession.Builder) with the jar on ``spark.jars``
    (kept with any jars it already names); unchanged, with a log line, when
    there is no jar. ``build_first``: compile it first where a JDK is present (a
    no-op when the jar is up to date)."""
    if build_first:
        try:
            build()
        except ConnectorUnavailable:
            pass  # the log line below says the connector is missing
    path = jar_path()
    if path is None:
        log.warning("logbroker: the JVM connector is not built (make spark-connector): "
                    "format logbroker runs on the Python source")
        return builder
    current = builder._options.get("spark.jars", "") if hasattr(builder, "_options") else ""
    jars = ",".join(filter(None, [current, path]))
    return builder.config("spark.jars", jars)


def on_classpath(spark) -> bool:
    """Whether ``spark``'s driver can load the connector (format logbroker is then the JVM's)."""
    try:
        loader = spark._jvm.Thread.currentThread().getContextClassLoader()
        spark._jvm.java.lang.Class.forName(PROVIDER, False, loader)
        return True
    except Exception:  # py4j raises its own error for ClassNotFoundException
        return False


def why_python() -> str:
    """Why a batch read runs on the Python source: one sentence."""
    if jar_path() is None:
        try:
            javac()
        except ConnectorUnavailable as exc:
            return f"the JVM connector cannot be built: {exc}"
        return "the JVM connector is not built (make spark-connector)"
    return (f"the JVM connector ({jar_path()}) is not on this session's classpath "
            "(spark.jars, or logbroker.spark.connector.with_connector(builder))")


def main(argv: "list[str] | None" = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["path"]:
        path = jar_path()
        print(path or "not built (make spark-connector)")
        return 0 if path else 1
    if args[:1] != ["build"]:
        print("usage: python -m logbroker.spark.connector build [--if-jdk] [--force] | path",
              file=sys.stderr)
        return 2
    try:
        path = build(force="--force" in args)
    except ConnectorUnavailable as exc:
        print(f"logbroker: Spark JVM connector not built: {exc}", file=sys.stderr)
        return 0 if "--if-jdk" in args else 1
    except RuntimeError as exc:
        print(f"logbroker: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
