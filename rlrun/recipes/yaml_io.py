"""Reading recipe YAML with the line and column of every key.

Two departures from PyYAML's YAML 1.1 defaults, both following YAML 1.2: only `true`/`false`
are booleans (so `level: off` stays the string "off"), and `1e-4` is a float (1.1 reads it as
a string, a classic learning-rate bug).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from rlrun.errors import ConfigIssue
from rlrun.recipes.keys import KeyPath, dotted

_BOOL = "tag:yaml.org,2002:bool"
_FLOAT = "tag:yaml.org,2002:float"
_BOOL_RE = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_FLOAT_RE = re.compile(
    r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+
    |[-+]?\.(?:inf|Inf|INF)
    |\.(?:nan|NaN|NAN))$""",
    re.VERBOSE,
)


@dataclass(frozen=True)
class Mark:
    """A 1-based position in a file."""

    line: int
    column: int


class RecipeLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans and floats."""

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return self.construct_scalar(node).lower() == "true"


# Copy the resolver lists: PyYAML's add_implicit_resolver would append to SafeLoader's own.
RecipeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
RecipeLoader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tTfF"))
RecipeLoader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+0123456789."))
RecipeLoader.add_constructor(_BOOL, RecipeLoader.construct_yaml_bool)


def parse_value(text: str) -> Any:
    """A command-line override value, read as YAML (`3e-6` -> float, `[a, b]` -> list)."""
    return yaml.load(text, Loader=RecipeLoader)


def parse_document(text: str, file: str) -> tuple[dict[str, Any], dict[KeyPath, Mark], list[ConfigIssue]]:
    """Parse one recipe file into (mapping, position of every key and list item, issues).

    A syntax error, a top level that is not a mapping, or a repeated key is an issue; with a
    syntax error the mapping is empty.
    """
    loader = RecipeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}, []
        if not isinstance(node, yaml.MappingNode):
            start = _mark(node.start_mark)
            issue = ConfigIssue(
                "a recipe must be a mapping of sections (`model:`, `actor:`, ...)",
                code="yaml-not-mapping",
                file=file,
                line=start.line,
                column=start.column,
                found=f"a YAML {node.id}",
                fix="start the file with `extends: base` and one section per line",
            )
            return {}, {}, [issue]
        positions: dict[KeyPath, Mark] = {(): _mark(node.start_mark)}
        issues: list[ConfigIssue] = []
        _record(loader, node, (), positions, issues, file)
        return loader.construct_document(node), positions, issues
    except yaml.MarkedYAMLError as exc:
        return {}, {}, [_syntax_issue(exc, file)]
    finally:
        loader.dispose()


def _record(
    loader: RecipeLoader,
    node: yaml.Node,
    path: KeyPath,
    positions: dict[KeyPath, Mark],
    issues: list[ConfigIssue],
    file: str,
) -> None:
    """Walk the node tree, noting where each key and list item starts and any repeated key."""
    if isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            positions[(*path, index)] = _mark(item.start_mark)
            _record(loader, item, (*path, index), positions, issues, file)
    elif isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = loader.construct_object(key_node, deep=True)
            child = (*path, key)
            mark = _mark(key_node.start_mark)
            if child in positions:
                first = positions[child]
                issues.append(
                    ConfigIssue(
                        f"the key appears twice in one mapping (first at line {first.line}); YAML would "
                        "silently keep only the last value",
                        key=dotted(child),
                        code="yaml-duplicate-key",
                        file=file,
                        line=mark.line,
                        column=mark.column,
                        fix="delete one of the two",
                    )
                )
            positions[child] = mark
            _record(loader, value_node, child, positions, issues, file)


def _syntax_issue(exc: yaml.MarkedYAMLError, file: str) -> ConfigIssue:
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    return ConfigIssue(
        f"YAML syntax error: {problem}",
        code="yaml-syntax",
        file=file,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        fix="check the indentation (spaces only), the `key: value` colons and the brackets and quotes "
        "around this position",
    )


def _mark(mark: yaml.Mark) -> Mark:
    return Mark(mark.line + 1, mark.column + 1)
