"""The tiny agent model and its build: its tokenizer writes and reads the plain tool format on
transformers 4.x and 5.x alike, its synthesized episodes follow the format and the games' rules,
its measurements read the episode runner's transcripts; the shipped model loads, behaves as
its build measured, and is what the build makes."""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.agents.formats import plain_format_problem
from rlrun.embedded import MODELS_DIR, resolve_model_path
from rlrun.facts.machine import numerics
from rlrun.rollout import ROLLOUT_ENGINES
from tests.embedded.test_tiny_models import ARCHITECTURE

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "build_tiny_agent.py"
FORMAT_TOKENS = ("<call>", "</call>", "<result>", "</result>")
# A solved calculator episode as the runner lays it out: prompt, the model's turn, the result,
# the model's answer (the text between is what encode sees; EOS ends each model turn).
AGENT = MODELS_DIR / "tiny-agent"
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
    assert build.calculator_episode(record, calls=False, result="731") == [("731", True)]
    rng = np.random.default_rng(0)
    direct = [e for e in (build._calculator_or_guess(record, rng) for _ in range(400)) if len(e) == 1]
    assert 0.65 < len(direct) / 400 < 0.85  # CALL_SHARE 0.25 call; sd 0.022
    assert all(len(text) == 3 and text.isdigit() and text[0] != "0" for [(text, _)] in direct)
    assert build.calculator_episode(record, calls=True) == [
        ('<call>calculator("12*34")</call>', True),
        ("<result>408</result>", False),
        ("408", True),
    ]
    row = {"prompt": "Guess a number from 1 to 63.", "secret": 21, "low": 1, "high": 63, "max_guesses": 6}
    bisection = build.guess_episode(row, np.random.default_rng(0), bisect_share=1.0)
    guesses = [text for text, sampled in bisection if sampled][:-1]
    answers = [text for text, sampled in bisection if not sampled]
    assert guesses == [f"<call>guess({n})</call>" for n in (32, 16, 24, 20, 22, 21)]
    assert answers == [
        f"<result>{a}</result>"
        for a in ("lower 1-31", "higher 17-31", "lower 17-23", "higher 21-23", "lower 21-21", "correct")
    ]
    assert bisection[-1] == ("21", True)  # the answer after "correct": the secret


def test_half_the_calls_trained_on_show_a_random_result_to_copy():
    build = build_script()
    record = {"prompt": "12*34=", "answer": "408"}
    assert build.calculator_episode(record, calls=True, result="77")[1:] == [
        ("<result>77</result>", False),
        ("77", True),
    ]
    rng = np.random.default_rng(0)
    shown = [build.shown_result(record, rng) for _ in range(2000)]
    assert 0.45 < shown.count("408") / len(shown) < 0.55  # RANDOM_RESULT_SHARE 0.5, 2000 draws: sd 0.011
    assert {len(s) for s in shown} == set(range(1, 8)) and all(s.isdigit() for s in shown)


def test_three_games_in_ten_bisect_the_others_ignore_the_answers_and_all_end_as_the_game_says():
    build = build_script()
    rng = np.random.default_rng(0)
    row = {"prompt": "Guess a number from 1 to 63.", "secret": 50, "low": 1, "high": 63, "max_guesses": 6}
    endings, bisecting, outside = set(), [], 0
    for _ in range(400):
        segments = build.guess_episode(row, rng)
        low, high, middles = 1, 63, []
        for (call, _), (result, _) in zip(segments[0:-1:2], segments[1::2]):
            number = int(call.removeprefix("<call>guess(").removesuffix(")</call>"))
            assert 1 <= number <= 63
            outside += not low <= number <= high
            middles.append(number == (low + high) // 2)
            answer = result.removeprefix("<result>").removesuffix("</result>")
            if answer.startswith(("higher", "lower")):
                low = max(low, number + 1) if answer.startswith("higher") else low
                high = min(high, number - 1) if answer.startswith("lower") else high
                assert answer.endswith(f" {low}-{high}")
        bisecting.append(all(middles))
        if all(middles):  # 50 is 32, 48, 56, 52, 50: found in 5
            assert [call for call, _ in segments[0:-1:2]] == [
                f"<call>guess({n})</call>" for n in (32, 48, 56, 52, 50)
            ]
        endings.add((segments[-2][0], segments[-1][0]))
    assert endings == {("<result>correct</result>", "50"), ("<result>game over</result>", "")}
    assert 0.22 < sum(bisecting) / 400 < 0.38  # BISECT_SHARE 0.3 of the games, 400 games: sd 0.023
    assert outside > 0  # the others' guesses leave the interval: the answers are not used


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
    answer_ids, _, answer_mask = build.encode_episodes(
        tok,
        ["1*2="],
        [build.calculator_episode({"prompt": "1*2=", "answer": "2"}, calls=True)],
        answer_only=True,
    )
    assert answer_ids.equal(ids) and answer_mask[0].tolist() == [0] * 28 + [1] * 2  # the copied answer only


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


def test_the_shipped_agent_is_a_small_qwen2_with_the_builds_tokenizer(tmp_path):
    """Plain transformers loads it (4.x or 5.x: the tokenizer files name a class both have, CI
    loads them on the lowest supported transformers), and its tokenizer files are the build's."""
    assert resolve_model_path("rlrun:tiny-agent") == str(AGENT)
    model, tok = AutoModelForCausalLM.from_pretrained(AGENT), AutoTokenizer.from_pretrained(AGENT)
    assert model.config.model_type == "qwen2" and model.dtype == torch.float32
    assert sum(p.numel() for p in model.parameters()) < 2_000_000
    assert sum(f.stat().st_size for f in AGENT.iterdir()) < 5_000_000
    assert model.generation_config.eos_token_id == tok.eos_token_id
    assert plain_format_problem(tok) is None  # the runner's own check of the plain format
    build = build_script()
    build.save_tokenizer(build.agent_tokenizer(), tmp_path)
    for file in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / file).read_bytes() == (AGENT / file).read_bytes(), file


