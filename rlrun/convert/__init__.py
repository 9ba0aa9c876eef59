"""Recipes from other stacks' configurations: `rlrun convert verl` (a verl command line, script or
YAML). `verl_keys` holds the one verl -> rlrun key table; it imports nothing from rlrun."""
