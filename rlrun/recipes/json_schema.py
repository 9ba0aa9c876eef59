"""The JSON Schema of a recipe file, for editors (yaml-language-server): the schema of the
resolved recipe, plus `extends`, with each key described by its comment in base.yaml."""

from __future__ import annotations

from typing import Any

from rlrun.recipes.builtin import BUILTIN_DIR
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.yaml_io import parse_document
from rlrun.schema import Recipe


def recipe_json_schema() -> dict[str, Any]:
    schema = Recipe.model_json_schema()
    for path, comment in _base_comments().items():
        if (prop := _property(schema, path)) is not None:
            prop.setdefault("description", comment)
    schema["properties"] = {
        "extends": {
            "type": "string",
            "title": "Extends",
            "description": "A built-in recipe name (`grpo`) or a path relative to this file (`./base.yaml`).",
        },
        **schema["properties"],
    }
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "rlrun recipe"
    return schema


def _base_comments() -> dict[KeyPath, str]:
    """The comment on each key's line of base.yaml (the one place the keys are documented)."""
    text = (BUILTIN_DIR / "base.yaml").read_text(encoding="utf-8")
    _, marks, _ = parse_document(text, "base.yaml")
    lines = text.splitlines()
    comments = {path: lines[mark.line - 1].partition(" #")[2].strip() for path, mark in marks.items() if path}
    return {path: comment for path, comment in comments.items() if comment}


def _property(schema: dict[str, Any], path: KeyPath) -> dict[str, Any] | None:
    """The schema property of `path` (following `$ref`s into `$defs`), or None."""
    node, prop = schema, None
    for part in path:
        prop = node.get("properties", {}).get(part)
        if prop is None:
            return None
        refs = [prop, *prop.get("anyOf", [])]
        ref = next((r["$ref"] for r in refs if "$ref" in r), None)
        node = schema["$defs"][ref.rsplit("/", 1)[1]] if ref else {}
    return prop
