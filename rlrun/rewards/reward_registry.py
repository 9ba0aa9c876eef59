"""The registry of built-in reward functions (`rlrun:<name>` in a recipe)."""

from rlrun.registry import Registry

REWARDS = Registry("reward")
