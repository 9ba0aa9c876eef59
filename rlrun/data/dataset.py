"""Records -> a tokenised prompt dataset: keys picked, chat template applied, length limit enforced.

Tokenisation happens once, here; the training loop only indexes the result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from rlrun.data.sources import DataError, read_columns
from rlrun.schema.data import PROMPT_PLACEHOLDER

logger = logging.getLogger("rlrun.data")

ChatTemplateMode = Literal["auto", "messages", True, False]
OverlongPolicy = Literal["drop", "truncate", "error"]
VERL_ANSWER_KEY = "reward_model.ground_truth"  # used when the configured answer key is absent


@dataclass(frozen=True)
class LengthReport:
    """What the prompt length limit did to a dataset."""

    total: int
    dropped: int = 0
    truncated: int = 0
    max_prompt_tokens: int | None = None

    def __str__(self) -> str:
        kept = self.total - self.dropped
        text = f"{kept} of {self.total} prompts kept"
        if self.dropped or self.truncated:
            action = "dropped" if self.dropped else "truncated to their last tokens"
            text += (
                f" ({self.dropped or self.truncated} longer than {self.max_prompt_tokens} tokens {action})"
            )
        return text


@dataclass
class PromptDataset:
    """Parallel columns; ``prompts`` is the text the model sees (chat template applied)."""

    prompts: list[str]
    prompt_ids: list[list[int]]
    ground_truths: list[str]
    extra: dict[str, list[Any]] = field(default_factory=dict)  # other columns, passed to rewards
    report: LengthReport | None = None
    chat: bool = False  # the records' prompts were chat messages (TRL-style rewards see messages)
    messages: list[list[dict[str, Any]]] = field(default_factory=list)  # each prompt as chat messages

    def __len__(self) -> int:
        return len(self.prompts)

    def take(self, indices: Sequence[int]) -> PromptDataset:
        """The rows at ``indices``, in that order."""
        return PromptDataset(
            [self.prompts[i] for i in indices],
            [self.prompt_ids[i] for i in indices],
            [self.ground_truths[i] for i in indices],
            {k: [col[i] for i in indices] for k, col in self.extra.items()},
            chat=self.chat,
            messages=[self.messages[i] for i in indices] if self.messages else [],
        )


def get_field(record: dict[str, Any], key: str) -> Any:
    """``record["a"]["b"]`` for ``key="a.b"``; KeyError when any part is missing."""
    value: Any = record
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(key)
        value = value[part]
    return value


def check_data_file(path: str, *, prompt_key: str, answer_key: str, key: str = "data.source") -> None:
    """Raises DataError unless the file reads and has the prompt and answer keys, judged from
    its first record (.jsonl, .json) or its schema (.parquet): what validation can afford."""
    columns, first = read_columns(path)
    if not columns:
        raise DataError(path, "the file holds no records", key=key)
    for setting, wanted, fallback in (
        ("prompt_key", prompt_key, None),
        ("answer_key", answer_key, VERL_ANSWER_KEY),
    ):
        candidates = [wanted, fallback] if fallback else [wanted]
        if first is not None:
            found = any(_has_field(first, name) for name in candidates)
        else:  # a parquet schema: nested keys are checked down to their top-level column
            found = any(name.split(".")[0] in columns for name in candidates)
        if not found:
            where = "the first record" if first is not None else "the file"
            raise DataError(
                path,
                f"{where} has no {wanted!r} (keys: {', '.join(sorted(columns))}); set data.{setting}",
                key=key,
            )


def _has_field(record: dict[str, Any], key: str) -> bool:
    try:
        get_field(record, key)
    except KeyError:
        return False
    return True


def build_prompt_dataset(
    records: Iterable[dict[str, Any]],
    tokenizer: Any,
    *,
    prompt_key: str = "prompt",
    answer_key: str = "answer",
    apply_chat_template: ChatTemplateMode | str = "auto",
    chat_template_kwargs: dict[str, Any] | None = None,
    system_prompt: str | None = None,
    few_shot_messages: Sequence[dict[str, Any]] = (),
    prompt_template: str = PROMPT_PLACEHOLDER,
    max_prompt_tokens: int | None = None,
    overlong: OverlongPolicy | str = "drop",
    name: str = "dataset",
) -> PromptDataset:
    """Tokenise ``records`` once. Prompts may be strings or chat message lists (verl layout).

    ``prompt_template`` wraps each prompt (a message list: its last user message), replacing
    ``{prompt}``; ``system_prompt`` becomes the system message of prompts that have none (the
    first line of the text without a chat template). ``few_shot_messages`` go before each
    prompt's own messages, after its system message, as they are (worked examples); they need
    the chat template. ``chat_template_kwargs`` go to the chat template (Qwen3's
    ``enable_thinking``).

    Over-long prompts are dropped, truncated (keeping their last tokens: the end of the
    question and the generation prompt) or raise, per ``overlong``; counts are in ``.report``.
    """
    records = list(records)
    if overlong not in ("drop", "truncate", "error"):
        raise ValueError(f"overlong must be drop | truncate | error, got {overlong!r}")
    use_template = _use_chat_template(tokenizer, apply_chat_template, name)
    raw_prompts = [_field(r, prompt_key, i, name) for i, r in enumerate(records)]
    if (
        apply_chat_template == "messages"
        and not use_template
        and any(isinstance(p, list) for p in raw_prompts)
    ):
        raise DataError(name, "the prompts are chat messages but the tokenizer has no chat template")
    truths = [_answer(r, answer_key, i, name) for i, r in enumerate(records)]
    messages = [
        _messages(p, system_prompt, few_shot_messages, prompt_template, i, name)
        for i, p in enumerate(raw_prompts)
    ]
    # "messages" (TRL's rule): only prompts written as chat messages get the template
    templated = [
        use_template and (apply_chat_template != "messages" or isinstance(p, list)) for p in raw_prompts
    ]
    if few_shot_messages and not all(templated):
        raise DataError(
            name,
            "data.few_shot_messages are chat messages, and these prompts are not rendered by a chat "
            "template (the tokenizer has none, or data.apply_chat_template leaves them as text)",
        )
    texts = [_render(m, tokenizer, t, chat_template_kwargs or {}) for m, t in zip(messages, templated)]
    ids = _tokenize(tokenizer, texts, templated)
    top_keys = {prompt_key.split(".")[0], answer_key.split(".")[0]}
    extra_keys = sorted({k for r in records for k in r} - top_keys)
    extra = {k: [r.get(k) for r in records] for k in extra_keys}

    limit = max_prompt_tokens
    too_long = [i for i, seq in enumerate(ids) if limit is not None and len(seq) > limit]
    if too_long and overlong == "error":
        first = too_long[0]
        raise DataError(
            name,
            f"{len(too_long)} prompts are longer than max_prompt_tokens={limit} "
            f"(record {first} has {len(ids[first])} tokens); raise data.max_prompt_tokens or set "
            "data.overlong_prompts to drop | truncate",
        )
    if overlong == "truncate":
        for i in too_long:
            ids[i] = ids[i][-limit:]
            texts[i] = tokenizer.decode(ids[i])
        keep = range(len(ids))
    else:
        dropped = set(too_long)
        keep = [i for i in range(len(ids)) if i not in dropped]
    report = LengthReport(
        len(ids), len(ids) - len(keep), len(too_long) if overlong == "truncate" else 0, limit
    )
    if too_long:
        logger.warning("%s: %s", name, report)
    chat = any(isinstance(p, list) for p in raw_prompts)
    dataset = PromptDataset(texts, ids, truths, extra, chat=chat, messages=messages)
    dataset = dataset.take(list(keep))
    dataset.report = report
    if not len(dataset):
        raise DataError(name, f"no prompts left ({report})")
    return dataset


def _tokenize(tokenizer: Any, texts: list[str], templated: list[bool]) -> list[list[int]]:
    """Token ids of `texts`; a templated text holds its special tokens already."""
    ids: list[list[int]] = [[] for _ in texts]
    for flag in (True, False):
        rows = [i for i, t in enumerate(templated) if t == flag]
        if rows:
            encoded = tokenizer([texts[i] for i in rows], add_special_tokens=not flag)["input_ids"]
            for i, row in zip(rows, encoded):
                ids[i] = row
    return ids


def _use_chat_template(tokenizer: Any, mode: ChatTemplateMode | str, name: str) -> bool:
    has_template = bool(getattr(tokenizer, "chat_template", None))
    if mode == "messages":
        return has_template
    if mode in (True, "true"):
        if not has_template:
            raise DataError(name, "data.apply_chat_template is true but the tokenizer has no chat template")
        return True
    if mode in (False, "false"):
        return False
    if mode != "auto":
        raise ValueError(f"apply_chat_template must be auto | messages | true | false, got {mode!r}")
    return has_template


def _messages(
    prompt: Any,
    system_prompt: str | None,
    few_shot: Sequence[dict[str, Any]],
    template: str,
    index: int,
    name: str,
) -> list[dict[str, Any]]:
    """A record's prompt as chat messages, with the recipe's template, few-shot messages and
    system prompt applied."""
    if isinstance(prompt, str):
        messages = [{"role": "user", "content": prompt}]
    elif isinstance(prompt, list) and all(isinstance(m, dict) and "content" in m for m in prompt):
        messages = [dict(m) for m in prompt]
    else:
        raise DataError(
            name,
            f"record {index}: a prompt must be a string or a list of chat messages, "
            f"got {type(prompt).__name__}",
        )
    users = [m for m in messages if m.get("role", "user") == "user"]
    if users:
        users[-1]["content"] = template.replace(PROMPT_PLACEHOLDER, str(users[-1]["content"]))
    if system_prompt is not None and not any(m.get("role") == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system_prompt})
    first = int(bool(messages) and messages[0].get("role") == "system")
    return [*messages[:first], *(dict(m) for m in few_shot), *messages[first:]]


def _render(
    messages: list[dict[str, Any]], tokenizer: Any, use_template: bool, template_kwargs: dict[str, Any]
) -> str:
    if use_template:
        return tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, **template_kwargs
        )
    return "\n".join(str(m["content"]) for m in messages)


def _field(record: dict[str, Any], key: str, index: int, name: str) -> Any:
    try:
        return get_field(record, key)
    except KeyError:
        raise DataError(name, f"record {index} has no {key!r} (keys: {', '.join(sorted(record))})") from None


def _answer(record: dict[str, Any], key: str, index: int, name: str) -> str:
    try:
        value = get_field(record, key)
    except KeyError:
        try:
            value = get_field(record, VERL_ANSWER_KEY)
        except KeyError:
            raise DataError(
                name,
                f"record {index} has neither {key!r} nor {VERL_ANSWER_KEY!r} "
                f"(keys: {', '.join(sorted(record))}); set data.answer_key",
            ) from None
    return value if isinstance(value, str) else str(value)
