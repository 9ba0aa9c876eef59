"""Accuracy on a validation set: mean@k, pass@k and maj@k, greedy or sampled, in batches.

A sample is correct when the reward's ``acc`` says so (exact match by default). With k
samples per prompt: mean@k averages all samples, pass@k counts a prompt solved when any
sample is, maj@k scores the most frequent extracted answer (ties: the first seen). Beside
accuracy: the mean of the combined reward and of each reward component, and response
lengths in tokens.

``evaluate_recipe`` is the one evaluation a recipe asks for (``trainer.eval`` with the
rollout's sampling settings): the training loop and ``rlrun eval`` both call it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from rlrun.agents.spec import AgentSpec, build_agent
from rlrun.data.dataset import PromptDataset
from rlrun.rewards import RewardCombiner
from rlrun.rewards.answers import extract_answer, normalize_answer
from rlrun.rollout.engine import RolloutEngine, SamplingParams
from rlrun.rollout.responses import sample_responses
from rlrun.schema.reward import RewardEntry, RewardFunction

ENVIRONMENT_REWARD_FN = "rlrun:environment_reward"

if TYPE_CHECKING:
    from rlrun.schema import Recipe


@dataclass(frozen=True)
class EvalResult:
    k: int
    greedy: bool
    num_prompts: int
    mean_at_k: float
    pass_at_k: float
    maj_at_k: float
    response_length_mean: float  # tokens, EOS included
    response_length_max: int
    reward_means: dict[str, float]  # "score" (the weighted sum) and each component, over all samples

    def metrics(self, prefix: str = "val/") -> dict[str, float]:
        """Flat metric names; ``<prefix>accuracy`` is mean@k."""
        return {
            f"{prefix}accuracy": self.mean_at_k,
            f"{prefix}mean@{self.k}": self.mean_at_k,
            f"{prefix}pass@{self.k}": self.pass_at_k,
            f"{prefix}maj@{self.k}": self.maj_at_k,
            f"{prefix}response_length/mean": self.response_length_mean,
            f"{prefix}response_length/max": float(self.response_length_max),
            **{f"{prefix}reward/{name}/mean": value for name, value in self.reward_means.items()},
        }


GREEDY = SamplingParams(greedy=True, seed=0)


def evaluate(
    engine: RolloutEngine,
    tokenizer: Any,
    dataset: PromptDataset,
    *,
    sampling: SamplingParams = GREEDY,
    limit: int | None = None,
    reward: RewardCombiner | None = None,
    agent: AgentSpec | None = None,
) -> EvalResult:
    """Score the first ``limit`` prompts of ``dataset`` (all when None) with ``sampling.n`` samples
    each (k): responses, or with ``agent`` its episodes (pass@k over episodes)."""
    if sampling.greedy and sampling.n != 1:
        raise ValueError("greedy evaluation draws one sample per prompt; use k=1 or greedy=false")
    k, greedy = sampling.n, sampling.greedy
    data = dataset.take(range(min(limit or len(dataset), len(dataset))))
    responses = sample_responses(engine, tokenizer, data, sampling, agent=agent)
    reward = reward or RewardCombiner([RewardFunction(fn="rlrun:exact_match")])
    scored = reward(**responses.reward_arguments(data))
    correct = (scored.acc > 0.5).view(len(data), k)
    completions = responses.completions
    lengths = responses.response_attention.sum(-1).float()
    return EvalResult(
        k=k,
        greedy=greedy,
        num_prompts=len(data),
        mean_at_k=correct.float().mean().item(),
        pass_at_k=correct.any(-1).float().mean().item(),
        maj_at_k=_majority_correct(completions, correct, k).float().mean().item(),
        response_length_mean=lengths.mean().item(),
        response_length_max=int(lengths.max().item()),
        reward_means={"score": scored.scores.mean().item()}
        | {name: column.nanmean().item() for name, column in scored.components.items()},
    )


def evaluate_recipe(
    engine: RolloutEngine,
    tokenizer: Any,
    dataset: PromptDataset,
    recipe: Recipe,
    reward: RewardCombiner,
    *,
    agent: AgentSpec | None = None,
) -> EvalResult:
    """The evaluation ``recipe`` asks for: ``trainer.eval`` (prompts, k, greedy) with the
    rollout's response length, and trainer.eval's sampling settings where set (else the rollout's),
    seeded by ``trainer.seed``."""
    e = recipe.trainer.eval
    own = {"temperature": e.temperature, "top_p": e.top_p, "top_k": e.top_k}
    sampling = SamplingParams.from_rollout(
        recipe.rollout,
        n=e.k,
        greedy=e.greedy,
        min_tokens=0,
        seed=recipe.trainer.seed,
        **{name: value for name, value in own.items() if value is not None},
    )
    return evaluate(
        engine, tokenizer, dataset, sampling=sampling, limit=e.prompts, reward=reward, agent=agent
    )


def reward_functions(recipe: Recipe, agent: AgentSpec | None) -> list[RewardEntry]:
    """What scores a recipe's responses: `reward.functions`, and for an agent whose environment
    has get_reward, `rlrun:environment_reward` x 1 unless the recipe lists it (TRL adds an
    environment_factory's get_reward as a reward function of weight 1)."""
    functions = list(recipe.reward.functions)
    rewarded = agent is not None and any(e.has_reward for e in agent.environments.values())
    if rewarded and not any(getattr(f, "fn", None) == ENVIRONMENT_REWARD_FN for f in functions):
        functions.append(RewardFunction(fn=ENVIRONMENT_REWARD_FN))
    return functions


def build_agent_spec(recipe: Recipe, tokenizer: Any) -> AgentSpec | None:
    """The recipe's agent on this tokenizer (None when it runs single responses): what training
    and `rlrun eval` sample episodes with."""
    a = recipe.agent
    return (
        build_agent(a, tokenizer=tokenizer, template_kwargs=recipe.data.chat_template_kwargs)
        if a.enabled
        else None
    )


def _majority_correct(completions: list[str], correct: torch.Tensor, k: int) -> torch.Tensor:
    answers = [normalize_answer(extract_answer(c) or c) for c in completions]
    majority = []
    for row in range(correct.shape[0]):
        group = answers[row * k : (row + 1) * k]
        top = Counter(group).most_common(1)[0][0]  # most_common keeps first-seen order on ties
        majority.append(bool(correct[row, group.index(top)]))
    return torch.tensor(majority)
