"""Python objects in a recipe given from Python: each named (an import path when one brings the
object back, else a python-object: name), accepted only at the keys that take its kind."""

import json

from rlrun.recipes.python_objects import Named, live_table, name_objects


class Environment:
    """An environment class (a module-level class of an importable module)."""


def test_an_importable_function_is_named_by_its_import_path():
    named = Named()
    assert name_objects({"fn": json.dumps}, ("reward", "functions", 0), named, "here") == {"fn": "json:dumps"}
    assert named.passed["json:dumps"].not_reproducible is None
    assert live_table(named.passed) == {}  # importing brings it back: nothing lives only in memory


def test_a_lambda_is_a_python_object_and_two_lambdas_two_names():
    first, second = (lambda p, c, g: [1.0]), (lambda p, c, g: [0.0])
    named = Named()
    given = [first, {"fn": second, "weight": 0.5}, first]  # a bare function is an entry (TRL's reward_funcs)
    assert name_objects(given, ("reward", "functions"), named, "here") == [
        {"fn": "python-object:<lambda>"},
        {"fn": "python-object:<lambda>#2", "weight": 0.5},
        {"fn": "python-object:<lambda>"},  # the same object keeps its name
    ]
    assert live_table(named.passed) == {"python-object:<lambda>": first, "python-object:<lambda>#2": second}
    why = named.passed["python-object:<lambda>"].not_reproducible
    assert "made inside a function" in why


def test_a_function_of_main_is_described_and_why_it_cannot_come_back():
    def score(prompts, completions, ground_truths):
        return [1.0] * len(completions)

    score.__module__, score.__qualname__ = "__main__", "score"  # as a script's function is
    named = Named()
    assert name_objects(score, ("reward", "functions", 0, "fn"), named, "here") == "python-object:score"
    passed = named.passed["python-object:score"]
    assert passed.description == {"kind": "function", "qualname": "score", "module": "__main__"}
    assert "defined in __main__" in passed.not_reproducible


def test_a_class_goes_where_a_class_is_taken_and_nowhere_else():
    named = Named()
    assert name_objects(Environment, ("agent", "environment"), named, "here").endswith(":Environment")
    refused = name_objects({"environment": json.dumps, "max_turns": object()}, ("agent",), named, "here")
    assert refused == {}  # both left out, each with a located issue
    assert [(i.key, i.file, i.code) for i in named.issues] == [
        ("agent.environment", "here", "python-object"),
        ("agent.max_turns", "here", "python-object"),
    ]
    assert "`agent.environment` takes a class" in named.issues[0].message
    assert "takes no Python object" in named.issues[1].message


def test_plain_values_stay_plain():
    from pathlib import PurePosixPath

    import numpy as np

    named = Named()
    given = {"lr": np.float32(0.5), "steps": np.int64(3), "dir": PurePosixPath("a/b"), "on": True, "x": None}
    assert name_objects(given, ("actor",), named, "here") == {
        "lr": 0.5,
        "steps": 3,
        "dir": "a/b",
        "on": True,
        "x": None,
    }
    assert named.passed == {} and named.issues == []


def test_rows_are_copied_and_named_by_their_content():
    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    named = Named()
    name = name_objects(rows, ("data", "source"), named, "here")
    assert name == name_objects(
        [dict(row) for row in rows], ("data", "val_source"), named, "here"
    )  # same content
    rows[0]["answer"] = "3"  # changing the list afterwards changes nothing
    passed = named.passed[name]
    assert passed.value == [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+2=", "answer": "4"}]
    assert (
        passed.description["rows"] == 2 and name == "python-object:data-" + passed.description["sha256"][:16]
    )
    assert name_objects(rows, ("data", "source"), named, "here") != name  # other content, other name
    assert name_objects(["a.jsonl", "b.jsonl"], ("data", "source"), named, "here") == ["a.jsonl", "b.jsonl"]


def test_a_loaded_model_is_written_to_a_cache_folder_named_by_its_content(tmp_path, monkeypatch):
    import torch
    from transformers import AutoModelForCausalLM

    from rlrun.embedded import resolve_model_path

    monkeypatch.setenv("RLRUN_CACHE", str(tmp_path))
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    named = Named()
    folder = name_objects(model, ("model", "path"), named, "here")
    passed = named.passed[folder]
    assert folder == str(tmp_path / "python-objects" / f"model-{passed.description['sha256'][:16]}")
    assert passed.not_reproducible is None and live_table(named.passed) == {}  # a folder brings it back
    again = AutoModelForCausalLM.from_pretrained(folder)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))
    assert (
        name_objects(again, ("model", "path"), Named(), "here") == folder
    )  # the same weights, the same folder
    with torch.no_grad():
        next(again.parameters()).add_(1.0)
    assert name_objects(again, ("model", "path"), Named(), "here") != folder
    refused = Named()
    name_objects(model, ("reward", "model"), refused, "here")
    assert [i.key for i in refused.issues] == ["reward.model"]
    name_objects(Environment, ("model", "path"), refused, "here")
    assert "`model.path` takes a loaded transformers model" in refused.issues[1].message


def test_a_model_that_cannot_be_written_is_a_located_error(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM

    from rlrun.embedded import resolve_model_path

    (tmp_path / "file").write_text("in the way")
    monkeypatch.setenv("RLRUN_CACHE", str(tmp_path / "file"))  # a file where the cache folder would be
    named = Named()
    model = AutoModelForCausalLM.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    assert name_objects({"path": model}, ("model",), named, "here") == {}
    (issue,) = named.issues
    assert (issue.key, issue.file) == (
        "model.path",
        "here",
    ) and "cannot be written to rlrun's cache" in issue.message
