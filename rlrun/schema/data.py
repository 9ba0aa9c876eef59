"""`data`: where prompts and answers come from."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, field_validator

from rlrun.schema.base import NonNegativeInt, PositiveInt, Section
from rlrun.tasks.arithmetic import DATA_SOURCE as ARITHMETIC_SOURCE

PROMPT_PLACEHOLDER = "{prompt}"  # where data.prompt_template puts the dataset's prompt
FEW_SHOT_ROLES = ("user", "assistant", "tool")  # a system message is data.system_prompt's


class Arithmetic(Section):
    """The built-in generator: `23+58=` -> `81`."""

    digits: PositiveInt = 2
    """Digits of each operand."""
    operators: list[Literal["+", "-", "*"]] = Field(["+"], min_length=1)
    """Operators drawn from: +, -, *."""
    train_size: PositiveInt = 20000
    """Training problems generated."""
    val_size: PositiveInt = 500
    """Validation problems generated (disjoint from training)."""
    seed: NonNegativeInt = 1234
    """Seed of the generator."""


class GuessNumberGame(Section):
    """The built-in guessing game (`rlrun.tasks.guess_number`): `Guess a number from 1 to 63.`, the secret from the row."""

    low: NonNegativeInt = 1
    """Smallest number of the range."""
    high: PositiveInt = 63
    """Largest number of the range."""
    max_guesses: PositiveInt | None = None
    """Guesses allowed per game; null = the most bisection needs ((high - low + 1).bit_length(): 6 for 1 to 63)."""
    train_size: PositiveInt = 20000
    """Training games generated (secrets drawn with replacement)."""
    val_size: PositiveInt = 500
    """Validation games: distinct secrets (at most every number of the range once; the prompt never shows the secret, so both splits draw from the whole range)."""
    seed: NonNegativeInt = 1234
    """Seed of the generator."""


class Data(Section):
    source: str | list[Annotated[str, Field(min_length=1)]] = Field(ARITHMETIC_SOURCE, min_length=1)
    """rlrun:arithmetic | rlrun:guess_number | a .jsonl/.json/.parquet file | hf:<dataset name> | a list of files (every file's rows, in order)"""
    val_source: str | list[Annotated[str, Field(min_length=1)]] | None = None
    """null = the source's own validation split (generator, hf:); a file has none; a list of files = all their rows"""
    arithmetic: Arithmetic = Arithmetic()
    """used when source is rlrun:arithmetic"""
    guess_number: GuessNumberGame = GuessNumberGame()
    """used when source is rlrun:guess_number"""
    prompt_key: str = Field("prompt", min_length=1)
    """The record key holding the prompt; dotted keys reach into nested records (verl: reward_model.ground_truth)"""
    answer_key: str = Field("answer", min_length=1)
    """The record key holding the reference answer (dotted keys reach into nested records)."""
    apply_chat_template: Literal["auto", "messages", True, False] = "auto"
    """Wrap each prompt in the tokenizer's chat template: true | false | auto = when the tokenizer has one | messages = chat-message prompts only, text as it is (TRL)"""
    chat_template_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Keywords for the tokenizer's chat template, e.g. {enable_thinking: false} (TRL's chat_template_kwargs)."""
    system_prompt: str | None = None
    """an instruction sent before every prompt (the system message), e.g. the answer format; null = none"""
    few_shot_messages: list[dict[str, Any]] = Field(default_factory=list)
    """Chat messages put before every prompt's own (after its system message), as the chat template renders them: worked examples, e.g. a question, the assistant's tool call, the tool's result and the answer; they need a chat template ([] = none)"""
    prompt_template: str = PROMPT_PLACEHOLDER
    """text around each dataset prompt; {prompt} marks where it goes (it must appear)"""
    max_prompt_tokens: PositiveInt | None = 64
    """Longest prompt in tokens; longer ones are handled by overlong_prompts (null = no limit, as in TRL)."""
    overlong_prompts: Literal["drop", "truncate", "error"] = "drop"
    """What happens to a longer prompt: drop | truncate | error"""
    shuffle: bool = True
    """Draw the training prompts in a shuffled order (seeded by data.seed)."""
    seed: NonNegativeInt = 0
    """Seed of the prompt order."""

    @field_validator("few_shot_messages")
    @classmethod
    def _chat_messages(cls, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for index, message in enumerate(messages):
            if message.get("role") not in FEW_SHOT_ROLES or not isinstance(message.get("content"), str):
                raise ValueError(
                    f"message {index} needs a role ({' | '.join(FEW_SHOT_ROLES)}) and a content string, "
                    f"got {message}"
                )
        return messages
