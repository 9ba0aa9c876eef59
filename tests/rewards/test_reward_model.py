"""Reward models as reward functions: scores equal a hand-run forward with the reward model's
own tokenizer (and chat template), batching changes nothing, labels/probabilities/normalisation
are as documented, weights combine with rule rewards, and bad entries fail validation."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, models
from transformers import AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification

from rlrun.embedded import resolve_model_path
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe
from rlrun.rewards import RewardCombiner
from rlrun.rewards.reward_model import RewardModelScorer, check_config, reward_model_name
from rlrun.schema.reward import RewardFunction, RewardModel

PROMPTS = ["23+58=", "7+5=", "99+99=", "10+0="]
COMPLETIONS = ["81", "12", "198 and more", ""]
TRUTHS = ["81", "12", "198", "10"]


def classifier(path: Path, tokenizer: PreTrainedTokenizerFast, num_labels: int = 1, **config: object) -> Path:
    """A random two-layer Qwen2 sequence classifier saved with `tokenizer` at `path`."""
    torch.manual_seed(0)
    model = Qwen2ForSequenceClassification(
        Qwen2Config(
            vocab_size=len(tokenizer),
            hidden_size=32,
            intermediate_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=2,
            max_position_embeddings=64,
            pad_token_id=tokenizer.pad_token_id,
            num_labels=num_labels,
            **config,
        )
    )
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def policy_tokenizer() -> PreTrainedTokenizerFast:
    return AutoTokenizer.from_pretrained(resolve_model_path("rlrun:tiny-base"))


def other_tokenizer() -> PreTrainedTokenizerFast:
    """A tokenizer unlike the policy's: characters numbered in reverse, no <bos> added."""
    chars = "0123456789+-*/=().,?: abcdefghijklmnopqrstuvwxyzA<|>_"
    vocab = {"[PAD]": 0, "[EOS]": 1, "[UNK]": 2} | {c: 3 + i for i, c in enumerate(reversed(chars))}
    return PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="[UNK]")),
        pad_token="[PAD]",
        eos_token="[EOS]",
        unk_token="[UNK]",
    )


