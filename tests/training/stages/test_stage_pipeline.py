"""Stages and pipelines (rlrun/training/stages/base.py): the built-in order, what each recipe
runs, the checks on what a stage reads and writes, and a plugin stage inside a real step."""

from __future__ import annotations

import ast
import inspect
from dataclasses import replace

import pytest
import torch

from rlrun.recipes import load_recipe
from rlrun.training import loop
from rlrun.training.needs import needs_of
from rlrun.training.profiling import Timer
from rlrun.training.stages import STAGES, Pipeline, PipelineError, StepBatch, register_stage
from rlrun.training.stages.base import always

BUILT_IN = [
    "sample",
    "rollout_callbacks",
    "greedy_baseline",
    "update_parts",
    "reference",
    "old_log_probs",
    "sampler_log_probs",
    "sum_pi_squared",
    "teacher",
    "values",
    "token_rewards",
    "kl_rewards",
    "is_weights",
    "advantages",
    "update_critic",
    "update_actor",
    "lr_schedule",
    "sync_weights",
    "batch_metrics",
    "episode_metrics",
]


def test_the_built_in_stages_run_in_this_order_and_the_loop_docstring_names_each_in_order():
    names = [s.name for s in STAGES]
    assert names == BUILT_IN
    doc = loop.__doc__
    positions = [doc.index(f" {name} ") for name in BUILT_IN]
    assert positions == sorted(positions)


def test_the_training_step_is_a_short_orchestrator():
    source = inspect.getsource(loop.training_step)
    assert len(source.splitlines()) < 60
    assert not [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Constant) and n.value in BUILT_IN]


def _names(recipe: str, overrides: list[str] | None = None) -> list[str]:
    r = load_recipe(recipe, overrides or []).recipe
    return Pipeline.build(r, needs_of(r)).names()


LAST = ["advantages", "update_actor", "lr_schedule", "sync_weights", "batch_metrics"]
KL = ["update_parts", "reference"]  # the shipped grpo keeps a KL loss to the reference
NO_KL = ["actor.kl_loss.enabled=false"]


@pytest.mark.parametrize(
    ("recipe", "overrides", "expected"),
    [
        ("grpo", NO_KL, ["sample", "token_rewards", *LAST]),  # on-policy: old log-probs from the update
        ("grpo", [], ["sample", *KL, "token_rewards", *LAST]),
        (
            "grpo",
            [
                "algorithm.kl_in_reward.enabled=true",
                "actor.kl_loss.enabled=false",
                "actor.micro_batch_samples=64",
                "actor.mini_batch_samples=64",
            ],
            ["sample", *KL, "old_log_probs", "kl_rewards", *LAST],
        ),
        (
            "grpo",
            [*NO_KL, "rollout.importance_sampling.level=token"],
            ["sample", "update_parts", "old_log_probs", "token_rewards", "is_weights", *LAST],
        ),
        ("remax", [], ["sample", "greedy_baseline", *KL, "sampler_log_probs", "kl_rewards", *LAST]),
        (
            "ppo",
            [],
            ["sample", "values", "token_rewards", "advantages", "update_critic", *LAST[1:]],
        ),
        ("opd", [], ["sample", "teacher", "token_rewards", *LAST]),
        (
            "grpo",
            [*NO_KL, "algorithm.advantage=optimal_token_baseline"],
            ["sample", "sampler_log_probs", "sum_pi_squared", "token_rewards", *LAST],
        ),
    ],
)
def test_a_recipe_runs_the_stages_its_components_need(recipe, overrides, expected):
    assert _names(recipe, overrides) == expected


def _stage(name, reads=(), writes=(), uses=()):
    registered = []

    def run(ctx, b):
        """A test stage."""

    register_stage(name, reads=reads, writes=writes, uses=uses)(run)
    registered.append(STAGES.pop())  # kept out of the real registry
    return registered[0]


def test_a_stage_that_reads_what_no_earlier_stage_writes_is_refused_when_the_pipeline_is_built():
    r = load_recipe("grpo", []).recipe
    writer, reader = _stage("writer", writes=("advantages",)), _stage("reader", reads=("advantages",))
    assert Pipeline.build(r, needs_of(r), [writer, reader]).names() == ["writer", "reader"]
    with pytest.raises(
        PipelineError, match="stage 'reader' reads advantages, which no stage before it writes"
    ):
        Pipeline.build(r, needs_of(r), [reader, writer])
    optional = _stage("optional", uses=("values",))
    assert Pipeline.build(r, needs_of(r), [optional]).names() == ["optional"]


def test_a_stage_sees_only_the_fields_it_declared():
    stage = _stage("viewer", reads=("advantages",), writes=("returns", "my_field"))
    batch = StepBatch(step=3, timer=Timer())
    view = batch.view(stage)
    batch.advantages = torch.ones(1)
    assert view.advantages is batch.advantages and view.step == 3
    view.returns = torch.zeros(1)
    view.my_field = "plugin"  # a field of a plugin stage: kept in `extra`
    view.metrics |= {"x": 1.0}
    assert batch.returns is not None and batch.extra == {"my_field": "plugin"} and batch.metrics == {"x": 1.0}
    with pytest.raises(AttributeError, match="stage 'viewer' reads 'values', which it did not declare"):
        view.values  # noqa: B018
    with pytest.raises(AttributeError, match="stage 'viewer' writes 'advantages', which it did not declare"):
        view.advantages = None


def test_register_stage_places_a_stage_after_another_and_refuses_duplicates_and_unknown_places():
    def run(ctx, b):
        """Runs after the advantages."""

    register_stage("after_advantages", reads=("advantages",), after="advantages")(run)
    try:
        names = [s.name for s in STAGES]
        assert names[names.index("advantages") + 1] == "after_advantages"
        with pytest.raises(ValueError, match="already registered"):
            register_stage("after_advantages")(run)
        with pytest.raises(ValueError, match="after 'nowhere', which is not registered"):
            register_stage("lost", after="nowhere")(run)
    finally:
        STAGES[:] = [s for s in STAGES if s.name != "after_advantages"]


@pytest.fixture
def plugin_stage():
    """A plugin's stage, registered after the advantages: the share of positive advantages."""

    def positive_share(ctx, b):
        """The share of response tokens with a positive advantage."""
        mask = b.experience.seq.response_mask.bool()
        b.metrics |= {"plugin/positive_advantage_share": float((b.advantages[mask] > 0).float().mean())}

    register_stage("positive_share", reads=("experience", "advantages"), after="advantages")(positive_share)
    yield
    STAGES[:] = [s for s in STAGES if s.name != "positive_share"]


def test_a_registered_plugin_stage_runs_in_a_real_step_without_editing_it(plugin_stage):
    from rlrun.training.session import Session

    overrides = ["trainer.prompts_per_step=2", "actor.mini_batch_samples=16", "actor.micro_batch_samples=16"]
    recipe = load_recipe("grpo", overrides).recipe
    session = Session(recipe)
    assert "positive_share" in session.pipeline.names()
    metrics, _ = loop.training_step(session, 1)
    assert 0.0 <= metrics["plugin/positive_advantage_share"] <= 1.0


def test_a_stage_that_never_runs_is_left_out():
    r = load_recipe("grpo", []).recipe
    never = replace(_stage("never"), when=lambda recipe, needs: False)
    assert Pipeline.build(r, needs_of(r), [never, replace(_stage("yes"), when=always)]).names() == ["yes"]
