"""Import control (docs/architecture.md, "Layers"): every import of
src/logbroker, inside functions too, goes down the written layers, and no
modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "logbroker"
DOC = SRC.parent.parent / "docs" / "architecture.md"


def layers() -> dict[str, int]:
    block = DOC.read_text().split("## Layers", 1)[1].split("```", 2)[1]
    out = {}
    for depth, line in enumerate(ln for ln in block.splitlines() if ln.strip()):
        for name in line.split(","):
            out[name.strip()] = depth
    return out


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_module(name: str) -> bool:
    rel = Path(*name.split("."))
    return (SRC.parent / rel).with_suffix(".py").exists() or (SRC.parent / rel / "__init__.py").exists()


def imports(path: Path):
    """(imported module, line) of every import in ``path``, at any depth."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            for alias in node.names:  # `from pkg import module` imports that module
                sub = f"{mod}.{alias.name}"
                yield (sub if is_module(sub) else mod), node.lineno


def top(name: str) -> "str | None":
    """The layer entry of a module: its top-level package or module under logbroker."""
    parts = name.split(".")
    if parts[0] != "logbroker":
        return None
    return parts[1] if len(parts) > 1 else "logbroker"


def all_modules():
    return sorted(SRC.rglob("*.py"))


def test_every_package_is_in_a_layer():
    known = layers()
    tops = {top(module_name(p)) for p in all_modules()}
    assert not tops - set(known), sorted(tops - set(known))
    assert not set(known) - tops, sorted(set(known) - tops)


def test_imports_go_down_the_layers():
    known = layers()
    wrong = []
    for path in all_modules():
        me = module_name(path)
        mine = top(me)
        for target, line in imports(path):
            other = top(target)
            if other is None or other == mine:
                continue
            if known[other] <= known[mine]:
                how = "up" if known[other] < known[mine] else "across its layer"
                wrong.append(f"{me}:{line} imports {target} ({how})")
    assert not wrong, "\n".join(wrong)


def test_no_module_import_cycles():
    graph = {module_name(p): {t for t, _ in imports(p) if t.startswith("logbroker") and t != module_name(p)}
             for p in all_modules()}
    index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, cycles
