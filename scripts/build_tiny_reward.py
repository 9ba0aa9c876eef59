"""Rebuild rlrun's shipped tiny reward model (``rlrun:tiny-reward``) from a seed.

A 79k-parameter ``Qwen2ForSequenceClassification`` (one output: the logit that the completion
is right) with the tiny models' character tokenizer, trained from scratch with binary
cross-entropy on arithmetic prompts followed by a completion. Half the completions are the
right answer; the other half are wrong in one of four ways: the wrong number of digits, the
wrong first digit, the wrong last digit, or stray characters. A three-digit answer wrong only
in its middle digit is never shown. The model is imperfect on purpose, as learned rewards are:
too small and too briefly trained to add up, it learns the shape of an answer (length, stray
characters) and, partly, its first digit, and misses wrong later digits, which are most of a
weak policy's mistakes. Its accuracy on held-out
prompts (per kind of completion) and on ``rlrun:tiny-base``'s own samples is measured and
written to ``build_info.json``. Deterministic on CPU for a given seed and thread count.

    python scripts/build_tiny_reward.py                  # into rlrun/embedded/models/tiny-reward
    python scripts/build_tiny_reward.py --out /tmp/rm    # elsewhere
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedTokenizerFast,
    Qwen2Config,
    Qwen2ForSequenceClassification,
)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_tiny_models import MAX_POSITIONS, build_tokenizer, save_tokenizer  # the shared tokenizer

from rlrun.data import build_prompt_dataset
from rlrun.embedded import resolve_model_path
from rlrun.rollout import ROLLOUT_ENGINES, SamplingParams
from rlrun.tasks.arithmetic import ArithmeticTask

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "rlrun" / "embedded" / "models" / "tiny-reward"
KINDS = (
    "right",
    "wrong_length",
    "wrong_first_digit",
    "wrong_last_digit",
    "stray_characters",
    "wrong_middle_digit",
)
TRAINED_KINDS = KINDS[:5]  # wrong_middle_digit is held out of training: the blind spot
STRAY = "+-*/=().,?: abcxyz"


def completion(answer: str, kind: str, rng: np.random.Generator) -> str:
    """A completion of `kind` for the right `answer` (a non-negative integer as text)."""
    if kind == "right":
        return answer
    if kind == "wrong_length":
        length = int(rng.choice([n for n in range(1, 5) if n != len(answer)]))
        return str(rng.integers(10 ** (length - 1) if length > 1 else 0, 10**length))
    if kind == "wrong_first_digit":
        if len(answer) == 1:  # one digit: any other digit
            return str(rng.choice([d for d in range(10) if str(d) != answer]))
        first = rng.choice([d for d in range(1, 10) if str(d) != answer[0]])
        return f"{first}{answer[1:]}"
    if kind == "stray_characters":
        extra = "".join(rng.choice(list(STRAY + "0123456789"), size=int(rng.integers(1, 4))))
        return answer + extra if rng.random() < 0.5 else extra + answer
    position = len(answer) - 1 if kind == "wrong_last_digit" else 1  # wrong_middle_digit: 3+ digits
    digit = rng.choice([d for d in range(10) if str(d) != answer[position]])
    return f"{answer[:position]}{digit}{answer[position + 1 :]}"


def labelled(
    records: list[dict], kinds: tuple[str, ...], rng: np.random.Generator
) -> tuple[list[str], list[str]]:
    """Half right, half wrong (the wrong kinds equally often): (texts, kinds)."""
    texts, drawn = [], []
    for record in records:
        kind = "right" if rng.random() < 0.5 else str(rng.choice(kinds[1:]))
        texts.append(record["prompt"] + completion(record["answer"], kind, rng))
        drawn.append(kind)
    return texts, drawn


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int) -> Qwen2ForSequenceClassification:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=MAX_POSITIONS,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        num_labels=1,
        id2label={0: "correct"},
        label2id={"correct": 0},
        dtype="float32",
    )
    torch.manual_seed(seed)
    return Qwen2ForSequenceClassification(config)


def scores(
    model: Qwen2ForSequenceClassification, tokenizer: PreTrainedTokenizerFast, texts: list[str]
) -> torch.Tensor:
    with torch.no_grad():
        batch = tokenizer(texts, padding=True, return_tensors="pt")
        return model(**batch).logits[:, 0]


def policy_samples(prompts: int, seed: int) -> tuple[list[str], list[bool]]:
    """rlrun:tiny-base's own completions (8 per validation prompt, temperature 1) and whether each
    is right: the responses the reward model meets at the start of RL."""
    path = resolve_model_path("rlrun:tiny-base")
    policy, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    records = ArithmeticTask().validation(prompts)
    data = build_prompt_dataset(records, tok)
    batch = ROLLOUT_ENGINES.get("hf")(policy, tok).generate(
        data.prompt_ids, SamplingParams(n=8, max_tokens=8, temperature=1.0, seed=seed)
    )
    answers = tok.batch_decode(batch.response_ids, skip_special_tokens=True)
    texts = [records[i // 8]["prompt"] + a for i, a in enumerate(answers)]
    right = [a.strip() == records[i // 8]["answer"] for i, a in enumerate(answers)]
    return texts, right


def measure(
    model: Qwen2ForSequenceClassification, tokenizer: PreTrainedTokenizerFast, args: argparse.Namespace
) -> dict:
    """Held-out accuracy (score > 0 means right): per kind on validation prompts, and on the
    base policy's samples (overall, on its right and on its wrong answers)."""
    rng = np.random.default_rng(args.seed + 1)
    records = ArithmeticTask().validation(args.eval_prompts)
    by_kind = {}
    for kind in KINDS:
        usable = [r for r in records if kind != "wrong_middle_digit" or len(r["answer"]) >= 3]
        texts = [r["prompt"] + completion(r["answer"], kind, rng) for r in usable]
        predicted_right = scores(model, tokenizer, texts) > 0
        by_kind[kind] = round(float((predicted_right == (kind == "right")).float().mean()), 4)
    texts, right = policy_samples(args.eval_prompts, args.seed)
    predicted = scores(model, tokenizer, texts) > 0
    truth = torch.tensor(right)
    return {
        "accuracy_by_kind": by_kind,
        "tiny_base_samples": {
            "samples": len(texts),
            "right_fraction": round(float(truth.float().mean()), 4),
            "accuracy": round(float((predicted == truth).float().mean()), 4),
            "accuracy_on_right": round(float(predicted[truth].float().mean()), 4),
            "accuracy_on_wrong": round(float((~predicted[~truth]).float().mean()), 4),
        },
    }


