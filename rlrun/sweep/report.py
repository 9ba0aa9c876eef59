"""What `rlrun sweep` prints: the plan before anything starts (runs, their state, steps, samples,
an estimated time), drawn from the SweepPlan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rlrun.compare.render import format_duration
from rlrun.sweep.plan import SweepPlan

STATE_LABELS = {
    "new": "to start",
    "resume": "to resume",
    "finished": "finished",
    "running": "running elsewhere",
}


def plan_report(plan: SweepPlan, settings: dict[str, Any], concurrent: int) -> Group:
    """The plan as a headline, a table of runs and the executor's line with the time estimate.
    Print it with `soft_wrap=True`: the lines quote paths that users copy and search for."""
    states = [run.state for run in plan.runs]
    points = len({run.run.point.name for run in plan.runs})
    headline = Text(
        f"sweep {plan.sweep.name} ({plan.sweep.file}): {points} point(s) × "
        f"{len(plan.sweep.spec.seeds)} seed(s) = {len(plan.runs)} runs in {plan.dir}/; "
        + ", ".join(f"{states.count(state)} {label}" for state, label in STATE_LABELS.items()),
    )
    table = Table(box=None, padding=(0, 2))
    for column in ("run", "recipe", "state", "steps", "samples"):
        table.add_column(
            column, justify="right" if column in ("steps", "samples") else "left", overflow="fold"
        )
    for run in plan.runs:
        table.add_row(
            run.name,
            Path(run.recipe).stem,
            STATE_LABELS[run.state],
            f"{run.steps_done}/{run.total_steps}",
            f"{run.samples:,}",
        )
    estimate = plan.estimated_seconds(concurrent)
    where = ", ".join(
        f"{key} {value}" for key, value in settings.items() if key != "kind" and value not in ((), None)
    )
    if not plan.to_do():
        outlook = "nothing to do"
    elif estimate is None:
        outlook = "no finished run to estimate the time from"
    else:
        outlook = f"about {format_duration(estimate)} of training at the finished runs' pace (plus start-up)"
    return Group(headline, table, Text(f"executor: {settings['kind']} ({where}); {outlook}"))
