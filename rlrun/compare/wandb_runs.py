"""W&B runs as compare inputs (`wandb:entity/project/run_id`), through wandb's public API.

rlrun's wandb sink logs the resolved recipe as the run config and the same metric names as
metrics.jsonl, so a W&B run maps onto a `RunRecord` with W&B's own step and runtime as axes.
"""

from __future__ import annotations

from typing import Any

from rlrun.compare.runs import RunReadError, RunRecord
from rlrun.records.record import MetricsRow, RunMeta, parse_number

# W&B run states (docs.wandb.ai, "Run states") -> the statuses of meta.json
_STATUS = {
    "running": "running",
    "pending": "running",  # scheduled, not started: W&B holds the run, its process is on its way
    "finished": "finished",
    "crashed": "failed",
    "failed": "failed",
    "killed": "interrupted",
}
_HTTP_TIMEOUT_S = 15


def load_wandb_run(path: str, api: Any = None) -> RunRecord:
    """Fetch `entity/project/run_id`; `api` is a `wandb.Api` (made here when None)."""
    if path.count("/") != 2 or not all(path.split("/")):
        raise RunReadError(f"W&B runs are named wandb:entity/project/run_id, got wandb:{path}")
    try:
        if api is None:
            import wandb

            api = wandb.Api(timeout=_HTTP_TIMEOUT_S)
        wb_run = api.run(path)
        history = list(wb_run.scan_history())
    except Exception as exc:  # no key, no network, no such run: wandb raises many types
        raise RunReadError(
            f"could not read W&B run {path}: {exc}\n"
            "W&B runs need network access and an API key (WANDB_API_KEY or `wandb login`); "
            "without them, compare the local run directory (runs/<name>) instead."
        ) from exc
    config = {
        key: value for key, value in dict(wb_run.config).items() if not key.startswith("_")
    }  # not _wandb
    trainer = config.get("trainer") or {}
    algorithm = config.get("algorithm") or {}
    actor = config.get("actor") or {}
    if wb_run.state not in _STATUS:
        raise RunReadError(f"W&B run {path} is in a state rlrun does not know: {wb_run.state!r}")
    meta = RunMeta(
        name=wb_run.name,
        status=_STATUS[wb_run.state],
        git_sha=getattr(wb_run, "commit", None),
        seed=trainer.get("seed"),
        total_steps=trainer.get("total_steps"),
        model=(config.get("model") or {}).get("path"),
        algorithm={"advantage": algorithm.get("advantage"), "policy_loss": actor.get("policy_loss")},
        wandb_run_id=wb_run.id,
    )
    rows = [_row(record) for record in history]
    rows = [row for row in rows if row is not None]
    return RunRecord(
        wb_run.name, f"wandb:{path}", meta, config or None, sorted(rows, key=lambda r: r["step"])
    )


def _row(record: dict[str, Any]) -> dict[str, float] | None:
    """A history record as a metrics.jsonl row; W&B's bookkeeping keys start with `_`."""
    step = record.get("step", record.get("_step"))
    if step is None:
        return None
    row = {key: value for key, value in record.items() if not key.startswith("_")}
    row["step"] = step
    if parse_number(row.get("wall_time_s")) is None and "_runtime" in record:
        row["wall_time_s"] = record["_runtime"]
    return MetricsRow.parse(row).flat()
