"""Reading the YAML and text rlrun is given, with the line and column of every key.

Every file or string a user writes goes through here: `read_text` for files (recipes, sweep files,
verl and TRL configs, shell scripts: UTF-8, a leading byte-order mark dropped, at most
`MAX_TEXT_BYTES`), then `parse_document` (a mapping with the position of every key) or `load_yaml`
(one value of any shape: a `--reward` value, a converted config). Their errors are `ConfigIssue`s
naming the file (or command-line argument), line and column.

Two departures from PyYAML's YAML 1.1 defaults, both following YAML 1.2: only `true`/`false`
are booleans (so `level: off` stays the string "off"), and `1e-4` is a float (1.1 reads it as
a string, a classic learning-rate bug). Safe YAML only (no tags that build Python objects), and
documents that would exhaust the parser are refused with a located error: nesting deeper than
`MAX_DEPTH`, aliases that expand to more than `MAX_ALIAS_VALUES` values ("billion laughs"), an
alias inside its own anchor.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from rlrun.errors import ConfigIssue, RecipeError
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
MAX_DEPTH = 100  # a recipe nests 4-5 levels; PyYAML's composer recurses, so depth is bounded
MAX_ALIAS_VALUES = 10_000  # values that aliases may add: a recipe uses a few dozen
# A recipe is a few KB; a generated file of a few MB still reads (in seconds), a runaway one is refused
# before the parser spends minutes and gigabytes on it.
MAX_TEXT_BYTES = 16 * 2**20
# Byte-order marks of the encodings editors offer besides UTF-8 (UTF-32 first: its LE mark starts
# with UTF-16's).
_OTHER_ENCODINGS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)
_TAG_PREFIX = "tag:yaml.org,2002:"


@dataclass(frozen=True)
class Mark:
    """A 1-based position in a file."""

    line: int
    column: int


class RefusedYAMLError(yaml.MarkedYAMLError):
    """A document refused for its shape (too deep, alias bomb), not for its syntax."""


class RecipeLoader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans and floats and the limits above."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._open_anchors: set[str] = set()
        self._alias_values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values in it, aliases expanded

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) and event.anchor in self.anchors:
            if event.anchor in self._open_anchors:
                raise RefusedYAMLError(
                    None, None, f"the alias *{event.anchor} is inside its own anchor", event.start_mark
                )
            self._alias_values += _size(self.anchors[event.anchor], self._sizes)
            if self._alias_values > MAX_ALIAS_VALUES:
                raise RefusedYAMLError(
                    None, None, f"aliases expand to more than {MAX_ALIAS_VALUES} values", event.start_mark
                )
        if self._depth >= MAX_DEPTH:
            raise RefusedYAMLError(None, None, f"nested deeper than {MAX_DEPTH} levels", event.start_mark)
        anchor = getattr(event, "anchor", None) if not isinstance(event, yaml.AliasEvent) else None
        self._depth += 1
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1
            self._open_anchors.discard(anchor)  # type: ignore[arg-type]

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        # A scalar its tag cannot hold (`!!int x`, `2024-13-45`) fails inside PyYAML with a
        # bare ValueError; give it the node's position.
        try:
            return super().construct_object(node, deep)
        except (ValueError, TypeError, OverflowError) as exc:
            raise yaml.constructor.ConstructorError(
                None, None, f"cannot read this {_tag_name(node.tag)} value ({exc})", node.start_mark
            ) from None

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        return self.construct_scalar(node).lower() == "true"


def _size(node: yaml.Node, sizes: dict[int, int]) -> int:
    """How many values `node` holds with every alias in it expanded (memoised per node)."""
    if id(node) not in sizes:
        children: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [child for pair in node.value for child in pair]
        sizes[id(node)] = 1 + sum(_size(child, sizes) for child in children)
    return sizes[id(node)]


def _tag_name(tag: str) -> str:
    """`tag:yaml.org,2002:python/object` -> `!!python/object`, as the user wrote it."""
    return "!!" + tag.removeprefix(_TAG_PREFIX) if tag.startswith(_TAG_PREFIX) else tag


# Copy the resolver lists: PyYAML's add_implicit_resolver would append to SafeLoader's own.
RecipeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag not in (_BOOL, _FLOAT)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
RecipeLoader.add_implicit_resolver(_BOOL, _BOOL_RE, list("tTfF"))
RecipeLoader.add_implicit_resolver(_FLOAT, _FLOAT_RE, list("-+0123456789."))
RecipeLoader.add_constructor(_BOOL, RecipeLoader.construct_yaml_bool)


def read_text(path: Path | str, what: str = "recipe", name: str | None = None) -> str:
    """The text of a file the user gave rlrun, `what` it is (`recipe`, `sweep file`, `verl config`)
    and `name` how messages call it (default: the path as given). UTF-8, a leading byte-order mark
    dropped (some Windows editors write one), at most MAX_TEXT_BYTES. Raises RecipeError with one
    issue naming the file (and the line and column of a byte that is not UTF-8), its code
    `<first word of what>-unreadable` (`recipe-unreadable`, `sweep-unreadable`)."""
    path, name = Path(path), name or str(path)

    def refuse(message: str, fix: str, line: int | None = None, column: int | None = None) -> RecipeError:
        issue = ConfigIssue(
            message, code=f"{what.split()[0]}-unreadable", file=name, line=line, column=column, fix=fix
        )
        return RecipeError([issue])

    try:
        with path.open("rb") as file:
            raw = file.read(MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise refuse(
            f"the {what} cannot be read: {exc.strerror or exc}",
            "check that the file exists and that you may read it",
        ) from None
    if len(raw) > MAX_TEXT_BYTES:
        raise refuse(
            f"the {what} is larger than {MAX_TEXT_BYTES // 2**20} MiB, far more than any {what} needs",
            "check that this is the file you meant (not a data or model file)",
        )
    for mark, encoding in _OTHER_ENCODINGS:
        if raw.startswith(mark):
            raise refuse(
                f"the {what} is {encoding} text, not UTF-8",
                "save the file as UTF-8 (most editors offer it under 'Save with encoding')",
            )
    raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        raise refuse(
            f"the {what} is not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be decoded",
            "save the file as UTF-8 (most editors offer it under 'Save with encoding')",
            line=raw.count(b"\n", 0, exc.start) + 1,
            column=exc.start - line_start + 1,
        ) from None


def parse_value(text: str) -> Any:
    """A command-line override value, read as YAML (`3e-6` -> float, `[a, b]` -> list). Raises
    yaml.YAMLError; `load_yaml` turns it into a located issue."""
    return yaml.load(text, Loader=RecipeLoader)


def load_yaml(text: str, file: str | None = None, override: str | None = None) -> Any:
    """One YAML value of any shape (a `--reward` mapping, a verl or TRL config), under the limits of
    `RecipeLoader`. Raises RecipeError with one issue located in `file` by line and column, or at
    the command-line argument `override` that held the text."""
    try:
        return parse_value(text)
    except yaml.reader.ReaderError as exc:
        issue = _character_issue(exc, text, file or "the value")
    except yaml.MarkedYAMLError as exc:
        issue = _syntax_issue(exc, file or "the value")
    except yaml.YAMLError as exc:  # no position (e.g. more than one document)
        issue = ConfigIssue(f"YAML error: {exc}", code="yaml-syntax", file=file)
    if override is not None:  # an argument has no file: its one line is the whole text
        where = f" (column {issue.column})" if issue.column and "\n" not in text else ""
        issue = ConfigIssue(issue.message + where, code=issue.code, override=override, fix=issue.fix)
    raise RecipeError([issue])


@dataclass(frozen=True)
class Shape:
    """What a kind of document must be at its top level, for the message when it is not a mapping."""

    message: str
    fix: str


RECIPE_SHAPE = Shape(
    "a recipe must be a mapping of sections (`model:`, `actor:`, ...)",
    "start the file with `extends: base` and one section per line",
)


def parse_document(
    text: str, file: str, shape: Shape = RECIPE_SHAPE
) -> tuple[dict[str, Any], dict[KeyPath, Mark], list[ConfigIssue]]:
    """Parse one recipe (or other mapping) file into (mapping, position of every key and list
    item, issues).

    A syntax error, a top level that is not a mapping (explained by `shape`), or a repeated key
    is an issue; with a syntax error the mapping is empty.
    """
    try:
        loader = RecipeLoader(text)  # checks every character first
    except yaml.reader.ReaderError as exc:
        return {}, {}, [_character_issue(exc, text, file)]
    try:
        node = loader.get_single_node()
        if node is None:
            return {}, {}, []
        if not isinstance(node, yaml.MappingNode):
            start = _mark(node.start_mark)
            issue = ConfigIssue(
                shape.message,
                code="yaml-not-mapping",
                file=file,
                line=start.line,
                column=start.column,
                found=f"a YAML {node.id}",
                fix=shape.fix,
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
        for key_node, value_node in list(node.value):
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: no key path can name it
                mark = _mark(key_node.start_mark)
                issues.append(
                    ConfigIssue(
                        f"a key must be a plain name, not a YAML {key_node.id}",
                        key=dotted(path),
                        code="yaml-complex-key",
                        file=file,
                        line=mark.line,
                        column=mark.column,
                        fix="write `name: value`, one key per line (nested keys as an indented section)",
                    )
                )
                node.value.remove((key_node, value_node))
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


def _character_issue(exc: yaml.reader.ReaderError, text: str, file: str) -> ConfigIssue:
    """A character YAML does not allow (NUL, control codes), located by line and column."""
    line_start = text.rfind("\n", 0, exc.position) + 1
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    return ConfigIssue(
        f"the file holds a character YAML does not allow (U+{code:04X}"
        + (", a NUL byte)" if code == 0 else ")"),
        code="yaml-character",
        file=file,
        line=text.count("\n", 0, exc.position) + 1,
        column=exc.position - line_start + 1,
        fix="delete it (a NUL byte or control character usually comes from a bad copy or a binary file)",
    )


def _syntax_issue(exc: yaml.MarkedYAMLError, file: str) -> ConfigIssue:
    mark = exc.problem_mark or exc.context_mark
    problem = " ".join(part for part in (exc.context, exc.problem) if part)
    tag = re.search(r"could not determine a constructor for the tag '([^']*)'", problem)
    if tag:
        message = f"the tag `{_tag_name(tag.group(1))}` is not allowed (safe YAML)"
        code = "yaml-tag"
        fix = "remove the tag: recipes are read as safe YAML, which makes only plain values (text, numbers, "
        fix += "true/false, null, lists and mappings), never Python objects"
    elif isinstance(exc, yaml.constructor.ConstructorError):
        message, code = f"YAML value error: {problem}", "yaml-value"
        fix = "write a value of that type, or quote it to make it text"
    elif isinstance(exc, RefusedYAMLError):
        message, code = f"the YAML is refused: {problem}", "yaml-limit"
        fix = "write the values out plainly (a recipe needs neither deep nesting nor many aliases)"
    else:
        message, code = f"YAML syntax error: {problem}", "yaml-syntax"
        fix = "check the indentation (spaces only), the `key: value` colons and the brackets and quotes "
        fix += "around this position"
    return ConfigIssue(
        message,
        code=code,
        file=file,
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        fix=fix,
    )


def _mark(mark: yaml.Mark) -> Mark:
    return Mark(mark.line + 1, mark.column + 1)
