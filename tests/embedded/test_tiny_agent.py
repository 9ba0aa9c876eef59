"""The tiny agent model's build: its tokenizer writes and reads the plain tool format on
transformers 4.x and 5.x alike, its synthesized episodes follow the format and the games' rules,
and its measuring loop runs calls as the format says."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from transformers import AutoTokenizer

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_tiny_agent.py"
FORMAT_TOKENS = ("<call>", "</call>", "<result>", "</result>")
# A solved calculator episode as the runner lays it out: prompt, the model's turn, the result,
# the model's answer (the text between is what encode sees; EOS ends each model turn).
EPISODE = ("123*45=", '<call>calculator("123*45")</call>', "<result>5535</result>", "5535")


def build_script():
    spec = importlib.util.spec_from_file_location("build_tiny_agent", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks itself up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built_tok(tmp_path_factory):
    """The tokenizer the build script writes, as transformers loads it (4.x or 5.x)."""
    folder = tmp_path_factory.mktemp("tokenizer")
    build = build_script()
    build.save_tokenizer(build.agent_tokenizer(), folder)
    return AutoTokenizer.from_pretrained(folder)


def test_the_format_tokens_are_single_tokens_written_back(built_tok):
    tok = built_tok
    for token in FORMAT_TOKENS:
        [token_id] = tok.encode(token, add_special_tokens=False)
        assert tok.convert_ids_to_tokens(token_id) == token
    prompt, call, result, answer = EPISODE
    ids = tok(prompt)["input_ids"]
    for text, model_turn in ((call, True), (result, False), (answer, True)):
        ids += tok.encode(text, add_special_tokens=False) + ([tok.eos_token_id] if model_turn else [])
    pieces = ["<bos>", *prompt, "<call>", *'calculator("123*45")', "</call>", "<eos>"]
    pieces += ["<result>", *"5535", "</result>", *"5535", "<eos>"]
    assert tok.convert_ids_to_tokens(ids) == pieces
    text = f"<bos>{prompt}{call}<eos>{result}{answer}<eos>"
    assert tok.decode(ids, skip_special_tokens=False) == text
    assert tok.decode(ids, skip_special_tokens=True) == "".join(EPISODE)  # format tokens are not special


def test_spaces_newlines_and_quotes_are_kept(built_tok):
    """transformers 5.x puts Qwen2's byte-level pre-tokenizer in front, which drops a space or
    newline that is not an added token; 4.x does not: both must see the same ids."""
    text = "Guess a number from 1 to 63.\n<result>error: 'x' is not an int_value</result>"
    ids = built_tok.encode(text, add_special_tokens=False)
    assert built_tok.decode(ids) == text
    assert built_tok.unk_token_id not in ids
    assert len(ids) == len(text) - sum(len(t) - 1 for t in FORMAT_TOKENS[2:])  # one id a character


def test_the_synthesized_episodes_follow_the_format():
    build = build_script()
    record = {"prompt": "12*34=", "answer": "408"}
    assert build.calculator_episode(record, calls=False) == [("408", True)]
    assert build.calculator_episode(record, calls=True) == [
        ('<call>calculator("12*34")</call>', True),
        ("<result>408</result>", False),
        ("408", True),
    ]
    row = {"prompt": "Guess a number from 1 to 63.", "secret": 21, "low": 1, "high": 63, "max_guesses": 6}
    bisection = build.guess_episode(row, bisect=True, rng=None)
    guesses = [text for text, sampled in bisection if sampled][:-1]
    answers = [text for text, sampled in bisection if not sampled]
    assert guesses == [f"<call>guess({n})</call>" for n in (32, 16, 24, 20, 22, 21)]
    assert answers == [
        f"<result>{a}</result>" for a in ("lower", "higher", "lower", "higher", "lower", "correct")
    ]
    assert bisection[-1] == ("21", True)  # the answer after "correct": the secret


def test_random_games_stay_inside_the_interval_and_end_as_the_game_says():
    build = build_script()
    rng = np.random.default_rng(0)
    row = {"prompt": "Guess a number from 1 to 63.", "secret": 50, "low": 1, "high": 63, "max_guesses": 6}
    endings = set()
    for _ in range(200):
        segments = build.guess_episode(row, bisect=False, rng=rng)
        low, high = 1, 63
        for (call, _), (result, _) in zip(segments[0:-1:2], segments[1::2]):
            number = int(call.removeprefix("<call>guess(").removesuffix(")</call>"))
            assert low <= number <= high
            answer = result.removeprefix("<result>").removesuffix("</result>")
            low, high = (number + 1, high) if answer == "higher" else (low, number - 1)
        endings.add((segments[-2][0], segments[-1][0]))
    assert endings == {("<result>correct</result>", "50"), ("<result>game over</result>", "")}


def test_encoded_episodes_train_on_the_model_turns_only(built_tok):
    tok = built_tok
    build = build_script()
    ids, attention, loss_mask = build.encode_episodes(
        tok, ["1*2="], [build.calculator_episode({"prompt": "1*2=", "answer": "2"}, calls=True)]
    )
    # <bos> 1 * 2 = | <call> c a l c u l a t o r ( " 1 * 2 " ) </call> <eos> | <result> 2 </result> | 2 <eos>
    assert ids.shape == (1, 5 + 20 + 3 + 2) and attention.all()
    assert loss_mask[0].tolist() == [0] * 5 + [1] * 20 + [0] * 3 + [1] * 2
    assert tok.decode(ids[0]) == '<bos>1*2=<call>calculator("1*2")</call><eos><result>2</result>2<eos>'


def test_calls_are_read_from_the_runners_transcripts():
    """What the measurements count: the calls and results of ``rlrun.rollout.episodes``'s
    transcript, and the final answer only when the model ended the episode."""
    build = build_script()
    transcript = [
        {"role": "user", "content": "Guess a number from 1 to 63."},
        {"role": "assistant", "content": "<call>guess(32)</call>", "tool_calls": [_call("guess", [32])]},
        {"role": "tool", "name": "guess", "content": "lower"},
        {
            "role": "assistant",
            "content": "<call>guess(number=9)</call>",
            "tool_calls": [_call("guess", [], 9)],
        },
        {
            "role": "tool",
            "name": "guess",
            "content": "",
            "error": "9 is outside 1 to 5",
            "error_kind": "raised",
        },
        {"role": "assistant", "content": "9"},
    ]
    episode = build._episode(transcript, answered=True)
    assert episode.calls == [
        (_call("guess", [32]), "lower"),
        (_call("guess", [], 9), "error: 9 is outside 1 to 5"),
    ]
    assert episode.final == "9"
    assert build._episode(transcript, answered=False).final is None
    assert [build._guessed(call) for call, _ in episode.calls] == [32, 9]
    assert build._guessed(_call("guess", ["32"])) is None  # not an integer
    assert build._guessed(_call("calculator", [32])) is None
    assert build._guessed({"text": "<call>guess(</call>", "error": "not a call NAME(ARGS)"}) is None


def _call(name, args, number=None):
    return {"name": name, "args": args, "arguments": {} if number is None else {"number": number}}
