"""Prompt datasets: the built-in generator, local JSONL/JSON/Parquet (verl layout included) and
Hugging Face datasets, tokenised once, with a resumable seeded sampler."""

from __future__ import annotations

from typing import Any

from rlrun.data.dataset import LengthReport, PromptDataset, build_prompt_dataset, check_data_file, get_field
from rlrun.data.padding import left_pad
from rlrun.data.sampler import PromptSampler
from rlrun.data.sources import DataError, is_split_source, load_file, load_records, shown
from rlrun.schema.data import Data


def load_prompt_datasets(data: Data, tokenizer: Any) -> tuple[PromptDataset, PromptDataset | None]:
    """The train and validation datasets of a recipe's ``data`` section.

    Validation comes from ``val_source`` when set; otherwise from the generator's validation
    split, or a hub dataset's validation/test split; a local file alone has none (None).
    """
    options = {
        "prompt_key": data.prompt_key,
        "answer_key": data.answer_key,
        "apply_chat_template": data.apply_chat_template,
        "chat_template_kwargs": data.chat_template_kwargs,
        "system_prompt": data.system_prompt,
        "few_shot_messages": data.few_shot_messages,
        "prompt_template": data.prompt_template,
        "max_prompt_tokens": data.max_prompt_tokens,
        "overlong": data.overlong_prompts,
    }
    source, val_source = data.source, data.val_source
    train = build_prompt_dataset(
        load_records(source, "train", data), tokenizer, name=shown(source), **options
    )
    if val_source is None and not is_split_source(source):
        return train, None
    try:
        val_records = load_records(val_source or source, "validation", data)
        if val_records is None:
            return train, None
        name = f"{shown(val_source or source)} (validation)"
        return train, build_prompt_dataset(val_records, tokenizer, name=name, **options)
    except DataError as err:
        raise err.for_key("data.val_source" if val_source else "data.source") from None


__all__ = [
    "DataError",
    "LengthReport",
    "PromptDataset",
    "PromptSampler",
    "build_prompt_dataset",
    "check_data_file",
    "get_field",
    "left_pad",
    "load_file",
    "load_prompt_datasets",
    "load_records",
]
