"""The models a run trains or consults: policy, reference, teacher, critic.

All load through the plain Hugging Face path (`AutoModelForCausalLM.from_pretrained`), so the
embedded tiny models and a user's model take the same road. The critic is the policy's
backbone (`AutoModel`, no LM head) with a scalar value head. With `model.lora` the policy is
wrapped by peft: only the adapters train, and the reference is the same model with its
adapters disabled.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
import transformers
from safetensors import SafetensorError, safe_open
from transformers import (
    AutoModel,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from rlrun.embedded import resolve_model_path
from rlrun.errors import ConfigIssue, RecipeError
from rlrun.facts.dtypes import DTYPES, dtype_argument


@contextmanager
def _loading(path: str) -> Iterator[None]:
    """A model or tokenizer that cannot be loaded (no such folder, a broken config.json, a
    weights file cut off or corrupted, hub unreachable) is a recipe error located at the path,
    not a traceback. Validation catches most of these before any model loads; this is what it
    cannot see."""
    try:
        yield
    except SafetensorError as exc:
        damaged = _damaged_weights(path)
        issue = ConfigIssue(
            f"this weights file of the model is damaged (cut off or corrupted): {exc}"
            if damaged
            else f"the model's weights cannot be read (a damaged safetensors file): {exc}",
            code="model-damaged",
            file=damaged or path,
            fix="restore the file from where it came (copy or download the model folder again; for a hub "
            "model, delete its folder in the Hugging Face cache)",
        )
        raise RecipeError([issue]) from None
    except (OSError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if path.startswith(("/", ".", "~")) and not Path(path).expanduser().exists():
            reason = "there is no such folder"  # (transformers would say it is a malformed hub id)
        issue = ConfigIssue(
            f"the model cannot be loaded: {reason}",
            code="model-load",
            file=path,
            fix="name a Hugging Face model folder (config.json, weights, tokenizer) or a hub id reachable "
            "from here",
        )
        raise RecipeError([issue]) from None


def _damaged_weights(path: str) -> str | None:
    """The first safetensors file of the model folder `path` whose header cannot be read."""
    try:
        folder = Path(resolve_model_path(path))
    except Exception:  # noqa: BLE001 - naming the file is a courtesy; the error is reported anyway
        return None
    for file in sorted(folder.glob("*.safetensors")) if folder.is_dir() else []:
        try:
            with safe_open(str(file), framework="pt"):
                pass
        except (SafetensorError, OSError):
            return str(file)
    return None


def load_tokenizer(path: str, trust_remote_code: bool = False) -> PreTrainedTokenizerBase:
    with _loading(path):
        tokenizer = AutoTokenizer.from_pretrained(
            resolve_model_path(path), trust_remote_code=trust_remote_code
        )
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_causal_lm(
    path: str, dtype: str = "float32", trust_remote_code: bool = False, trainable: bool = True
) -> PreTrainedModel:
    """A causal LM; frozen (eval mode, no grad) unless `trainable`."""
    with _loading(path):
        model = AutoModelForCausalLM.from_pretrained(
            resolve_model_path(path), **dtype_argument(DTYPES[dtype]), trust_remote_code=trust_remote_code
        )
    return model.train() if trainable else freeze(model)


def with_lora(model: PreTrainedModel, lora: Any) -> torch.nn.Module:
    """`model` wrapped by peft with the recipe's `model.lora` adapter (only the adapter trains)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def freeze(model: torch.nn.Module) -> torch.nn.Module:
    model.requires_grad_(False)
    return model.eval()


class ValueModel(torch.nn.Module):
    """A transformer backbone with a linear value head: one scalar per position."""

    def __init__(self, backbone: PreTrainedModel):
        super().__init__()
        self.backbone = backbone
        self.value_head = torch.nn.Linear(backbone.config.hidden_size, 1)
        # A zero head starts every value at 0, so early advantages are the plain returns.
        torch.nn.init.zeros_(self.value_head.weight)
        torch.nn.init.zeros_(self.value_head.bias)

    @classmethod
    def from_pretrained(
        cls, path: str, dtype: str = "float32", trust_remote_code: bool = False
    ) -> ValueModel:
        with _loading(path):
            backbone = AutoModel.from_pretrained(
                resolve_model_path(path), **dtype_argument(DTYPES[dtype]), trust_remote_code=trust_remote_code
            )
        return cls(backbone).to(DTYPES[dtype])

    @property
    def config(self) -> transformers.PretrainedConfig:
        return self.backbone.config

    def get_input_embeddings(self) -> torch.nn.Module:
        return self.backbone.get_input_embeddings()

    def forward(self, **inputs: Any) -> torch.Tensor:
        hidden = self.backbone(**inputs, use_cache=False).last_hidden_state
        return self.value_head(hidden).squeeze(-1).float()
