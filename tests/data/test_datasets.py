import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from transformers import AutoTokenizer

from rlrun.data import (
    DataError,
    PromptSampler,
    build_prompt_dataset,
    check_data_file,
    left_pad,
    load_file,
    load_prompt_datasets,
)
from rlrun.embedded import resolve_model_path
from rlrun.schema.data import Data

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m.role }}: {{ m.content }} {% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(resolve_model_path("rlrun:tiny-base"))


@pytest.fixture
def chat_tokenizer():
    tok = AutoTokenizer.from_pretrained(resolve_model_path("rlrun:tiny-base"))
    tok.chat_template = CHAT_TEMPLATE
    return tok


def _verl_parquet(path):
    rows = [
        {
            "data_source": "openai/gsm8k",
            "prompt": [{"role": "user", "content": f"what is {a}+{a}?"}],
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": str(2 * a)},
            "extra_info": {"index": a, "split": "train"},
        }
        for a in range(5)
    ]
    pq.write_table(pa.Table.from_pylist(rows), path)


def test_generator_datasets_are_tokenised_once(tokenizer):
    data = {
        "source": "rlrun:arithmetic",
        "arithmetic": {"digits": 2, "operators": ["+"], "train_size": 64, "val_size": 16, "seed": 1},
    }
    train, val = load_prompt_datasets(Data.model_validate(data), tokenizer)
    assert (len(train), len(val)) == (64, 16)
    assert train.prompt_ids[0] == tokenizer(train.prompts[0])["input_ids"]
    assert train.prompt_ids[0][0] == tokenizer.bos_token_id
    assert train.extra == {"data_source": ["rlrun:arithmetic"] * 64}
    assert not {p for p in train.prompts} & {p for p in val.prompts}


def test_the_guessing_game_rows_carry_its_columns(tokenizer):
    data = {"source": "rlrun:guess_number", "guess_number": {"high": 31, "train_size": 40, "val_size": 500}}
    train, val = load_prompt_datasets(Data.model_validate(data), tokenizer)
    assert len(train) == 40 and len(val) == 31  # validation: every secret once
    assert train.prompts[0] == "Guess a number from 1 to 31."
    assert set(train.extra) == {"secret", "low", "high", "max_guesses", "data_source"}
    assert train.extra["max_guesses"][0] == 5 and train.extra["high"][0] == 31
    assert [str(s) for s in train.extra["secret"]] == train.ground_truths
    assert sorted(val.extra["secret"]) == list(range(1, 32))


def test_verl_parquet_loads_as_is(tmp_path, tokenizer):
    path = tmp_path / "train.parquet"
    _verl_parquet(path)
    train, val = load_prompt_datasets(
        Data.model_validate({"source": str(path), "val_source": str(path)}), tokenizer
    )
    assert train.prompts[3] == "what is 3+3?"  # no chat template: the message text itself
    assert train.ground_truths[3] == "6"  # reward_model.ground_truth, found without configuration
    assert train.extra["data_source"][0] == "openai/gsm8k"
    assert train.extra["extra_info"][3] == {"index": 3, "split": "train"}
    assert len(val) == 5


def test_chat_template_auto_true_false(tmp_path, tokenizer, chat_tokenizer):
    path = tmp_path / "train.parquet"
    _verl_parquet(path)
    templated = build_prompt_dataset(load_file(path), chat_tokenizer, answer_key="reward_model.ground_truth")
    assert templated.prompts[0] == "user: what is 0+0? assistant: "
    assert templated.prompt_ids[0][0] != chat_tokenizer.bos_token_id  # the template owns special tokens
    plain = build_prompt_dataset(load_file(path), chat_tokenizer, apply_chat_template=False)
    assert plain.prompts[0] == "what is 0+0?"
    with pytest.raises(DataError, match="no chat template"):
        build_prompt_dataset(load_file(path), tokenizer, apply_chat_template=True)


def test_system_prompt_and_template_wrap_every_prompt(tmp_path, tokenizer, chat_tokenizer):
    records = [{"prompt": "2+3=", "answer": "5"}]
    options = {"system_prompt": "Reply with a number.", "prompt_template": "Q: {prompt} {x}"}
    chat = build_prompt_dataset(records, chat_tokenizer, **options)
    assert chat.prompts == ["system: Reply with a number. user: Q: 2+3= {x} assistant: "]
    plain = build_prompt_dataset(records, tokenizer, **options)  # no chat template: one line each
    assert plain.prompts == ["Reply with a number.\nQ: 2+3= {x}"]
    path = tmp_path / "train.parquet"
    _verl_parquet(path)  # message lists: the last user message is wrapped
    (verl,) = (
        build_prompt_dataset(load_file(path), chat_tokenizer, prompt_template="[{prompt}]").take([1]).prompts
    )
    assert verl == "user: [what is 1+1?] assistant: "
    owned = [
        {"prompt": [{"role": "system", "content": "mine"}, {"role": "user", "content": "hi"}], "answer": "1"}
    ]
    assert build_prompt_dataset(owned, chat_tokenizer, system_prompt="not used").prompts == [
        "system: mine user: hi assistant: "
    ]


def test_few_shot_messages_come_after_the_system_message_and_before_the_prompt(tokenizer, chat_tokenizer):
    shots = [{"role": "user", "content": "1+1="}, {"role": "assistant", "content": "2"}]
    records = [{"prompt": "2+3=", "answer": "5"}]
    options = {"system_prompt": "Add.", "few_shot_messages": shots, "prompt_template": "Q: {prompt}"}
    (prompt,) = build_prompt_dataset(records, chat_tokenizer, **options).prompts
    # the prompt template wraps the row's question only, not the examples
    assert prompt == "system: Add. user: 1+1= assistant: 2 user: Q: 2+3= assistant: "
    owned = [{"prompt": [{"role": "user", "content": "hi"}], "answer": "1"}]
    assert build_prompt_dataset(owned, chat_tokenizer, few_shot_messages=shots).prompts == [
        "user: 1+1= assistant: 2 user: hi assistant: "
    ]
    with pytest.raises(DataError, match="few_shot_messages are chat messages"):
        build_prompt_dataset(records, tokenizer, few_shot_messages=shots)  # no chat template
    for bad in ({"role": "system", "content": "x"}, {"role": "user"}, {"content": "x"}):
        with pytest.raises(ValueError, match="message 0 needs a role"):
            Data.model_validate({"few_shot_messages": [bad]})


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_json_files_with_dotted_keys(tmp_path, tokenizer, suffix):
    records = [{"q": {"text": f"{i}+1="}, "meta": {"answer": i + 1}, "tag": "t"} for i in range(4)]
    path = tmp_path / f"data{suffix}"
    text = "\n".join(map(json.dumps, records)) if suffix == ".jsonl" else json.dumps(records)
    path.write_text(text)
    train, val = load_prompt_datasets(
        Data.model_validate({"source": str(path), "prompt_key": "q.text", "answer_key": "meta.answer"}),
        tokenizer,
    )
    assert val is None  # a file alone has no validation split
    assert train.prompts == ["0+1=", "1+1=", "2+1=", "3+1="]
    assert train.ground_truths == ["1", "2", "3", "4"]
    assert train.extra == {"tag": ["t"] * 4}


def test_missing_keys_and_bad_files_are_reported(tmp_path, tokenizer):
    path = tmp_path / "d.jsonl"
    path.write_text('{"prompt": "1+1="}\n')
    with pytest.raises(
        DataError, match=r"record 0 has neither 'answer' nor 'reward_model.ground_truth' \(keys: prompt\)"
    ):
        load_prompt_datasets(Data.model_validate({"source": str(path)}), tokenizer)
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n{oops\n')
    with pytest.raises(DataError, match=r"d.jsonl, line 2, column 1, `data.source`: invalid JSON") as info:
        load_file(path)
    assert (info.value.issues[0].file, info.value.issues[0].line) == (str(path), 2)
    with pytest.raises(DataError, match="unsupported data file type"):
        load_file(tmp_path / "d.csv")


def test_hub_datasets_need_the_datasets_package_or_network(tokenizer):
    with pytest.raises(DataError, match="hf:nobody/nothing"):
        load_prompt_datasets(Data.model_validate({"source": "hf:nobody/nothing"}), tokenizer)


def test_an_installed_reader_that_cannot_be_imported_is_a_data_error(tokenizer, tmp_path, monkeypatch):
    # a `datasets` newer than the huggingface_hub beside it fails like this at import
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "__init__.py").write_text("raise ImportError('cannot import name X from hub')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "datasets", raising=False)
    with pytest.raises(DataError) as caught:
        load_prompt_datasets(Data.model_validate({"source": "hf:some/set"}), tokenizer)
    assert caught.value.where == "hf:some/set"
    assert "`datasets` package is installed but cannot be imported (ImportError: cannot import name X" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("policy", "kept", "dropped", "truncated"), [("drop", 2, 2, 0), ("truncate", 4, 0, 2)]
)
def test_overlong_prompts_are_dropped_or_truncated_and_counted(tokenizer, policy, kept, dropped, truncated):
    records = [{"prompt": p, "answer": "0"} for p in ["1+1=", "11+11=", "1+2=", "123+123="]]
    data = build_prompt_dataset(records, tokenizer, max_prompt_tokens=5, overlong=policy)
    assert len(data) == kept
    assert (data.report.total, data.report.dropped, data.report.truncated) == (4, dropped, truncated)
    assert max(map(len, data.prompt_ids)) <= 5
    assert str(data.report).startswith(f"{kept} of 4 prompts kept")
    if policy == "truncate":
        assert data.prompts[3] == "+123="  # the end of the question is kept


def test_overlong_prompts_can_be_an_error(tokenizer):
    records = [{"prompt": "123+123=", "answer": "246"}]
    with pytest.raises(DataError, match="1 prompts are longer than max_prompt_tokens=5"):
        build_prompt_dataset(records, tokenizer, max_prompt_tokens=5, overlong="error")


def test_sampler_epochs_shuffle_and_resume():
    sampler = PromptSampler(10, seed=3)
    first_epoch = sampler.next_indices(10)
    assert sorted(first_epoch) == list(range(10)) and first_epoch != list(range(10))
    assert sampler.epoch == 1
    resumed = PromptSampler(10, seed=3)
    resumed.load_state_dict(json.loads(json.dumps(sampler.state_dict())))
    assert resumed.next_indices(25) == sampler.next_indices(25)  # spans epochs 1 to 3
    assert PromptSampler(4, shuffle=False).next_indices(6) == [0, 1, 2, 3, 0, 1]
    with pytest.raises(ValueError, match="size, shuffle, seed"):
        PromptSampler(11, seed=3).load_state_dict(sampler.state_dict())


def test_left_pad():
    ids, mask = left_pad([[5, 6, 7], [8], [9, 10]], pad_id=0)
    assert ids.tolist() == [[5, 6, 7], [0, 0, 8], [0, 9, 10]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1], [0, 1, 1]]


