"""Hints for unknown keys: verl's names point to rlrun's (one table with the converter)."""

import pytest

from rlrun.facts.verl_keys import TABLE, VERL_DEFAULTS, lookup
from rlrun.recipes.keys import all_keys, dotted, unknown_key_hint


@pytest.mark.parametrize(
    ("override", "hint"),
    [
        (
            "algorithm.adv_estimator=grpo",
            "`algorithm.adv_estimator` is verl's name for `algorithm.advantage`",
        ),
        ("actor_rollout_ref.rollout.n=8", "`actor_rollout_ref.rollout.n` is verl's name for `rollout.n`"),
        ("actor_rollout_ref.actor.optim.lr=1e-6", "verl's name for `actor.optimizer.lr`"),
        ("data.train_files=x.parquet", "`data.train_files` is verl's name for `data.source`"),
        ("data.max_response_length=512", "verl's name for `rollout.max_response_tokens`"),
        (
            "actor_rollout_ref.actor.ppo_mini_batch_size=64",
            "verl's name for `actor.mini_batch_samples` (verl counts prompts, rlrun samples: x rollout.n)",
        ),
        ("trainer.n_gpus_per_node=8", "no rlrun equivalent (no recipe key: `rlrun train --num-processes N`)"),
        ("critic.enable=true", "`critic.enable` is verl's name for `critic.enabled`"),
    ],
)
def test_verl_names_get_the_rlrun_name(write, errors, override, hint):
    write("r.yaml", "extends: grpo\n")
    (issue,) = errors("r.yaml", (override,))
    assert issue.code == "unknown-key" and hint in issue.message
    assert "`rlrun convert verl`" in issue.message


def test_a_verl_section_in_a_file_lists_its_keys(write, errors):
    write(
        "r.yaml",
        "extends: grpo\nactor_rollout_ref:\n  rollout:\n    n: 8\n  actor:\n    optim: {lr: 1.0e-6}\n",
    )
    (issue,) = errors("r.yaml")
    assert "`actor_rollout_ref.rollout.n` is verl's name for `rollout.n`" in issue.message
    assert "`actor_rollout_ref.actor.optim.lr` is verl's name for `actor.optimizer.lr`" in issue.message
    assert issue.line == 2


def test_typos_in_rlrun_sections_still_get_did_you_mean():
    assert unknown_key_hint(("data", "sourse")) == "did you mean `data.source` or `data.val_source`?"
    assert unknown_key_hint(("data", "foo"), 1) is None  # not a verl key either: no hint
    assert unknown_key_hint(("actor", "lr")) == "did you mean `actor.optimizer.lr` or `critic.optimizer.lr`?"


def test_a_moved_key_names_where_it_went(write, errors):
    write("r.yaml", "extends: ppo\ncritic:\n  warmup_steps: 3\n")
    (issue,) = errors("r.yaml")
    assert (
        issue.code == "unknown-key" and "moved to `actor.frozen_steps`" in issue.message and issue.line == 3
    )


def test_the_table_names_only_real_rlrun_keys():
    keys = {dotted(key) for key in all_keys()}
    assert {row.rlrun for row in TABLE.values() if row.rlrun} <= keys
    assert all(lookup(key) is not None for key in VERL_DEFAULTS)


def test_a_run_record_carries_a_moved_key_to_where_its_setting_went():
    from rlrun.recipes.keys import carry_moved_keys

    with_critic = {"critic": {"enabled": True, "warmup_steps": 3}}
    carry_moved_keys(with_critic)
    assert with_critic == {"critic": {"enabled": True}, "actor": {"frozen_steps": 3}}
    # without a critic the old key skipped nothing: no frozen steps
    without = {"critic": {"enabled": False, "warmup_steps": 3}, "actor": {"lr": 1}}
    carry_moved_keys(without)
    assert without == {"critic": {"enabled": False}, "actor": {"lr": 1}}
