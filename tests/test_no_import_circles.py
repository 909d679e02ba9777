"""No import circles among the project's own modules.

A circle forces lazy imports that hide who depends on whom, and breaks as soon as one of its
modules needs a name of another at import time. Every import counts, wherever it is written
(module level, inside a function, under `if TYPE_CHECKING:`): `from x import y` is an edge to
the submodule `x.y` when there is one, else to `x`; relative imports are resolved against the
importing module's package. Imports by name at run time (importlib) are not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The project's own code; tests, the virtualenv and node's packages are not among them.
PROJECT = ("app.py", "provisioner", "stacks", "functions", "emulator", "bench", "tools")
SKIPPED_FOLDERS = {"__pycache__", ".venv", "node_modules"}

Graph = dict[str, dict[str, int]]  # module -> {imported module: line of the first import}


def module_files(root: Path, entries: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file under `entries` (files or folders)."""
    modules = {}
    for entry in entries:
        path = root / entry
        files = [path] if path.is_file() else sorted(path.rglob("*.py"))
        for file in files:
            if SKIPPED_FOLDERS & set(file.relative_to(root).parts):
                continue
            parts = list(file.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = file
    return modules


def _package_of(module: str, file: Path) -> str:
    """The package a relative import in `module` starts from."""
    return module if file.name == "__init__.py" else module.rpartition(".")[0]


def _project_module(name: str, modules: dict[str, Path]) -> str | None:
    """`name` or its longest prefix that is a project module; None outside the project."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def imports_of(module: str, file: Path, modules: dict[str, Path]) -> Iterable[tuple[str, int]]:
    """(project module, line) of every import in `module`'s file that reaches the project."""
    for node in ast.walk(ast.parse(file.read_text(), filename=str(file))):
        if isinstance(node, ast.Import):
            names = [(alias.name, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = _package_of(module, file).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, *([base] if base else [])])
            # a name that is a submodule is that module; any other name is the module's own
            names = [(f"{base}.{alias.name}", base) for alias in node.names]
        else:
            continue
        for name, fallback in names:
            target = name if name in modules else _project_module(fallback, modules)
            if target is not None:
                yield target, node.lineno


def import_graph(root: Path, entries: Iterable[str]) -> Graph:
    """Project module -> the project modules it imports (self-imports left out)."""
    modules = module_files(root, entries)
    graph: Graph = {}
    for module, file in modules.items():
        edges = graph.setdefault(module, {})
        for target, line in imports_of(module, file, modules):
            if target != module:
                edges.setdefault(target, line)
    return graph


def strongly_connected(graph: Graph) -> list[list[str]]:
    """Tarjan's strongly connected components of more than one module, each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def one_cycle(graph: Graph, component: list[str]) -> list[str]:
    """A shortest path from the component's first module back to itself, inside the component."""
    start, members = component[0], set(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for nxt in sorted(graph[node]):
            if nxt == start:
                return [*paths[node], start]
            if nxt in members and nxt not in paths:
                paths[nxt] = [*paths[node], nxt]
                queue.append(nxt)
    raise AssertionError(f"no cycle through {start} in {component}")


def describe_cycles(graph: Graph) -> list[str]:
    """One line per circle: `a (line 3) -> b (line 9) -> a`, each line the import's."""
    lines = []
    for component in strongly_connected(graph):
        cycle = one_cycle(graph, component)
        steps = [f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:], strict=False)]
        lines.append(" -> ".join([*steps, cycle[0]]) + f"; circle of {', '.join(component)}")
    return lines


def test_the_project_has_no_import_circle() -> None:
    cycles = describe_cycles(import_graph(ROOT, PROJECT))
    assert not cycles, "import circles:\n" + "\n".join(cycles)


def test_the_detector_finds_a_planted_circle(tmp_path: Path) -> None:
    """a -> b (a `from` import of a submodule) -> c (relative, inside a function) -> a (under
    TYPE_CHECKING); d imports a name of the package, which is the package, not a circle."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("VALUE = 1\n")
    (pkg / "a.py").write_text("from pkg import b\n")
    (pkg / "b.py").write_text("def f():\n    from .c import g\n    return g\n")
    (pkg / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\ndef g(): ...\n"
    )
    (pkg / "d.py").write_text("from pkg import VALUE\nfrom . import a\n")
    graph = import_graph(tmp_path, ["pkg"])
    assert graph["pkg.d"] == {"pkg": 1, "pkg.a": 2}
    assert strongly_connected(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    (line,) = describe_cycles(graph)
    assert line.startswith("pkg.a (line 1) -> pkg.b (line 2) -> pkg.c (line 3) -> pkg.a")
    (pkg / "c.py").write_text("def g(): ...\n")
    assert describe_cycles(import_graph(tmp_path, ["pkg"])) == []
