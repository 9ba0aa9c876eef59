"""`rlrun compare`: what changed between runs, and what it did.

`runs` reads run directories, `wandb_runs` W&B runs, `inputs` picks between them, `diff` and
`comparability` compare the resolved recipes, `stats` and `health` read the metrics,
`comparison` assembles them into one JSON-able report, `render` and `plot` show it.
"""
