"""Why a run is not learning: the two stalls a new recipe most often hits, read from step metrics.

`rlrun train` prints each on the console the step it first shows (`StallWatch`); `rlrun compare`
lists it among its health flags. Both call `find_stalls`, so they agree on thresholds and wording.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

CUT_FRACTION = 0.5  # "most responses": more than this fraction cut at the length limit
STALL_STEPS = 3  # consecutive steps before a stall is reported (one bad batch is noise)
CLIP_RATIO = "response_length/clip_ratio"
SCORE_MAX, SCORE_MIN = "critic/score/max", "critic/score/min"
FORMAT_KEYS = "`data.system_prompt` / `data.prompt_template`"


@dataclass(frozen=True)
class Stall:
    check: str  # stable identifier, shared with compare's health flags
    message: str  # the likely cause and the key to change
    step: int  # the first step of the first window of STALL_STEPS consecutive stalled steps


def find_stalls(rows: Sequence[Mapping[str, float]]) -> list[Stall]:
    """The stalls in a run's per-step metric rows (each with a `step`), in check order."""
    cut = _first_window(rows, lambda row: row.get(CLIP_RATIO, 0.0) > CUT_FRACTION)
    zero = _first_window(rows, lambda row: row.get(SCORE_MAX) == 0.0 and row.get(SCORE_MIN) == 0.0)
    stalls = []
    if cut is not None:
        stalls.append(
            Stall(
                "length-limit",
                f"most responses hit the length limit ({STALL_STEPS} steps from step {cut}: over "
                f"{CUT_FRACTION:.0%} cut at rollout.max_response_tokens); a cut response seldom holds its "
                f"answer, so it scores nothing. Raise `rollout.max_response_tokens`, or ask for a short "
                f"answer with {FORMAT_KEYS}",
                cut,
            )
        )
    if zero is not None:
        stalls.append(
            Stall(
                "zero-reward",
                f"every response scored 0 for {STALL_STEPS} steps from step {zero}: with nothing to "
                f"compare, the advantages are 0 and the policy learns nothing. Check that the reward reads "
                f"the format the model answers in (samples.jsonl), and ask for that format with "
                f"{FORMAT_KEYS}",
                zero,
            )
        )
    return stalls


class StallWatch:
    """A run in progress, watched for stalls: each is reported once, the step it first shows."""

    def __init__(self) -> None:
        self.recent: deque[dict[str, float]] = deque(maxlen=STALL_STEPS)  # a stall spans this many
        self.reported: set[str] = set()

    def new_stalls(self, step: int, metrics: Mapping[str, float]) -> list[Stall]:
        """The stalls not reported before that the latest steps, up to `step`, show."""
        self.recent.append({"step": step, **metrics})
        found = [stall for stall in find_stalls(self.recent) if stall.check not in self.reported]
        self.reported |= {stall.check for stall in found}
        return found


def _first_window(
    rows: Sequence[Mapping[str, float]], stalled: Callable[[Mapping[str, float]], bool]
) -> int | None:
    """The step starting the first run of STALL_STEPS consecutive rows where `stalled(row)`."""
    streak: list[int] = []
    for row in rows:
        streak = [*streak, int(row["step"])] if stalled(row) else []
        if len(streak) == STALL_STEPS:
            return streak[0]
    return None
