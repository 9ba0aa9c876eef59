"""A tokenizer for the agent tests: every character encodes (the embedded tiny tokenizer has no
`<`, `>` or quotes), one token per byte, no merges."""

from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

FIXTURES = Path(__file__).parent / "fixtures"
TOOLS_TEMPLATE = Path(__file__).parents[2] / "examples" / "agents" / "chatml_tools.jinja"  # ChatML with tools
SPECIALS = ["<pad>", "<bos>", "<eos>", "<|im_start|>", "<|im_end|>"]


def byte_tokenizer(*, eos: str = "<eos>", chat_template: str | None = None) -> PreTrainedTokenizerFast:
    """Byte-level, no merges: ids 0-4 are SPECIALS, then one id per byte."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: index for index, token in enumerate(SPECIALS + alphabet)}
    inner = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    inner.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    inner.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=inner,
        pad_token="<pad>",
        bos_token="<bos>",
        eos_token=eos,
        additional_special_tokens=[t for t in SPECIALS[3:]],
    )
    tokenizer.chat_template = chat_template
    return tokenizer