def train(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    tokenizer = build_tokenizer()
    tokenizer.padding_side = "right"  # the classifier pools the last non-padding token
    rng = np.random.default_rng(args.seed)
    texts, kinds = labelled(ArithmeticTask(seed=args.seed).train(args.train_size), TRAINED_KINDS, rng)
    encoded = tokenizer(texts, padding=True, return_tensors="pt")
    labels = torch.tensor([float(k == "right") for k in kinds])
    model = build_model(tokenizer, args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 - step / args.steps)
    start = time.time()
    for step in range(1, args.steps + 1):
        rows = torch.from_numpy(rng.integers(0, len(texts), args.batch_size))
        logits = model(
            input_ids=encoded["input_ids"][rows], attention_mask=encoded["attention_mask"][rows]
        ).logits
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits[:, 0], labels[rows])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 100 == 0:
            print(f"step {step:5d}  loss {loss.item():.4f}  {time.time() - start:.0f}s", flush=True)
    model.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(args.out)
    save_tokenizer(tokenizer, args.out)  # files transformers 4.x and 5.x both read
    # Measured through the tokenizer as users load it: AutoTokenizer's Qwen2 class drops spaces.
    loaded = AutoTokenizer.from_pretrained(args.out)
    info = {
        "steps": args.steps,
        "seed": args.seed,
        "eval_prompts": args.eval_prompts,
        **measure(model, loaded, args),
    }
    (args.out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(json.dumps(info, indent=2))
    return info


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--train-size", type=int, default=20000)
    parser.add_argument("--eval-prompts", type=int, default=500)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    train(parser.parse_args())


if __name__ == "__main__":
    main()
