"""The run's random streams: one seed per purpose and step, so a resumed run draws exactly what
an uninterrupted one would have."""

from __future__ import annotations

import numpy as np

GEN_STREAM, SHUFFLE_STREAM = 0, 1  # the critic shuffles with SHUFFLE_STREAM + 1
LOSS_STREAM = 3  # random draws of a policy loss that declares `draws_random` (clip_cov)


def step_seed(seed: int, step: int, stream: int) -> int:
    """A seed for one purpose (`stream`) at one step, independent of every other: generation and
    shuffling depend only on (seed, step), so a resumed run draws exactly what it would have."""
    return int(np.random.SeedSequence([seed, step, stream]).generate_state(1)[0])
