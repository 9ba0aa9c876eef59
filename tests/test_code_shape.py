"""The shape the code keeps: no function over 100 lines outside the tests (the training step, an
orchestrator of registered stages, is checked in tests/training/stages)."""

from __future__ import annotations

import ast
from pathlib import Path

import rlrun

PACKAGE_DIR = Path(rlrun.__file__).parent
MAX_FUNCTION_LINES = 100


def long_functions(root: Path, limit: int) -> dict[str, int]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found[f"{path.relative_to(root.parent).as_posix()}::{node.name}"] = lines
    return found


def test_no_function_is_longer_than_100_lines():
    assert long_functions(PACKAGE_DIR, MAX_FUNCTION_LINES) == {}


def test_a_long_function_is_found(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(101))
    (package / "m.py").write_text(f"def short():\n    pass\n\n\ndef long():\n{body}\n")
    assert long_functions(package, MAX_FUNCTION_LINES) == {"pkg/m.py::long": 102}
