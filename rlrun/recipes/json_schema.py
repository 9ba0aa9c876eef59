"""The JSON Schema of a recipe file, for editors (yaml-language-server): the schema of the
resolved recipe, plus `extends`. Each key's description is the one written under its field in
`rlrun/schema`; keys that name a component list the registered names, so editors complete them."""

from __future__ import annotations

from typing import Any

from rlrun.components import registries
from rlrun.recipes.keys import KeyPath
from rlrun.recipes.names import NAMED_KEYS
from rlrun.schema import Recipe


def recipe_json_schema() -> dict[str, Any]:
    schema = Recipe.model_json_schema()
    tables = registries()
    named: dict[KeyPath, list[str]] = {path: tables[kind].names() for path, kind in NAMED_KEYS.items()}
    named[("reward", "functions", "fn")] = tables["reward"].names()
    for path, names in named.items():
        if (prop := _property(schema, path)) is not None:
            _complete_with(prop, names)
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


def _complete_with(prop: dict[str, Any], names: list[str]) -> None:
    """The registered names as an enum editors complete from; any other string stays valid (a
    plugin's component registers only when the recipe is loaded)."""
    plain = {key: prop.pop(key) for key in ("type", "minLength") if key in prop}
    prop["anyOf"] = [{"enum": names}, {**plain, "type": "string"}]


def _property(schema: dict[str, Any], path: KeyPath) -> dict[str, Any] | None:
    """The schema property of `path` (following `$ref`s into `$defs`, and into list items), or None."""
    node, prop = schema, None
    for part in path:
        prop = node.get("properties", {}).get(part)
        if prop is None:
            return None
        items = prop.get("items", {})
        refs = [prop, items, *prop.get("anyOf", []), *items.get("oneOf", [])]  # oneOf: a tagged union
        ref = next((r["$ref"] for r in refs if "$ref" in r), None)
        node = schema["$defs"][ref.rsplit("/", 1)[1]] if ref else {}
    return prop
