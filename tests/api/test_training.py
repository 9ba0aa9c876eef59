"""rlrun.train / rlrun.resume on the embedded tiny model: a callback's stop and a resume end
exactly like an uninterrupted run (as the kill -9 test in tests/training/test_end_to_end.py
compares), two trains in one process, a raising callback fails the run naming itself."""

import json

import pytest

import rlrun
from tests.training.test_end_to_end import records, without_clock


def reward_of_length(most: int):
    def few_chars(prompts, completions, ground_truths, **extra):
        """A reward no import path names (a closure): short answers score."""
        return [1.0 if len(c) < most else 0.0 for c in completions]

    return few_chars


few_chars = reward_of_length(4)


SMALL = {
    "trainer.total_steps": 4,
    "trainer.prompts_per_step": 4,
    "trainer.eval.prompts": 8,
    "trainer.eval.every_steps": 0,
    "trainer.checkpoint.every_steps": 2,
    "actor.mini_batch_samples": 16,
    "actor.micro_batch_samples": 8,
    "logging.console.enabled": False,
    "reward.functions": [few_chars],
}


class StopAt(rlrun.Callback):
    def __init__(self, step: int):
        self.step, self.events = step, []

    def on_train_start(self, state):
        self.events.append(("train_start", state.step))

    def on_rollout(self, state, rollout):
        self.events.append(
            ("rollout", rollout.step, len(rollout.prompts), len(rollout.completions), len(rollout.rewards))
        )

    def on_step_end(self, state, metrics):
        self.events.append(("step_end", state.step, "actor/lr" in metrics))
        if state.step == self.step:
            state.stop("seen enough")

    def on_train_end(self, state):
        self.events.append(("train_end", state.status))


@pytest.mark.slow
def test_a_callback_stop_and_a_resume_end_like_an_uninterrupted_run(tmp_path):
    straight = rlrun.train({"extends": "grpo"}, SMALL, run_dir=tmp_path / "straight")
    assert (straight.status, straight.step) == ("finished", 4)
    assert straight.checkpoint == tmp_path / "straight" / "checkpoints" / "step_000004"
    assert straight.metrics["step"] == 4 and "val/accuracy" in straight.metrics

    stopper = StopAt(2)
    stopped = rlrun.train({"extends": "grpo"}, SMALL, run_dir=tmp_path / "stopped", callbacks=[stopper])
    assert (stopped.status, stopped.step, stopped.metrics["step"]) == ("interrupted", 2, 2)
    n = 8  # grpo's rollout.n: 4 prompts x 8 rows, each row with its prompt
    assert stopper.events == [
        ("train_start", 0),
        ("rollout", 1, 4 * n, 4 * n, 4 * n),
        ("step_end", 1, True),
        ("rollout", 2, 4 * n, 4 * n, 4 * n),
        ("step_end", 2, True),
        ("train_end", "interrupted"),
    ]
    meta = json.loads((tmp_path / "stopped" / "meta.json").read_text())
    assert (
        meta["status"] == "interrupted"
        and meta["overrides"][-1] == "reward.functions=[{fn: 'python-object:few_chars'}]"
    )
    assert [item["name"] for item in meta["python_objects"]] == ["python-object:few_chars"]

    with pytest.raises(rlrun.RecipeError, match=r"reward.functions.0.fn.*pass the object again"):
        rlrun.resume(tmp_path / "stopped")  # the reward lived in this process only... unless named again
    resumed = rlrun.resume(tmp_path / "stopped", {"reward.functions": [few_chars]})
    assert (resumed.status, resumed.step) == ("finished", 4)
    resumes = json.loads((tmp_path / "stopped" / "meta.json").read_text())["resumes"]
    assert [item["name"] for item in resumes[-1]["python_objects"]] == ["python-object:few_chars"]
    assert without_clock(records(tmp_path / "stopped")) == without_clock(records(tmp_path / "straight"))
    with pytest.raises(rlrun.RunFinished, match="Nothing to resume"):
        rlrun.resume(tmp_path / "stopped", {"reward.functions": [few_chars]})


class Broken(rlrun.Callback):
    def on_step_end(self, state, metrics):
        raise KeyError("reward/accuracy")


@pytest.mark.slow
def test_a_raising_callback_fails_the_run_and_names_itself(tmp_path):
    with pytest.raises(
        rlrun.CallbackError, match="callback Broken raised at step_end: KeyError: 'reward/accuracy'"
    ):
        rlrun.train("grpo", SMALL, run_dir=tmp_path / "r", callbacks=[Broken()])
    assert json.loads((tmp_path / "r" / "meta.json").read_text())["status"] == "failed"


def test_an_existing_run_directory_is_refused_before_anything_loads(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "notes.txt").write_text("mine")
    with pytest.raises(rlrun.RecipeError, match="run_dir"):
        rlrun.train("grpo", SMALL, run_dir=tmp_path / "r")
    assert (tmp_path / "r" / "notes.txt").read_text() == "mine"
    with pytest.raises(TypeError, match="give them to rlrun.load_recipe"):
        rlrun.train(rlrun.load_recipe("grpo"), {"rollout.n": 4})


