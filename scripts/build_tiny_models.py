"""Rebuild rlrun's shipped tiny models (``rlrun:tiny-base``, ``rlrun:tiny-teacher``) from a seed.

One supervised run of a ~1M-parameter Qwen2 with a character-level tokenizer on the arithmetic
task's training split (loss on the answer and EOS only). The first checkpoint whose sampled
accuracy (temperature 1) on validation prompts enters the base band becomes ``tiny-base``, a
weak student that almost knows the task; training goes on until greedy accuracy reaches the
teacher target, which becomes ``tiny-teacher``. Deterministic on CPU for a given seed, thread
count, libraries and CPU kernels (`rlrun.facts.machine.numerics`, recorded in
``build_info.json``); a few CPU minutes.

    python scripts/build_tiny_models.py                  # into rlrun/embedded/models/
    python scripts/build_tiny_models.py --out /tmp/tiny  # elsewhere
    python scripts/build_tiny_models.py --out /tmp/tiny --stop-after tiny-base  # the base only
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from tokenizers import AddedToken, Tokenizer, decoders, models, processors
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from rlrun.data import build_prompt_dataset
from rlrun.evaluation import evaluate
from rlrun.facts.machine import numerics
from rlrun.rollout.engine import SamplingParams
from rlrun.rollout.hf import HFRolloutEngine
from rlrun.tasks.arithmetic import ArithmeticTask

SPECIAL_TOKENS = ["<pad>", "<bos>", "<eos>", "<unk>"]
CHARACTERS = "0123456789+-*/=()., ?:" + "abcdefghijklmnopqrstuvwxyz" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
MAX_POSITIONS = 128
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "rlrun" / "embedded" / "models"

BASE_BAND = (0.25, 0.35)  # sampled accuracy at temperature 1 that makes a checkpoint the base
TEACHER_GREEDY = 0.97  # training stops here, or when the learning rate has decayed to 0
TEACHER_MIN_GREEDY = 0.90
# The tokenizer class transformers 4.x and 5.x both have (5.x's own save_pretrained names
# `TokenizersBackend`, which 4.x lacks): the shipped models load on either major version.
PORTABLE_TOKENIZER_CLASS = "PreTrainedTokenizerFast"


def build_tokenizer(
    characters: str = CHARACTERS, added_tokens: tuple[str, ...] = (), max_positions: int = MAX_POSITIONS
) -> PreTrainedTokenizerFast:
    """One token per character (BPE without merges), ``<bos>`` prepended to every encoding.

    ``added_tokens`` (multi-character words, or characters of ``characters``) are matched in the
    text before anything else, as whole tokens, by transformers 4.x and 5.x alike (5.x replaces
    the pre-tokenizer with Qwen2's byte-level one, which drops a space or newline that is not
    an added token). Encoding and ``decode(skip_special_tokens=True)`` both keep them."""
    vocab = {token: i for i, token in enumerate(SPECIAL_TOKENS + list(characters))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tokenizer.decoder = decoders.Fuse()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    if added_tokens:
        tokenizer.add_tokens([AddedToken(token, normalized=False) for token in added_tokens])
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<bos>",
        eos_token="<eos>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=max_positions,
        padding_side="left",
    )


def save_tokenizer(tokenizer: PreTrainedTokenizerFast, out: Path) -> None:
    """`tokenizer.json` and a `tokenizer_config.json` that transformers 4.x and 5.x both read,
    the same bytes whichever version writes them."""
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))
    config = {
        **tokenizer.special_tokens_map,
        "model_input_names": ["input_ids", "attention_mask"],  # Qwen2 takes no token_type_ids
        "model_max_length": tokenizer.model_max_length,
        "padding_side": tokenizer.padding_side,
        "tokenizer_class": PORTABLE_TOKENIZER_CLASS,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def build_model(
    tokenizer: PreTrainedTokenizerFast, seed: int, max_positions: int = MAX_POSITIONS
) -> Qwen2ForCausalLM:
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=512,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=max_positions,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        max_new_tokens=8,
    )
    return model


def encode_supervised(tokenizer: PreTrainedTokenizerFast, records: list[dict]) -> tuple[torch.Tensor, ...]:
    """(ids, attention_mask, loss_mask), right-padded; the loss covers the answer and EOS."""
    prompt_len = torch.tensor([len(r["prompt"]) + 1 for r in records])  # +1: <bos>; one token per char
    full = tokenizer([r["prompt"] + r["answer"] for r in records])["input_ids"]
    total_len = torch.tensor([len(ids) + 1 for ids in full])  # +1: <eos>
    width = int(total_len.max())
    ids = torch.full((len(records), width), tokenizer.pad_token_id, dtype=torch.long)
    flat = [
        seq + [tokenizer.eos_token_id] + [tokenizer.pad_token_id] * (width - len(seq) - 1) for seq in full
    ]
    ids[:] = torch.tensor(flat)
    position = torch.arange(width)
    attention = (position < total_len[:, None]).long()
    loss_mask = attention * (position >= prompt_len[:, None])
    return ids, attention, loss_mask


def train(args: argparse.Namespace) -> dict[str, dict]:
    torch.set_num_threads(args.threads)
    tokenizer = build_tokenizer()
    # Train on this seed's draw of the training split; measure on the validation prompts the
    # recipes use (the default task). The splits are disjoint whatever the seeds.
    train_records = ArithmeticTask(seed=args.seed).train(args.train_size)
    ids, attention, loss_mask = encode_supervised(tokenizer, train_records)
    val = build_prompt_dataset(ArithmeticTask().validation(args.eval_prompts), tokenizer)
    model = build_model(tokenizer, args.seed)
    engine = HFRolloutEngine(model, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.98))
    saved: dict[str, dict] = {}  # name -> build info, written as each model is taken

    def lr_factor(step: int) -> float:
        """Warm up, hold until the base is taken, then decay linearly to 0 to polish the teacher."""
        if "tiny-base" not in saved:
            return min(1.0, (step + 1) / args.warmup)
        return max(0.0, 1.0 - (step - saved["tiny-base"]["step"]) / args.teacher_steps)

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_factor)
    order = np.random.default_rng(args.seed)

    def accuracy(greedy: bool) -> float:
        return evaluate(
            engine, tokenizer, val, sampling=SamplingParams(greedy=greedy, seed=args.seed)
        ).mean_at_k

    start = time.time()
    for step in range(1, args.max_steps + 1):
        batch = torch.from_numpy(order.integers(0, len(ids), args.batch_size))
        logits = model(input_ids=ids[batch], attention_mask=attention[batch]).logits[:, :-1]
        mask = loss_mask[batch, 1:]
        token_loss = torch.nn.functional.cross_entropy(
            logits.transpose(1, 2), ids[batch, 1:], reduction="none"
        )
        loss = (token_loss * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % (args.eval_every if "tiny-base" in saved else args.base_eval_every):
            continue
        sampled, greedy = accuracy(False), accuracy(True)
        print(
            f"step {step:5d}  loss {loss.item():.4f}  sampled {sampled:.3f}  greedy {greedy:.3f}  "
            f"{time.time() - start:.0f}s",
            flush=True,
        )
        if "tiny-base" not in saved and sampled >= BASE_BAND[0]:
            if sampled > BASE_BAND[1]:
                raise RuntimeError(
                    f"step {step}: sampled accuracy {sampled:.3f} jumped past the base band "
                    f"{BASE_BAND}; lower --base-eval-every or --lr"
                )
            saved["tiny-base"] = _save(model, tokenizer, args, "tiny-base", step, sampled, greedy)
            if args.stop_after == "tiny-base":
                break
        decayed = "tiny-base" in saved and step >= saved["tiny-base"]["step"] + args.teacher_steps
        if greedy >= TEACHER_GREEDY or decayed:
            if greedy < TEACHER_MIN_GREEDY:
                raise RuntimeError(f"the teacher reached only {greedy:.3f} greedy accuracy at step {step}")
            saved["tiny-teacher"] = _save(model, tokenizer, args, "tiny-teacher", step, sampled, greedy)
            break
    else:
        raise RuntimeError(f"no teacher within {args.max_steps} steps")
    return saved


def _save(
    model: Qwen2ForCausalLM,
    tokenizer: PreTrainedTokenizerFast,
    args: argparse.Namespace,
    name: str,
    step: int,
    sampled: float,
    greedy: float,
) -> dict:
    info = {
        "step": step,
        "sampled_accuracy": round(sampled, 4),
        "greedy_accuracy": round(greedy, 4),
        "seed": args.seed,
        "eval_prompts": args.eval_prompts,
        "versions": numerics(),
    }
    out = args.out / name
    model.save_pretrained(out)
    save_tokenizer(tokenizer, out)
    (out / "build_info.json").write_text(json.dumps(info, indent=2) + "\n")
    print(f"{name}: step {step}, sampled {sampled:.3f}, greedy {greedy:.3f} -> {out}", flush=True)
    return info


def build_parser(doc: str, out: Path) -> argparse.ArgumentParser:
    """The arguments every tiny-model build takes: where to write, the seed, torch's threads."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)  # faster than 2 on shared cores
    return parser


def main() -> None:
    parser = build_parser(__doc__, DEFAULT_OUT)
    parser.add_argument("--train-size", type=int, default=20000)
    parser.add_argument("--eval-prompts", type=int, default=500)
    parser.add_argument(
        "--base-eval-every", type=int, default=10, help="steps between evaluations before the base"
    )
    parser.add_argument("--eval-every", type=int, default=50, help="steps between evaluations after the base")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--teacher-steps", type=int, default=1500, help="lr decay steps after the base")
    parser.add_argument("--max-steps", type=int, default=3000)
    parser.add_argument(
        "--stop-after",
        choices=["tiny-base", "tiny-teacher"],
        default="tiny-teacher",
        help="the last model to build (tiny-base: the first ~300 steps only, about a sixth of the time)",
    )
    train(parser.parse_args())


if __name__ == "__main__":
    main()