def test_check_data_file_reads_only_the_first_record_or_the_parquet_schema(tmp_path):
    verl = tmp_path / "verl.parquet"
    _verl_parquet(verl)
    check_data_file(str(verl), prompt_key="prompt", answer_key="answer")  # reward_model.ground_truth
    with pytest.raises(
        DataError, match=r"the file has no 'question' \(keys: ability, data_source, extra_info"
    ):
        check_data_file(str(verl), prompt_key="question", answer_key="answer")
    lines = tmp_path / "d.jsonl"
    lines.write_text('{"q": {"text": "1+1="}, "a": "2"}\nnot json: never read by the check\n')
    check_data_file(str(lines), prompt_key="q.text", answer_key="a")
    with pytest.raises(
        DataError, match=r"the first record has no 'answer' \(keys: a, q\); set data.answer_key"
    ):
        check_data_file(str(lines), prompt_key="q.text", answer_key="answer")
    lines.write_text("\n")
    with pytest.raises(DataError, match="the file holds no records"):
        check_data_file(str(lines), prompt_key="q", answer_key="a")
    lines.write_text("[1, 2]\n")
    with pytest.raises(DataError, match="line 1, column 1, `data.source`: each line must be a JSON object"):
        check_data_file(str(lines), prompt_key="q", answer_key="a")