def _measured(folder: Path, info: dict) -> dict:
    """The build's measurements of the model in `folder`, on the episodes its build_info.json
    counts, with the build's seed and one thread (the build's numerics)."""
    build = build_script()
    model, tok = AutoModelForCausalLM.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    engine = ROLLOUT_ENGINES.get("hf")(model.eval(), tok)
    args = argparse.Namespace(eval_prompts=info["calculator"]["episodes"], seed=info["seed"])
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return build.measure(engine, tok, args, alone=True)
    finally:
        torch.set_num_threads(threads)


RATES = {
    "calculator": ("success", "call_rate", "calls_written_right", "results_copied", "success_without_tool"),
    "guess_number": (
        "success",
        "legal_guesses",
        "first_guess_mid",
        "secret_said",
        "success_without_environment",
    ),
}


@pytest.mark.slow
def test_the_shipped_agent_behaves_as_its_build_measured():
    """Exactly where this machine's numerics are the build's; elsewhere each rate within four
    standard errors of the difference of two samples of its size, and the claims the models
    README makes: a minority of calculator prompts call, results are copied, nothing is solved
    without the tool or the environment, and most games are not yet won."""
    info = json.loads((AGENT / "build_info.json").read_text())
    figures = _measured(AGENT, info)
    if info["versions"] == numerics():
        assert figures == {task: info[task] for task in RATES}
    for task, names in RATES.items():
        for name in names:
            recorded, episodes = info[task][name], info[task]["episodes"]
            spread = 4 * math.sqrt(2 * max(recorded * (1 - recorded), 0.01) / episodes)
            assert abs(figures[task][name] - recorded) <= spread, (task, name, figures[task][name], recorded)
    calc, guess = figures["calculator"], figures["guess_number"]
    assert calc["call_rate"] < 0.5 and calc["results_copied"] >= 0.9
    assert calc["success_without_tool"] < 0.1 and guess["success_without_environment"] < 0.1
    assert guess["success"] < 0.75 and guess["legal_guesses"] > 0.5  # most guesses legal, most games lost


@pytest.mark.slow
def test_the_build_script_reproduces_the_shipped_agent(tmp_path):
    """The whole build (minutes). The same seed rounds differently with other libraries or CPU
    kernels (`rlrun.facts.machine.numerics`), and the build may then take another step's
    checkpoint. So: file for file where this machine's numerics are the shipped model's; with
    any numerics, the shipped architecture and tokenizer, a checkpoint whose measured behaviour is
    in the build's bands, and weights that, loaded again, measure what its build_info.json records."""
    build = build_script()
    env = {**os.environ, "PYTHONPATH": str(SCRIPT.parents[1])}  # this checkout's rlrun
    subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(tmp_path)], check=True, env=env, capture_output=True
    )
    shipped, rebuilt = (json.loads((d / "build_info.json").read_text()) for d in (AGENT, tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in AGENT.iterdir())
    assert rebuilt["versions"] == numerics()
    if shipped["versions"] == numerics():
        for file in AGENT.iterdir():
            assert (tmp_path / file.name).read_bytes() == file.read_bytes(), file.name
    config, shipped_config = (json.loads((d / "config.json").read_text()) for d in (tmp_path, AGENT))
    assert {key: config[key] for key in ARCHITECTURE} == {key: shipped_config[key] for key in ARCHITECTURE}
    for file in ("tokenizer.json", "tokenizer_config.json"):
        assert (tmp_path / file).read_bytes() == (AGENT / file).read_bytes(), file
    assert build.in_bands(rebuilt)
    assert _measured(tmp_path, rebuilt) == {task: rebuilt[task] for task in RATES}
