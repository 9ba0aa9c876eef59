"""Leaf facts: pure data and probes of this machine that any layer may read. Nothing here imports
another rlrun package, so validation (rlrun.recipes), the rewards and the trainer can all share
one owner of, say, the dtype names or the bfloat16 check."""
