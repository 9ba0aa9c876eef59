"""A learned reward: a Hugging Face sequence-classification model scoring prompt + response.

The recipe entry (``rlrun.schema.reward.RewardModel``) sits beside ``fn:`` entries in
``reward.functions`` and is weighted and logged like them. Scoring, per batch of
``batch_size``:

    text   <- the reward model's chat template over [user: prompt, assistant: response] when its
              tokenizer has one (no special tokens added: the template has them), else
              prompt + response with the tokenizer's own special tokens
    ids    <- the reward model's tokenizer (not the policy's: they may differ), right-padded,
              truncated from the left to ``max_tokens`` (the response's end is what is judged)
    logits <- model(ids); the classifier pools its last non-padding token
    score  <- the ``label`` output: the logit, or its probability (sigmoid for one output,
              softmax over the outputs otherwise); then (score - shift) / scale

``shift``/``scale`` are a fixed normalisation (a running mean/std would be state the checkpoint
must carry for exact resume; GRPO-style advantages normalise per group anyway). ``check_config``
reads only ``config.json``, so a recipe is validated before any model loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from rlrun.embedded import resolve_model_path
from rlrun.facts.dtypes import DTYPES, dtype_argument
from rlrun.schema.reward import RewardModel


def reward_model_name(entry: RewardModel) -> str:
    """The name a reward model is logged under: its ``name``, else the last part of its path
    (``rlrun:tiny-reward`` -> ``tiny-reward``, ``org/rm-7b`` -> ``rm-7b``)."""
    return entry.name or entry.model.rstrip("/").rpartition("/")[2].rpartition(":")[2]


def local_config(model: str) -> dict[str, Any] | None:
    """The model's ``config.json`` when it is on this machine (an ``rlrun:`` name or a local
    directory); None for a hub id, checked when it loads."""
    path = Path(resolve_model_path(model))
    config = path / "config.json"
    if not path.is_dir():
        return None
    if not config.is_file():
        raise ValueError(f"{path} has no config.json: it is not a Hugging Face model directory")
    return json.loads(config.read_text())


def check_config(config: Mapping[str, Any], label: int | str | None) -> str | None:
    """Why this model cannot serve as a reward with ``label`` (None when it can): it must be a
    sequence classifier, and its output must be unambiguous."""
    architectures = config.get("architectures") or []
    if architectures and not any(a.endswith("ForSequenceClassification") for a in architectures):
        return (
            f"the model is a {', '.join(architectures)}, not a sequence classifier "
            "(AutoModelForSequenceClassification: an architecture named *ForSequenceClassification)"
        )
    labels = [str(v) for _, v in sorted((config.get("id2label") or {}).items(), key=lambda kv: int(kv[0]))]
    count = len(labels) or int(config.get("num_labels", 2))
    if label is None:
        if count != 1:
            return f"the classifier has {count} outputs ({', '.join(labels) or 'unnamed'}); set `label` to the one to use"
        return None
    if isinstance(label, int) and not 0 <= label < count:
        return f"label {label} is out of range: the classifier has {count} outputs (0..{count - 1})"
    if isinstance(label, str) and label not in labels:
        return f"label {label!r} is not one of the classifier's labels ({', '.join(labels) or 'none named'})"
    return None


class RewardModelScorer:
    """The reward function of one ``RewardModel`` entry: ``(prompts, completions, ...) -> scores``."""

    def __init__(self, entry: RewardModel):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        path = resolve_model_path(entry.model)
        remote = entry.trust_remote_code
        self.tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=remote)
        self.tokenizer.padding_side = "right"  # positions as in an unpadded forward
        self.tokenizer.truncation_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = DTYPES[entry.dtype]
        model = AutoModelForSequenceClassification.from_pretrained(
            path, **dtype_argument(dtype), trust_remote_code=remote
        )
        problem = check_config(model.config.to_dict(), entry.label)
        if problem:
            raise ValueError(f"reward model {entry.model!r}: {problem}")
        if model.config.pad_token_id is None:  # the classifier finds each row's end by the pad id
            model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model = model.requires_grad_(False).eval().to(_device(entry.device))
        label = entry.label
        self.label = model.config.label2id[label] if isinstance(label, str) else int(label or 0)
        self.probability = entry.score == "probability"
        self.shift, self.scale = entry.shift, entry.scale
        self.batch_size, self.max_tokens = entry.batch_size, entry.max_tokens
        self.templated = bool(getattr(self.tokenizer, "chat_template", None))

    def text(self, prompt: str, completion: str) -> str:
        """What the reward model reads for one sample."""
        if not self.templated:
            return prompt + completion
        messages = [{"role": "user", "content": prompt}, {"role": "assistant", "content": completion}]
        return self.tokenizer.apply_chat_template(messages, tokenize=False)

    @torch.no_grad()
    def __call__(self, prompts: list[str], completions: list[str], ground_truths: list[str]) -> list[float]:
        texts = [self.text(p, c) for p, c in zip(prompts, completions)]
        scores = [self._score(texts[i : i + self.batch_size]) for i in range(0, len(texts), self.batch_size)]
        return torch.cat(scores).tolist() if scores else []

    def _score(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(
            texts,
            padding=True,
            truncation=self.max_tokens is not None,
            max_length=self.max_tokens,
            add_special_tokens=not self.templated,
            return_tensors="pt",
        ).to(self.model.device)
        logits = self.model(
            input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]
        ).logits.float()
        if self.probability:
            logits = logits.sigmoid() if logits.shape[-1] == 1 else logits.softmax(-1)
        return ((logits[:, self.label] - self.shift) / self.scale).cpu()


def _device(choice: str) -> torch.device:
    if choice == "cpu" or (choice == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    return torch.device("cuda", torch.cuda.current_device())  # this process's GPU under accelerate
