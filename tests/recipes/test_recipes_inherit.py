"""`extends`: built-in names and relative paths, chains, deep merge, lists replaced, cycles."""

from rlrun.recipes import load_recipe


def test_extends_a_builtin_by_name(write):
    path = write(
        "my.yaml",
        "extends: grpo\nrollout:\n  n: 4\nactor:\n  mini_batch_samples: 64\n  micro_batch_samples: 32\n",
    )
    loaded = load_recipe(path)
    assert loaded.recipe.algorithm.advantage == "grpo"
    assert loaded.recipe.actor.kl_loss.enabled is True  # from grpo.yaml
    assert loaded.recipe.rollout.n == 4
    assert loaded.recipe.rollout.max_response_tokens == 8  # from base.yaml
    assert "extends" not in loaded.data


def test_chain_of_relative_paths_deep_merges_mappings(write):
    write("shared/base.yaml", "extends: grpo\nactor:\n  optimizer:\n    lr: 3.0e-4\n    weight_decay: 0.1\n")
    write("shared/mid.yaml", "extends: base.yaml\nactor:\n  optimizer:\n    lr: 2.0e-4\n")
    path = write("exp/top.yaml", "extends: ../shared/mid.yaml\nactor:\n  clip_ratio_high: 0.28\n")
    recipe = load_recipe(path).recipe
    assert recipe.actor.optimizer.lr == 2.0e-4  # mid overrides shared/base
    assert recipe.actor.optimizer.weight_decay == 0.1  # kept from shared/base: mappings merge
    assert recipe.actor.kl_loss.enabled  # from the built-in grpo at the root of the chain
    assert recipe.actor.clip_ratio_high == 0.28


def test_lists_are_replaced_not_merged(write):
    write("parent.yaml", "reward:\n  functions:\n    - fn: rlrun:exact_match\n    - fn: rlrun:math_answer\n")
    path = write("child.yaml", "extends: ./parent.yaml\nreward:\n  functions:\n    - fn: rlrun:math_answer\n")
    functions = load_recipe(path).recipe.reward.functions
    assert [f.fn for f in functions] == ["rlrun:math_answer"]


def test_provenance_names_default_base_recipe_file_and_override(write):
    path = write("my.yaml", "extends: grpo\ntrainer:\n  total_steps: 7\n")
    loaded = load_recipe(path, ["rollout.temperature=0.9"])
    of = loaded.provenance.of
    assert of(("rollout", "n")).kind == "default"
    assert of(("actor", "kl_loss", "enabled")).kind == "base recipe"
    assert of(("actor", "kl_loss", "enabled")).file.endswith("grpo.yaml")
    source = of(("trainer", "total_steps"))
    assert (source.kind, source.file, source.line, source.column) == ("file", "my.yaml", 3, 3)
    assert of(("rollout", "temperature")).describe() == "override rollout.temperature=0.9"
    assert of(("logging", "wandb", "entity")).describe() == "default"


def test_cycle_is_reported(write, only_error):
    write("a.yaml", "extends: ./b.yaml\n")
    write("b.yaml", "extends: ./a.yaml\n")
    issue = only_error("a.yaml")
    assert issue.code == "extends-cycle"
    assert issue.format() == (
        "b.yaml, line 1, column 1, `extends`: `extends` forms a cycle: a.yaml -> b.yaml -> a.yaml. "
        "Fix: remove `extends` from one of these files."
    )


def test_self_extension_is_a_cycle(write, only_error):
    write("a.yaml", "rollout:\n  n: 16\nextends: a.yaml\n")
    issue = only_error("a.yaml")
    assert (issue.code, issue.line) == ("extends-cycle", 3)


def test_unknown_builtin_suggests_a_name(write, only_error):
    write("a.yaml", "extends: dapoo\n")
    issue = only_error("a.yaml")
    assert issue.code == "extends-unknown"
    assert issue.format().startswith(
        "a.yaml, line 1, column 1, `extends`: there is no built-in recipe 'dapoo'; did you mean `dapo`?"
    )


def test_missing_parent_file(write, only_error):
    write("a.yaml", "extends: ./nope.yaml\n")
    issue = only_error("a.yaml")
    assert issue.code == "extends-missing"
    assert "nope.yaml" in issue.message


def test_errors_are_located_in_the_file_that_wrote_the_value(write, only_error):
    write("parent.yaml", "rollout:\n  top_p: 2.0\n")
    write("child.yaml", "extends: ./parent.yaml\ntrainer:\n  total_steps: 5\n")
    issue = only_error("child.yaml")
    assert (issue.file, issue.line, issue.key) == ("parent.yaml", 2, "rollout.top_p")


def test_builtin_recipe_by_name_and_missing_file(write, only_error):
    assert load_recipe("dapo").recipe.algorithm.group_filter.enabled
    issue = only_error("nope.yaml")
    assert issue.code == "recipe-missing"
    assert "dapo" in issue.expected


def test_unreadable_file_is_an_issue(tmp_path, monkeypatch, only_error):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "latin.yaml").write_bytes(b"rollout:\n  n: \xff\n")
    issue = only_error("latin.yaml")
    assert issue.code == "recipe-unreadable"
    assert issue.format().startswith(
        "latin.yaml, line 2, column 6: the recipe is not UTF-8 text: byte 0xff cannot be decoded."
    )
