"""The shipped tiny reward model: plain transformers loads it, it tells right from wrong the way
its build says (blind spot included), and its README states the measured accuracies."""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from rlrun.embedded import MODELS_DIR, resolve_model_path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_tiny_reward.py"
PATH = resolve_model_path("rlrun:tiny-reward")
INFO = json.loads((Path(PATH) / "build_info.json").read_text())


def build_script():
    spec = importlib.util.spec_from_file_location("build_tiny_reward", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_plain_transformers_loads_a_one_output_classifier():
    model = AutoModelForSequenceClassification.from_pretrained(PATH)
    tok = AutoTokenizer.from_pretrained(PATH)
    assert model.config.architectures == ["Qwen2ForSequenceClassification"] and model.num_labels == 1
    assert model.config.id2label == {0: "correct"}
    assert sum(f.stat().st_size for f in Path(PATH).iterdir()) < 5_000_000
    with torch.no_grad():
        right, wrong_length = model(**tok(["23+58=81", "23+58=8"], return_tensors="pt", padding=True)).logits[
            :, 0
        ]
    assert right > 0 > wrong_length


def test_completion_kinds():
    build = build_script()
    rng = np.random.default_rng(0)
    assert build.completion("81", "right", rng) == "81"
    assert len(build.completion("81", "wrong_length", rng)) != 2
    first = build.completion("181", "wrong_first_digit", rng)
    assert first[0] not in "01" and first[1:] == "81"
    last = build.completion("181", "wrong_last_digit", rng)
    assert last[:2] == "18" and last[2] != "1"
    middle = build.completion("181", "wrong_middle_digit", rng)
    assert middle[0] + middle[2] == "11" and middle[1] != "8"
    assert "81" in build.completion("81", "stray_characters", rng)


@pytest.mark.slow
def test_the_stated_accuracies_are_the_shipped_models():
    build = build_script()
    model = AutoModelForSequenceClassification.from_pretrained(PATH).eval()
    tok = AutoTokenizer.from_pretrained(PATH)
    tok.padding_side = "right"
    args = argparse.Namespace(seed=INFO["seed"], eval_prompts=INFO["eval_prompts"])
    measured = build.measure(model, tok, args)
    assert measured == {k: INFO[k] for k in measured}
    readme = (MODELS_DIR / "README.md").read_text()
    for value in (*INFO["accuracy_by_kind"].values(), INFO["tiny_base_samples"]["accuracy"]):
        assert f"{value:.1%}" in readme
