"""The rlrun package's imports: its packages stand in a declared order of layers, and no module
import circle exists.

The graph has an edge A -> B for every `import`/`from ... import` of an rlrun module B anywhere
in A's source: at module level, inside functions, and under `TYPE_CHECKING` alike (a deferred
import hides a circle from the interpreter, not from the reader). `from pkg import name` counts
as an edge to `pkg.name` when that is a module, else to `pkg`. Importing a package also runs its
`__init__`, but that is not an edge here: only what the source names.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rlrun

PACKAGE_DIR = Path(rlrun.__file__).parent


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE_DIR.rglob("*.py"):
        parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def imports_of(module: str, path: Path, modules: set[str]) -> set[str]:
    """The rlrun modules `module`'s source imports (relative imports resolved)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
    return {name for name in found if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
    names = module_names()
    return {module: imports_of(module, path, set(names)) for module, path in names.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph[root]))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


# The layers, bottom first. A package may import its own modules and any package of a lower layer;
# packages of one layer are independent of each other. docs/architecture.md explains the order.
LAYERS: list[set[str]] = [
    {"errors", "registry", "interrupt", "facts", "pathnames", "user_code"},  # leaf facts and tools
    {"tasks", "embedded", "shared_prefix"},  # the shipped task and models, the KV-sharing forward
    {"schema"},  # the recipe's fields
    {"algorithms", "data", "rewards", "agents"},  # pure components and inputs, tools and environments
    {"rollout"},
    {"evaluation"},
    {"components"},  # every registry, filled
    {"recipes"},  # loading and validation, before any model loads
    {"records"},  # the on-disk run format
    {"training", "launch"},
    {"compare"},
    {"sweep", "convert"},
    {"api"},  # rlrun from Python: the library functions the CLI's train and resume call too
    {"cli"},
    {"__main__", "rlrun"},  # `python -m rlrun`; the package's public names (rlrun.train, ...)
]


def package_of(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def layer_violations(graph: dict[str, set[str]], layers: list[set[str]]) -> list[str]:
    """Every import of a package from the same or a higher layer (its own package excepted)."""
    rank = {package: index for index, layer in enumerate(layers) for package in layer}
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            a, b = package_of(module), package_of(target)
            if a != b and rank[b] >= rank[a]:
                found.append(f"{module} -> {target} ({a} may not import {b})")
    return found


def test_every_package_has_a_layer():
    packages = {package_of(module) for module in import_graph()}
    assert packages == set().union(*LAYERS)


def test_packages_import_only_lower_layers():
    assert layer_violations(import_graph(), LAYERS) == []


def test_an_upward_or_sideways_import_is_a_violation():
    graph = {
        "rlrun.a.x": {"rlrun.b.y"},
        "rlrun.b.y": {"rlrun.c"},
        "rlrun.c": set(),
        "rlrun.a.z": {"rlrun.a.x"},
    }
    assert layer_violations(graph, [{"a"}, {"b"}, {"c"}]) == [
        "rlrun.a.x -> rlrun.b.y (a may not import b)",
        "rlrun.b.y -> rlrun.c (b may not import c)",
    ]
    assert layer_violations(graph, [{"c"}, {"b", "a"}]) == ["rlrun.a.x -> rlrun.b.y (a may not import b)"]


def test_the_rlrun_package_has_no_import_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_graph_sees_function_level_and_relative_imports(tmp_path):
    graph = import_graph()
    assert "rlrun.cli" in graph["rlrun.__main__"]
    assert "rlrun.training.run" in graph["rlrun.cli.train"]  # imported inside a command function
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


@pytest.mark.parametrize("source", ["from . import b", "from .b import thing", "import rlrun_fake.b"])
def test_relative_and_absolute_forms_resolve(tmp_path, source):
    path = tmp_path / "a.py"
    path.write_text(source)
    assert imports_of("rlrun_fake.a", path, {"rlrun_fake.a", "rlrun_fake.b"}) == {"rlrun_fake.b"}
