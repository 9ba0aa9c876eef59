"""Multi-turn sampling on any engine by resubmitting each row's whole context every turn.

Correct for every engine that implements ``generate``: a turn is one ``generate`` call whose
prompts are the rows' contexts so far (token ids, never re-tokenized). What it costs depends on
the engine: vLLM with prefix caching reuses the KV blocks of the context it has already seen,
while an engine without a prefix cache recomputes the whole context each turn (the hf engine
keeps its cache between turns instead, in its own ``Conversation``).
"""

from __future__ import annotations

from collections.abc import Sequence

from rlrun.rollout.engine import RolloutBatch, RolloutEngine, SamplingParams


class ConversationRows:
    """What every conversation keeps: each row's context as token ids, and its budget (its
    prompt plus the conversation's ``max_tokens``)."""

    def __init__(self, prompt_ids: list[list[int]], prompt_of_row: Sequence[int], *, max_tokens: int):
        self.contexts = [list(prompt_ids[p]) for p in prompt_of_row]
        self.budgets = [len(c) + max_tokens for c in self.contexts]  # what each row may hold
        self.num_rows = len(self.contexts)

    def check_turn(self, rows: Sequence[int], sampling: SamplingParams) -> None:
        if sampling.n != 1:
            raise ValueError(f"a conversation samples one turn per row (n=1), got n={sampling.n}")
        if len(set(rows)) != len(rows) or not all(0 <= r < self.num_rows for r in rows):
            raise ValueError(
                f"a turn's rows must be distinct rows of the conversation (0 .. {self.num_rows - 1})"
            )
        self.check_room(rows, sampling.max_tokens)

    def check_room(self, rows: Sequence[int], added: int | Sequence[int]) -> None:
        counts = [added] * len(rows) if isinstance(added, int) else added
        for r, count in zip(rows, counts):
            if len(self.contexts[r]) + count > self.budgets[r]:
                raise ValueError(
                    f"row {r} would hold {len(self.contexts[r]) + count - self.budgets[r]} tokens more than the "
                    "conversation's max_tokens after its prompt"
                )

    def extend(self, rows: Sequence[int], batch: RolloutBatch) -> None:
        """Add a turn's sampled ids (EOS included) to its rows' contexts."""
        for r, ids, mask in zip(rows, batch.response_ids.tolist(), batch.response_mask.tolist()):
            self.contexts[r].extend(i for i, m in zip(ids, mask) if m)


class ResubmittingConversation(ConversationRows):
    """``n`` rows per prompt, each row's context kept as token ids and resubmitted whole."""

    def __init__(self, engine: RolloutEngine, prompt_ids: list[list[int]], n: int, *, max_tokens: int):
        super().__init__(
            prompt_ids, [p for p in range(len(prompt_ids)) for _ in range(n)], max_tokens=max_tokens
        )
        self.engine = engine

    def sample(self, rows: Sequence[int], sampling: SamplingParams) -> RolloutBatch:
        self.check_turn(rows, sampling)
        batch = self.engine.generate([self.contexts[r] for r in rows], sampling)
        self.extend(rows, batch)
        return batch

    def append(self, rows: Sequence[int], token_ids: Sequence[Sequence[int]]) -> None:
        self.check_room(rows, [len(t) for t in token_ids])
        for r, ids in zip(rows, token_ids):
            self.contexts[r].extend(ids)

    def close(self) -> None:
        self.contexts = []


def resubmitting(
    self: RolloutEngine, prompt_ids: list[list[int]], n: int, *, max_tokens: int
) -> ResubmittingConversation:
    """``RolloutEngine.conversation`` for engines that keep nothing between calls."""
    return ResubmittingConversation(self, prompt_ids, n, max_tokens=max_tokens)
