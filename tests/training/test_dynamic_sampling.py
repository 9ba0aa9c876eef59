"""DAPO's generation batches (algorithm.group_filter.gen_prompts_per_batch, verl's
data.gen_batch_size): each draws that many prompts, the informative groups fill the step in
order, and the budget is max_num_gen_batches of them."""

import pytest
import torch
from transformers import AutoTokenizer

from rlrun.data import PromptSampler, build_prompt_dataset
from rlrun.embedded import resolve_model_path
from rlrun.rewards import RewardCombiner
from rlrun.rollout import RolloutBatch, SamplingParams
from rlrun.schema.algorithm import GroupFilter
from rlrun.schema.reward import OverlongShaping, RewardFunction
from rlrun.training.experience import DynamicSamplingError, ExperienceCollector
from rlrun.training.profiling import Timer


class SplitEngine:
    """Prompt `p<i>`: odd i -> half the responses right ("a"), half wrong ("b"): informative;
    even i -> all right: the group is filtered out."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.a, self.b = tokenizer.encode("a")[-1], tokenizer.encode("b")[-1]

    def generate(self, prompt_ids, sampling):
        rows = []
        for ids in prompt_ids:
            index = int(self.tokenizer.decode(ids, skip_special_tokens=True).strip().removeprefix("p"))
            rows += [self.a if index % 2 == 0 or j % 2 == 0 else self.b for j in range(sampling.n)]
        ids = torch.tensor(rows).unsqueeze(1)
        return RolloutBatch(
            ids, torch.ones_like(ids), torch.zeros(ids.shape), ["stop"] * len(rows), sampling.n
        )

    def sync_weights(self, model):
        pass


def collector(gen_prompts, max_batches):
    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    records = [{"prompt": f"p{i}", "answer": "a"} for i in range(12)]
    dataset = build_prompt_dataset(records, tokenizer, apply_chat_template=False)
    return ExperienceCollector(
        engine=SplitEngine(tokenizer),
        tokenizer=tokenizer,
        dataset=dataset,
        sampler=PromptSampler(len(dataset), shuffle=False),
        reward_fn=RewardCombiner([RewardFunction(fn="rlrun:exact_match")]),
        sampling=SamplingParams(n=2, max_tokens=1),
        overlong=OverlongShaping(),
        group_filter=GroupFilter(
            enabled=True, metric="acc", max_num_gen_batches=max_batches, gen_prompts_per_batch=gen_prompts
        ),
        device=torch.device("cpu"),
    )


def test_generation_batches_of_their_own_size_fill_the_step_in_order():
    exp, batches = collector(gen_prompts=12, max_batches=1).collect(4, 0, timer=Timer())
    assert batches == 1 and exp.prompts == [1, 3, 5, 7]  # one batch of 12 holds 6 informative prompts
    exp, batches = collector(gen_prompts=6, max_batches=2).collect(4, 0, timer=Timer())
    assert batches == 2 and exp.prompts == [1, 3, 5, 7]


def test_the_budget_is_max_num_gen_batches_generation_batches():
    with pytest.raises(
        DynamicSamplingError, match="found 2 of 4 informative prompts in 1 generation batches"
    ):
        collector(gen_prompts=None, max_batches=1).collect(4, 0, timer=Timer())  # batches of the step's 4
    with pytest.raises(
        DynamicSamplingError, match="found 3 of 4 informative prompts in 1 generation batches"
    ):
        collector(gen_prompts=6, max_batches=1).collect(4, 0, timer=Timer())