def hand_forward(path: Path, text: str, add_special_tokens: bool = True) -> torch.Tensor:
    """One unpadded sequence through the classifier: its logits row."""
    tok = AutoTokenizer.from_pretrained(path)
    model = Qwen2ForSequenceClassification.from_pretrained(path).eval()
    ids = tok(text, add_special_tokens=add_special_tokens, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(input_ids=ids).logits[0]


def test_scores_equal_a_hand_run_forward_on_prompt_plus_response(tmp_path):
    path = classifier(tmp_path / "rm", policy_tokenizer())
    scores = RewardModelScorer(RewardModel(model=str(path)))(PROMPTS, COMPLETIONS, TRUTHS)
    expected = [hand_forward(path, p + c)[0].item() for p, c in zip(PROMPTS, COMPLETIONS)]
    assert scores == pytest.approx(expected, abs=1e-5)
    assert len(set(scores)) == len(scores)  # the inputs differ, and so do the scores


def test_batch_size_does_not_change_the_scores(tmp_path):
    path = classifier(tmp_path / "rm", policy_tokenizer())
    prompts, completions = PROMPTS * 3, [c + "1" * i for i, c in enumerate(COMPLETIONS * 3)]  # many lengths
    one = RewardModelScorer(RewardModel(model=str(path), batch_size=1))(prompts, completions, TRUTHS * 3)
    for batch_size in (5, 64):
        batched = RewardModelScorer(RewardModel(model=str(path), batch_size=batch_size))(
            prompts, completions, TRUTHS * 3
        )
        assert batched == pytest.approx(one, abs=1e-5)


def test_the_reward_models_own_tokenizer_and_chat_template_are_used(tmp_path):
    tok = other_tokenizer()
    tok.chat_template = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"
    path = classifier(tmp_path / "rm", tok)
    scorer = RewardModelScorer(RewardModel(model=str(path)))
    assert scorer.text("23+58=", "81") == "<|user|>23+58=<|assistant|>81"
    scores = scorer(PROMPTS[:2], COMPLETIONS[:2], TRUTHS[:2])
    expected = [
        hand_forward(path, scorer.text(p, c), add_special_tokens=False)[0].item()
        for p, c in zip(PROMPTS[:2], COMPLETIONS[:2])
    ]
    assert scores == pytest.approx(expected, abs=1e-5)
    # the policy's token ids would have meant other characters to this model
    assert policy_tokenizer()("7")["input_ids"] != tok("7")["input_ids"]


def test_label_probability_and_fixed_normalisation(tmp_path):
    path = classifier(
        tmp_path / "rm",
        policy_tokenizer(),
        num_labels=2,
        id2label={0: "bad", 1: "good"},
        label2id={"bad": 0, "good": 1},
    )
    logits = torch.stack([hand_forward(path, p + c) for p, c in zip(PROMPTS, COMPLETIONS)])
    good = RewardModelScorer(RewardModel(model=str(path), label="good"))(PROMPTS, COMPLETIONS, TRUTHS)
    assert good == pytest.approx(logits[:, 1].tolist(), abs=1e-5)
    entry = RewardModel(model=str(path), label=1, score="probability", shift=0.5, scale=0.25)
    normalised = RewardModelScorer(entry)(PROMPTS, COMPLETIONS, TRUTHS)
    assert normalised == pytest.approx(((logits.softmax(-1)[:, 1] - 0.5) / 0.25).tolist(), abs=1e-5)
    one_output = classifier(tmp_path / "rm1", policy_tokenizer())
    logit = torch.stack([hand_forward(one_output, p + c) for p, c in zip(PROMPTS, COMPLETIONS)])[:, 0]
    sigmoid = RewardModelScorer(RewardModel(model=str(one_output), score="probability"))(
        PROMPTS, COMPLETIONS, TRUTHS
    )
    assert sigmoid == pytest.approx(logit.sigmoid().tolist(), abs=1e-6)


def test_a_reward_model_combines_with_rule_rewards_by_weight(tmp_path):
    path = classifier(tmp_path / "judge", policy_tokenizer())
    rm = RewardModelScorer(RewardModel(model=str(path)))(PROMPTS, COMPLETIONS, TRUTHS)
    reward = RewardCombiner(
        [RewardFunction(fn="rlrun:exact_match", weight=0.0), RewardModel(model=str(path), weight=2.0)]
    )
    out = reward(PROMPTS, COMPLETIONS, TRUTHS, data_source=["x"] * 4)
    assert reward.names == ["exact_match", "judge"]
    assert out.scores.tolist() == pytest.approx([2 * s for s in rm], abs=1e-5)
    assert out.components["exact_match"].tolist() == [1.0, 1.0, 0.0, 0.0]
    assert out.acc.tolist() == [1.0, 1.0, 0.0, 0.0]  # acc: the first function's, the rule


def test_names_and_config_checks():
    assert reward_model_name(RewardModel(model="rlrun:tiny-reward")) == "tiny-reward"
    assert reward_model_name(RewardModel(model="org/rm-7b/")) == "rm-7b"
    assert reward_model_name(RewardModel(model="org/rm-7b", name="judge")) == "judge"
    two = {"architectures": ["XForSequenceClassification"], "id2label": {"0": "bad", "1": "good"}}
    assert check_config(two, "good") is None and check_config(two, 1) is None
    assert "2 outputs (bad, good)" in check_config(two, None)
    assert "out of range" in check_config(two, 2)
    assert "not one of the classifier's labels (bad, good)" in check_config(two, "fine")
    assert "not a sequence classifier" in check_config({"architectures": ["XForCausalLM"]}, None)
    assert check_config({"num_labels": 1}, None) is None


def one_output(tmp_path: Path) -> Path:
    path = tmp_path / "one"
    return path if path.is_dir() else classifier(path, policy_tokenizer())


def errors_of(*entries: str) -> list:
    with pytest.raises(RecipeError) as info:
        load_recipe("grpo", [f"reward.functions=[{', '.join(entries)}]"])
    return [(issue.key, issue.code, issue.message) for issue in info.value.issues]


def test_validation_before_any_model_loads(tmp_path):
    two = classifier(tmp_path / "two", policy_tokenizer(), num_labels=2)
    (tmp_path / "empty").mkdir()
    found = errors_of(
        "{model: rlrun:tiny-base}",
        f"{{model: {two}}}",
        f"{{model: {two}, label: 5}}",
        "{model: rlrun:no-such}",
        f"{{model: {tmp_path / 'empty'}}}",
        f"{{model: {two}, label: 0, batch_size: 0, fn: rlrun:exact_match}}",
    )
    keys = [key for key, _, _ in found]
    assert "reward.functions.0.model" in keys  # a causal LM
    assert ("reward.functions.1.label", "reward-model") in [
        (k, c) for k, c, _ in found
    ]  # 2 outputs, no label
    assert any(k == "reward.functions.2.label" and "out of range" in m for k, _, m in found)
    assert any(k == "reward.functions.3.model" and "unknown embedded model" in m for k, _, m in found)
    assert any(k == "reward.functions.4.model" and "no config.json" in m for k, _, m in found)
    assert ("reward.functions.5.batch_size", "out-of-range") in [(k, c) for k, c, _ in found]
    assert ("reward.functions.5.fn", "unknown-key") in [(k, c) for k, c, _ in found]
    # an unknown key of a reward-model entry is checked against that entry's keys, not a function's
    (typo,) = errors_of("{fn: rlrun:exact_match}", f"{{model: {one_output(tmp_path)}, batch_sise: 4}}")
    assert (
        typo[0] == "reward.functions.1.batch_sise"
        and "did you mean `reward.functions.1.batch_size`" in typo[2]
    )
    one = one_output(tmp_path)
    recipe = load_recipe(
        "grpo", [f"reward.functions=[{{fn: rlrun:exact_match, weight: 0}}, {{model: {one}}}]"]
    )
    assert recipe.recipe.reward.functions[1].batch_size == 32
