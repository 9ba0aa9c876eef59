"""Run records: the one owner of what a run leaves on disk. The run directory's files and their
atomic writes (`rundir`), checkpoints and their integrity (`checkpoint`), where metrics go
(`sinks`: console, metrics.jsonl, samples, wandb) and how a stalled run is recognised in them
(`stalls`). The trainer writes through these; `rlrun compare`, `rlrun sweep` and `rlrun eval`
read through them, so none of them needs the trainer to read a run."""