def test_meta_json_records_the_python_objects_a_run_was_given(tmp_path):
    from rlrun.records.record import PythonObject
    from rlrun.training.run import python_objects

    loaded = rlrun.load_recipe("grpo", {"reward.functions": [few_chars, json.dumps]})
    assert python_objects(loaded) == [
        PythonObject(
            name="python-object:few_chars",
            kind="function",
            qualname="reward_of_length.<locals>.few_chars",
            module=__name__,
            not_reproducible="`reward_of_length.<locals>.few_chars` is made inside a function (a lambda or a "
            "closure): no import path names it",
        ),
        PythonObject(name="json:dumps", kind="function", qualname="dumps", module="json"),
    ]


@pytest.mark.slow
def test_rows_given_as_data_train_and_a_resume_with_other_rows_is_refused(tmp_path):
    rows = [{"prompt": f"{a}+{b}=", "answer": str(a + b)} for a in range(10, 30) for b in range(10, 20)]
    given = {**SMALL, "trainer.total_steps": 2, "data.source": rows, "data.val_source": rows[:20]}
    result = rlrun.train("grpo", given, run_dir=tmp_path / "r")
    assert (result.status, result.step) == ("finished", 2) and 0 <= result.metrics["val/accuracy"] <= 1
    recorded = json.loads((tmp_path / "r" / "meta.json").read_text())["python_objects"]
    assert [(item["kind"], item["rows"]) for item in recorded if item["kind"] == "data"] == [
        ("data", 200),
        ("data", 20),
    ]
    again = {"trainer.total_steps": 3, "reward.functions": [few_chars], "data.val_source": rows[:20]}
    with pytest.raises(rlrun.RecipeError) as refused:
        rlrun.resume(tmp_path / "r", {**again, "data.source": rows[:-1]})
    (issue,) = refused.value.issues
    assert (issue.key, issue.code) == ("data.source", "resume-changed")
    assert rlrun.resume(tmp_path / "r", {**again, "data.source": rows}).step == 3


def test_a_sharding_strategy_is_refused_in_this_one_process(tmp_path):
    with pytest.raises(rlrun.RecipeError, match="trainer.strategy"):
        rlrun.train("grpo", {**SMALL, "trainer.strategy": "fsdp2"}, run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


IMPORTABLE = {**SMALL, "reward.functions": [{"fn": "rlrun:exact_match"}], "trainer.total_steps": 2}


@pytest.mark.slow
def test_several_processes_train_as_the_command_does(tmp_path):
    """num_processes=2: `rlrun train --num-processes 2` on the recipe written as a file (DDP over
    gloo here); the result is read from the run's record."""
    result = rlrun.train("grpo", IMPORTABLE, run_dir=tmp_path / "r", num_processes=2)
    assert (result.status, result.step, result.run_dir) == ("finished", 2, tmp_path / "r")
    meta = json.loads((tmp_path / "r" / "meta.json").read_text())
    assert (meta["setup"]["processes"], meta["setup"]["strategy"]) == (2, "ddp")
    assert result.metrics == records(tmp_path / "r")[-1] and result.checkpoint.name == "step_000002"


def test_several_processes_take_no_callbacks_and_no_object_an_import_path_cannot_bring(tmp_path):
    with pytest.raises(ValueError, match="callbacks run in the calling process"):
        rlrun.train("grpo", IMPORTABLE, run_dir=tmp_path / "a", num_processes=2, callbacks=[StopAt(1)])
    with pytest.raises(rlrun.RecipeError, match="cannot reach the launched processes"):
        rlrun.train("grpo", SMALL, run_dir=tmp_path / "b", num_processes=2)  # few_chars is a closure
    with pytest.raises(rlrun.RecipeError, match="--num-processes"):
        rlrun.train("grpo", IMPORTABLE, run_dir=tmp_path / "c", num_processes=3)  # 4 prompts over 3
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
def test_a_loaded_model_trains_and_the_run_resumes_from_its_files_alone(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rlrun.embedded import resolve_model_path

    monkeypatch.setenv("RLRUN_CACHE", str(tmp_path / "cache"))
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    given = {**SMALL, "trainer.total_steps": 2, "model.path": model, "model.tokenizer": "rlrun:tiny-base"}
    assert rlrun.train("grpo", given, run_dir=tmp_path / "r").status == "finished"
    (recorded,) = [
        o
        for o in json.loads((tmp_path / "r" / "meta.json").read_text())["python_objects"]
        if o["kind"] == "model"
    ]
    assert recorded["qualname"] == "Qwen2ForCausalLM" and recorded["not_reproducible"] is None
    resumed = rlrun.resume(tmp_path / "r", {"trainer.total_steps": 3, "reward.functions": [few_chars]})
    assert resumed.step == 3  # the model is its cache folder: nothing to give again


@pytest.mark.slow
@pytest.mark.parametrize("launched", [False, True])
def test_a_run_lets_go_of_its_models_unless_its_process_ends_next(tmp_path, monkeypatch, launched):
    """A caller that goes on gets the models' memory back; a launched process keeps them until it
    ends (`end_launched_process`): collecting DDP's would destroy its gloo group."""
    from rlrun.api.training import train_loaded
    from rlrun.facts.launched import RELAUNCH_ENV
    from rlrun.training.run import RunOptions

    monkeypatch.delenv(RELAUNCH_ENV, raising=False)
    if launched:
        monkeypatch.setenv(RELAUNCH_ENV, "1")
    loaded = rlrun.load_recipe("grpo", {**SMALL, "trainer.total_steps": 1})
    run = train_loaded(loaded, RunOptions(run_dir=tmp_path / "r"), say=lambda text: None)
    assert run.status == "finished"
    assert hasattr(run.session, "models") == launched
