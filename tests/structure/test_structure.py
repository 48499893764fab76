"""Structural rules of the code base (docs/architecture.md), checked on the source.

- Segments (storage/segments.py) is the one owner of a log's state: no other
  module assigns its fields, and no module outside storage/log.py assigns a
  field of a Log.
- The storage modules around the Log do not import it (no import cycles).
- One batch walker: nothing outside records/walker.py loops over batch headers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "logbroker"
STATE = {"_log_start", "_log_end", "_rp", "_hw", "_list", "_trash", "_new_infos"}
LOG_NAMES = {"lg", "log", "plog"}


def modules():
    for path in sorted(SRC.rglob("*.py")):
        yield path.relative_to(SRC).as_posix(), ast.parse(path.read_text(), str(path))


def assigned_attributes(tree):
    """(object expression, attribute) of every attribute assignment target."""
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store):
                    yield ast.unparse(sub.value), sub.attr


def test_only_segments_assigns_the_log_state():
    offenders = []
    for name, tree in modules():
        for obj, attr in assigned_attributes(tree):
            if attr in STATE and name != "storage/segments.py":
                offenders.append(f"{name}: {obj}.{attr}")
            if obj in LOG_NAMES and name != "storage/log.py" and not name.startswith("cli/"):
                offenders.append(f"{name}: {obj}.{attr}")
    assert not offenders, offenders


def test_no_private_log_access_from_other_modules():
    pattern = re.compile(r"\b(?:lg|self\.log|self\.lg)\._[a-z]\w*")
    offenders = [f"{name}: {m.group(0)}" for name, _ in modules()
                 for m in pattern.finditer((SRC / name).read_text())]
    assert not offenders, offenders


def test_storage_helpers_do_not_import_the_log():
    for name in ("segments.py", "loader.py", "locate.py", "truncation.py", "epochs.py",
                 "producer_state.py", "index.py", "segment.py"):
        tree = ast.parse((SRC / "storage" / name).read_text())
        imported = {node.module for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) and node.module}
        assert "log" not in imported, name


def test_one_batch_walker():
    """Only the walker calls read_header in a loop; other modules use it."""
    offenders = []
    for name, tree in modules():
        if name in ("records/walker.py", "records/format.py", "records/decoder.py"):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.While):  # a walk advances a position in a while loop
                calls = [n for n in ast.walk(node) if isinstance(n, ast.Call)
                         and ast.unparse(n.func).endswith("read_header")]
                if calls:
                    offenders.append(f"{name}:{node.lineno}")
    assert not offenders, offenders


def test_the_module_map_covers_every_module():
    doc = (SRC.parent.parent / "docs" / "architecture.md").read_text()
    block = doc.split("## Module map", 1)[1].split("```", 2)[1]
    listed, package = set(), ""
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip())
        first = line.strip().split("  ")[0]
        if not first:
            continue
        if indent == 0:
            root = first
            package = ""
        elif first.endswith("/"):
            package = first
        else:
            prefix = package if indent >= 4 else ""
            for name in first.split(", "):
                listed.add(f"{root}{prefix}{name.strip()}")
    actual = {f"src/{p.relative_to(SRC.parent).as_posix()}" for p in SRC.parent.rglob("*.py")
              if p.name != "__init__.py" or p.parent.parent == SRC.parent}
    assert not actual - listed, sorted(actual - listed)
    assert not listed - actual, sorted(listed - actual)