def test_the_dataset_knows_its_prompts_were_chat_messages(tmp_path, tokenizer):
    path = tmp_path / "train.parquet"
    _verl_parquet(path)
    assert build_prompt_dataset(load_file(path), tokenizer).take([1, 2]).chat  # TRL rewards then see messages
    plain = [{"prompt": "1+1=", "answer": "2"}]
    assert not build_prompt_dataset(plain, tokenizer).chat


def test_a_list_source_reads_every_file_in_order_and_keeps_each_data_source(tmp_path, tokenizer):
    """verl's data.train_files list: each file's rows, each row still routed by its own data_source."""
    first, second = tmp_path / "gsm8k.parquet", tmp_path / "math.jsonl"
    _verl_parquet(first)
    record = {"data_source": "lighteval/MATH", "prompt": "what is 1/2+1/2?", "answer": "1"}
    second.write_text(json.dumps(record) + "\n")
    data = Data.model_validate({"source": [str(first), str(second)], "val_source": [str(second)]})
    train, val = load_prompt_datasets(data, tokenizer)
    assert len(train) == 6 and train.prompts[5] == "what is 1/2+1/2?"
    assert train.extra["data_source"] == ["openai/gsm8k"] * 5 + ["lighteval/MATH"]
    assert train.ground_truths == ["0", "2", "4", "6", "8", "1"]
    assert len(val) == 1
    with pytest.raises(DataError, match="missing.parquet"):
        load_prompt_datasets(
            Data.model_validate({"source": [str(first), str(tmp_path / "missing.parquet")]}), tokenizer
        )


