"""Pydantic models of a recipe, one module per section; `Recipe` is the whole."""

from rlrun.schema.recipe import SCHEMA_VERSION, Recipe

__all__ = ["SCHEMA_VERSION", "Recipe"]
