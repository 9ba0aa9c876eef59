"""The `rlrun` command line: exit codes and no tracebacks through a real subprocess; output in-process."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from rlrun.cli import app
from rlrun.recipes import builtin_names, load_recipe

runner = CliRunner()


def rlrun(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The CLI as a user runs it: a fresh process, its real exit code and streams."""
    command = [sys.executable, "-c", "from rlrun.cli import app; app(prog_name='rlrun')", *args]
    return subprocess.run(command, check=False, cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def bad_recipe(tmp_path: Path) -> Path:
    path = tmp_path / "bad.yaml"
    path.write_text("extends: grpo\nrollout:\n  temprature: 0.7\nactor:\n  clip_ratio_c: 0.5\n")
    return path


def test_validate_a_valid_recipe_exits_0(tmp_path):
    result = rlrun("validate", "dapo", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "is a valid recipe" in result.stdout
    assert "grpo × vanilla × no KL + dynamic sampling (acc) + overlong shaping (4 tokens)" in " ".join(
        result.stdout.split()
    )
    assert "Batch plan per step" in result.stdout and "optimizer steps" in result.stdout


def test_validate_errors_exit_2_without_traceback(tmp_path, bad_recipe):
    result = rlrun("validate", str(bad_recipe), "rollout.top_p=0", cwd=tmp_path)
    assert result.returncode == 2
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    text = " ".join(result.stderr.replace("│", " ").split())
    assert "3 errors" in text
    assert (
        "bad.yaml, line 3, column 3, `rollout.temprature`: unknown key; did you mean `rollout.temperature`?"
        in text
    )
    assert "bad.yaml, line 5, column 3, `actor.clip_ratio_c`: value out of range." in text
    assert "command-line override `rollout.top_p=0`, `rollout.top_p`: value out of range." in text


def test_missing_recipe_exits_2_without_traceback(tmp_path):
    result = rlrun("validate", "no_such_recipe.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    assert "the recipe file does not exist" in result.stderr


def test_validate_json_and_strict(tmp_path, bad_recipe):
    result = rlrun("validate", str(bad_recipe), "--json", cwd=tmp_path)
    assert result.returncode == 2
    report = json.loads(result.stdout)
    assert report["valid"] is False
    assert [(e["key"], e["line"], e["code"]) for e in report["errors"]] == [
        ("rollout.temprature", 3, "unknown-key"),
        ("actor.clip_ratio_c", 5, "out-of-range"),
    ]
    assert report["errors"][0]["text"].startswith("bad.yaml, line 3, column 3")

    result = rlrun("validate", "grpo", "actor.entropy_coef=0.01", "--json", "--strict", cwd=tmp_path)
    assert result.returncode == 2
    assert [e["code"] for e in json.loads(result.stdout)["errors"]] == ["entropy-with-groups"]


def test_validate_json_of_a_valid_recipe():
    result = runner.invoke(app, ["validate", "grpo", "algorithm.kl_in_reward.enabled=true", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["algorithm"]["kl_placement"] == "reward+loss"
    assert report["batch_plan"]["samples"] == 128
    assert report["batch_plan"]["optimizer_steps"] == 1
    assert [n["code"] for n in report["notices"]] == ["kl-twice"]


def test_validate_prints_notices_and_exits_0():
    result = runner.invoke(app, ["validate", "grpo", "algorithm.kl_in_reward.enabled=true"])
    assert result.exit_code == 0
    assert "1 notice" in result.stderr
    assert "applied twice" in " ".join(result.stderr.replace("│", " ").split())


def test_show_resolves_and_marks_provenance(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my.yaml").write_text("extends: dapo\ntrainer:\n  total_steps: 150\n")
    result = runner.invoke(app, ["show", "my.yaml", "rollout.temperature=0.9"])
    assert result.exit_code == 0, result.output
    resolved = yaml.safe_load(result.stdout)
    assert resolved["trainer"]["total_steps"] == 150
    assert resolved["algorithm"]["group_filter"]["enabled"] is True

    result = runner.invoke(app, ["show", "my.yaml", "rollout.temperature=0.9", "--provenance"])
    # the first line of each key name (rollout.temperature comes before trainer.eval.temperature)
    lines = {}
    for line in result.stdout.splitlines():
        lines.setdefault(line.split(":")[0].strip(), line)
    assert lines["total_steps"].endswith("# file my.yaml:3")
    assert lines["temperature"].endswith("# override rollout.temperature=0.9")
    assert lines["top_p"].endswith("# default")
    assert "# base recipe " in lines["clip_ratio_high"] and "dapo.yaml:" in lines["clip_ratio_high"]


def test_show_errors_exit_2(bad_recipe):
    result = runner.invoke(app, ["show", str(bad_recipe)])
    assert result.exit_code == 2
    assert "unknown key" in result.stderr


def test_schema_is_json_schema():
    result = runner.invoke(app, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "rlrun recipe"
    assert "extends" in schema["properties"]


def test_recipes_lists_and_copies(tmp_path):
    result = runner.invoke(app, ["recipes"])
    assert result.exit_code == 0
    for name in builtin_names():
        assert name in result.stdout
    # printed as text: rich markup would swallow the extra's `[real]`
    assert "pip install 'rlrun[real]'" in " ".join(result.stdout.split())
    assert "DAPO: clip-higher" in result.stdout

    target = tmp_path / "my.yaml"
    assert runner.invoke(app, ["recipes", "copy", "dapo", str(target)]).exit_code == 0
    assert target.read_text().startswith("extends: base")
    again = runner.invoke(app, ["recipes", "copy", "grpo", str(target)])
    assert again.exit_code == 2
    assert "already exists" in again.stderr
    assert target.read_text().startswith('extends: base\ndescription: "DAPO')
    unknown = runner.invoke(app, ["recipes", "copy", "nope", str(tmp_path / "x.yaml")])
    assert unknown.exit_code == 2 and "No built-in recipe 'nope'" in unknown.stderr


def test_components_lists_registered_names():
    result = runner.invoke(app, ["components"])
    assert result.exit_code == 0
    for name in ("advantage", "grpo", "policy_loss", "gspo", "rlrun:exact_match", "rollout_engine", "vllm"):
        assert name in result.stdout
    # printed as text: rich markup would swallow the extra's `[vllm]`
    assert "the `rlrun[vllm]` extra" in " ".join(result.stdout.split())


def test_validate_portable_checks_a_gpu_recipe_here_without_the_gpu():
    repo = Path(__file__).resolve().parents[1]  # the recipe's sample data is relative to the repo root
    recipe = "recipes/gsm8k/grpo_qwen2.5-0.5b.yaml"
    here = rlrun("validate", recipe, cwd=repo)  # no GPU (nor vLLM) on the machines tests run on
    assert here.returncode == 2 and "this machine cannot run the recipe" in " ".join(here.stderr.split())
    assert "Traceback" not in here.stderr
    assert rlrun("validate", "--portable", recipe, cwd=repo).returncode == 0


def _record_relaunch(monkeypatch) -> dict:
    """Replace the relaunch with one that records its arguments and exits 0 without training."""
    import rlrun.launch

    seen: dict = {}

    def relaunch(argv, topology, accelerate_config, strategy):
        seen.update(topology=topology, accelerate_config=accelerate_config, strategy=strategy)
        return 0

    monkeypatch.delenv("RLRUN_LAUNCHED", raising=False)
    monkeypatch.setattr(rlrun.launch, "relaunch_with_accelerate", relaunch)
    return seen


def test_train_relaunches_with_the_recipes_strategy(monkeypatch):
    from rlrun.launch import Topology

    seen = _record_relaunch(monkeypatch)
    result = runner.invoke(app, ["train", "grpo", "trainer.strategy=fsdp2", "--num-processes", "2"])
    assert result.exit_code == 0, result.output
    assert seen == {"topology": Topology(2), "accelerate_config": None, "strategy": "fsdp2"}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory as `rlrun train` leaves it, as far as resuming reads before training."""
    from rlrun.recipes.yaml_dump import to_yaml

    (tmp_path / "resolved.yaml").write_text(to_yaml(load_recipe("grpo", ["trainer.strategy=fsdp2"]).data))
    return tmp_path


@pytest.mark.parametrize("command", [["resume"], ["train", "--resume"]])
def test_resume_relaunches_with_the_topology_and_the_runs_strategy(monkeypatch, run_dir, command):
    from rlrun.launch import Topology

    seen = _record_relaunch(monkeypatch)
    topology = ["--num-processes", "4", "--num-machines", "2", "--machine-rank", "1"]
    config = run_dir.parent / "a.yaml"
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 8\n")  # the flags override it
    topology += [
        "--main-process-ip",
        "10.0.0.1",
        "--main-process-port",
        "29600",
        "--accelerate-config",
        str(config),
    ]
    result = runner.invoke(app, [*command, str(run_dir), *topology])
    assert result.exit_code == 0, result.output
    assert seen == {
        "topology": Topology(4, 2, 1, "10.0.0.1", 29600),
        "accelerate_config": config,
        "strategy": "fsdp2",
    }


def _refused(result) -> str:
    """A command refused before anything loaded: exit code 2, no traceback; its text on one line."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, (TypeError, ValueError))
    return " ".join(result.output.replace("│", " ").split())


def test_several_machines_without_a_process_count_are_refused_not_trained_alone(monkeypatch, tmp_path):
    seen = _record_relaunch(monkeypatch)
    machine = ["--num-machines", "2", "--machine-rank", "1", "--main-process-ip", "127.0.0.1"]
    text = _refused(runner.invoke(app, ["train", "grpo", "--run-dir", str(tmp_path / "run"), *machine]))
    assert "command-line override `--num-machines 2`, `--num-processes`: several machines need" in text
    assert not seen and not (tmp_path / "run").exists()
    text = _refused(runner.invoke(app, ["train", "grpo", "--num-machines", "2", "--num-processes", "2"]))
    assert "`--main-process-ip`: more than one machine needs --main-process-ip" in text
    assert "main_process_ip" not in text


def test_an_accelerate_config_file_sets_the_process_count(monkeypatch, tmp_path):
    from rlrun.launch import Topology

    seen = _record_relaunch(monkeypatch)
    config = tmp_path / "accelerate.yaml"
    config.write_text("distributed_type: MULTI_GPU\nnum_processes: 2\n")
    result = runner.invoke(app, ["train", "grpo", "--accelerate-config", str(config)])
    assert result.exit_code == 0, result.output
    assert seen == {"topology": Topology(2), "accelerate_config": config, "strategy": "ddp"}


def test_an_accelerate_config_asking_for_fsdp_on_the_cpu_is_refused_at_its_line(monkeypatch, tmp_path):
    seen = _record_relaunch(monkeypatch)
    config = tmp_path / "accelerate.yaml"
    config.write_text("num_processes: 2\ndistributed_type: FSDP\nfsdp_config:\n  fsdp_version: 2\n")
    text = _refused(
        runner.invoke(app, ["train", "grpo", "trainer.device=cpu", "--accelerate-config", str(config)])
    )
    assert f"{config}, line 2, column 1, `distributed_type`: Accelerate sets up FSDP only on GPUs" in text
    assert not seen


def test_a_sharding_strategy_in_one_process_is_refused_naming_the_flag(monkeypatch):
    seen = _record_relaunch(monkeypatch)
    text = _refused(runner.invoke(app, ["train", "grpo", "trainer.strategy=fsdp2"]))
    assert "`trainer.strategy`: fsdp2 shares the model among several processes" in text
    assert "--num-processes N" in text and not seen


def test_validate_says_what_it_cannot_check_of_a_sharding_strategy_and_refuses_lora_under_it():
    result = runner.invoke(app, ["validate", "grpo", "trainer.strategy=fsdp2"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert (
        "`trainer.strategy`: fsdp2 needs several processes, a number `rlrun validate` does not know" in text
    )
    text = _refused(runner.invoke(app, ["validate", "grpo", "trainer.strategy=fsdp2", "model.lora={r: 4}"]))
    assert "LoRA is not supported under FSDP2" in text


@pytest.mark.parametrize("command", [["resume"], ["train", "--resume"]])
def test_resume_passes_profile_on_to_the_run(monkeypatch, run_dir, command):
    import rlrun.cli.train

    seen = []
    monkeypatch.setattr(rlrun.cli.train, "_train", lambda loaded, options: seen.append(options))
    # one process: the fixture's fsdp2 would be refused here
    result = runner.invoke(app, [*command, str(run_dir), "trainer.strategy=ddp", "--profile"])
    assert result.exit_code == 0, result.output
    assert [(o.run_dir, o.resume, o.profile) for o in seen] == [(run_dir, True, True)]


@pytest.mark.parametrize("command", [["train", "grpo"], ["resume", "RUN_DIR"]])
def test_train_and_resume_check_the_process_split_before_launching(monkeypatch, run_dir, command):
    import rlrun.launch

    monkeypatch.delenv("RLRUN_LAUNCHED", raising=False)
    monkeypatch.setattr(rlrun.launch, "relaunch_with_accelerate", lambda *a, **k: pytest.fail("launched"))
    command = [str(run_dir) if arg == "RUN_DIR" else arg for arg in command]
    result = runner.invoke(app, [*command, "--num-processes", "3"])  # grpo: 16 prompts a step
    assert result.exit_code == 2
    assert "trainer.prompts_per_step" in result.output and "multiple of 3" in result.output


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    from rlrun.records.checkpoint import save_checkpoint
    from rlrun.training.models import load_causal_lm, load_tokenizer

    model, tokenizer = (
        load_causal_lm("rlrun:tiny-base", "float32", False),
        load_tokenizer("rlrun:tiny-base", False),
    )
    return save_checkpoint(tmp_path / "ckpts", 3, model=model, tokenizer=tokenizer, state={"step": 3})


def test_export_never_writes_into_an_existing_folder_without_overwrite(tmp_path, checkpoint):
    out = tmp_path / "model"
    out.mkdir()
    (out / "config.json").write_text("mine")
    result = runner.invoke(app, ["export", str(checkpoint), str(out)])
    assert result.exit_code == 2 and "already exists" in result.output
    assert [p.name for p in out.iterdir()] == ["config.json"] and (out / "config.json").read_text() == "mine"
    result = runner.invoke(app, ["export", str(checkpoint), str(out), "--overwrite"])
    assert result.exit_code == 0, result.output
    assert (out / "model.safetensors").is_file()


def test_export_refuses_a_file_even_with_overwrite(tmp_path, checkpoint):
    """transformers only warns that the path should be a folder, and writes nothing."""
    mine = tmp_path / "existing.txt"
    mine.write_text("mine")
    for flags in ([], ["--overwrite"]):
        text = _refused(runner.invoke(app, ["export", str(checkpoint), str(mine), *flags]))
        assert "cannot be the export's folder: it is a file, not a folder" in text
        assert "exported" not in text and mine.read_text() == "mine"
    text = _refused(runner.invoke(app, ["export", str(checkpoint), str(mine / "model"), "--overwrite"]))
    assert f"{mine} is a file, not a folder" in text


def test_export_of_a_damaged_checkpoint_names_the_file_and_exits_2(tmp_path, checkpoint):
    weights = checkpoint / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    result = rlrun("export", str(checkpoint), str(tmp_path / "out"), cwd=tmp_path)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert "the checkpoint is damaged" in result.stderr and "model.safetensors" in result.stderr
    assert not (tmp_path / "out").exists()


def test_a_file_in_the_working_directory_never_shadows_an_installed_package(tmp_path):
    (tmp_path / "torch.py").write_text("open('torch_py_ran', 'w').close()\n")
    (tmp_path / "my_rewards.py").write_text("def score(completion, answer, **kwargs):\n    return 1.0\n")
    (tmp_path / "r.yaml").write_text("extends: grpo\nreward:\n  functions: [{fn: 'my_rewards:score'}]\n")
    as_installed = [sys.executable, "-m", "rlrun", "validate", "r.yaml"]  # the console script's main()
    result = subprocess.run(
        as_installed, check=False, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "torch_py_ran").exists()  # the real torch was imported, not ./torch.py


def test_validate_no_import_runs_no_user_code_and_still_finds_missing_modules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # the CLI adds the working directory
    (tmp_path / "my_rewards.py").write_text(
        "open('imported', 'w').close()\ndef score(**kwargs):\n    return 1.0\n"
    )
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("open('imported', 'w').close()\n")
    (tmp_path / "pkg" / "plugin.py").write_text("open('imported', 'w').close()\n")
    recipe = "extends: grpo\nreward:\n  functions: [{fn: 'my_rewards:score'}]\nalgorithm:\n  plugins: [pkg.plugin]\n"
    (tmp_path / "r.yaml").write_text(recipe)
    result = runner.invoke(app, ["validate", "r.yaml", "--no-import"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "imported").exists()
    (tmp_path / "bad.yaml").write_text(
        recipe.replace("my_rewards", "my_rewardz").replace("plugin]", "plugn]")
    )
    result = runner.invoke(app, ["validate", "bad.yaml", "--no-import", "--json"])
    assert result.exit_code == 2
    assert sorted(e["message"] for e in json.loads(result.stdout)["errors"]) == [
        "the plugin module 'pkg.plugn' was not found",
        "the reward module 'my_rewardz' was not found",
    ]
    assert not (tmp_path / "imported").exists()
    assert rlrun("validate", "r.yaml", cwd=tmp_path).returncode == 0 and (tmp_path / "imported").exists()


def test_train_refuses_autocast_over_bfloat16_weights_before_loading_a_model(tmp_path):
    (tmp_path / "r.yaml").write_text(
        "extends: grpo\nmodel:\n  dtype: bfloat16\ntrainer:\n  autocast: bfloat16\n"
    )
    result = rlrun("train", "r.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stdout + result.stderr
    text = " ".join(result.stderr.replace("│", " ").split())
    assert "r.yaml, line 5, column 3, `trainer.autocast`: `trainer.autocast: bfloat16` computes in" in text
    assert "Found model.dtype: bfloat16" in text
    assert not (tmp_path / "runs").exists()  # refused before a run directory or a model


def test_a_refused_run_directory_is_named_by_the_handle_that_gave_it(tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    text = _refused(runner.invoke(app, ["train", "grpo", "--run-dir", str(taken)]))
    assert f"{taken}, `--run-dir`: the run directory already exists" in text
    assert "trainer.output_dir" not in text
    text = _refused(
        runner.invoke(app, ["train", "grpo", f"trainer.output_dir={tmp_path}", "--name", "taken"])
    )
    assert f"{taken}, `trainer.output_dir`: the run directory already exists" in text
    assert (taken / "notes.txt").read_text() == "mine"


def test_thousands_of_errors_show_each_kind_once_and_never_hide_the_last_mistake(tmp_path):
    """A generated recipe: 3000 entries with one misspelt key, and one other mistake at its end."""
    lines = [
        "extends: grpo",
        "reward:",
        "  functions:",
        *["    - {fn: 'rlrun:exact_match', wieght: 1}"] * 3000,
    ]
    (tmp_path / "big.yaml").write_text("\n".join([*lines, "trainer:", "  total_stepz: 5"]) + "\n")
    result = runner.invoke(app, ["validate", str(tmp_path / "big.yaml")])
    text = _refused(result)
    assert "3001 errors of 2 kinds" in text
    assert "line 4, column 33, `reward.functions.0.wieght`: unknown key; did you mean" in text
    assert "(2999 more like it: " in text and "line 5, column 33, `reward.functions.1.wieght`;" in text
    assert (
        "line 3005, column 3, `trainer.total_stepz`: unknown key; did you mean `trainer.total_steps`?" in text
    )