def test_messages_mode_templates_chat_prompts_only_as_trl_does(chat_tokenizer):
    """TRL applies the chat template to prompts written as messages and tokenizes text prompts
    as they are (with the tokenizer's special tokens); its chat_template_kwargs reach the template."""
    chat_tokenizer.chat_template = (
        CHAT_TEMPLATE + "{% if enable_thinking is defined %}think={{ enable_thinking }}{% endif %}"
    )
    records = [
        {"prompt": [{"role": "user", "content": "2+2?"}], "answer": "4"},
        {"prompt": "3+3=", "answer": "6"},
    ]
    data = build_prompt_dataset(
        records,
        chat_tokenizer,
        apply_chat_template="messages",
        chat_template_kwargs={"enable_thinking": False},
    )
    assert data.prompts == ["user: 2+2? assistant: think=False", "3+3="]
    assert data.prompt_ids[1] == chat_tokenizer("3+3=")["input_ids"]  # special tokens as TRL adds them
    assert data.messages[0] == [{"role": "user", "content": "2+2?"}] and data.chat
    auto = build_prompt_dataset(records, chat_tokenizer)  # rlrun's auto: every prompt templated
    assert auto.prompts[1] == "user: 3+3= assistant: "


def test_no_prompt_limit_keeps_long_prompts(tokenizer):
    records = [{"prompt": "word " * 300, "answer": "1"}]
    assert len(build_prompt_dataset(records, tokenizer, max_prompt_tokens=None)) == 1
    with pytest.raises(DataError, match="no prompts left"):
        build_prompt_dataset(records, tokenizer, max_prompt_tokens=64)


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_a_byte_order_mark_at_the_start_of_a_json_file_is_not_data(tmp_path, suffix):
    """Windows editors and spreadsheet exports write one; it was refused as invalid JSON."""
    path = tmp_path / f"d{suffix}"
    record = {"prompt": "1+1=", "answer": "2"}
    text = json.dumps(record) + "\n" if suffix == ".jsonl" else json.dumps([record])
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert load_file(path) == [record]
    check_data_file(str(path), prompt_key="prompt", answer_key="answer")


def test_rows_given_from_python_read_as_a_file_s_records_while_given():
    from rlrun.data.sources import read_columns
    from rlrun.user_code import ImportPathError, live_objects

    rows = [{"prompt": "1+1=", "answer": "2"}, {"prompt": "2+3=", "answer": "5"}]
    with live_objects({"python-object:data-x": rows}):
        loaded = load_file("python-object:data-x")
        assert loaded == rows and loaded[0] is not rows[0]  # a copy: the run may change it
        assert read_columns("python-object:data-x") == ({"prompt", "answer"}, rows[0])
    with pytest.raises(ImportPathError, match="pass the object again"):
        load_file("python-object:data-x")
