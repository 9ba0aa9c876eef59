"""Every page of the manual (README.md, docs/*.md) is followed as a reader would follow it: its
commands in page order, exactly as written, in one fresh folder (scripts/docs_transcripts.py
reads and runs a page). A command no test can run as written is in that script's NOT_RUN, with
why and the test that runs its equivalent; any other command that fails fails its page's test.
The transcripts and figures a page shows are compared with what its commands print now: all but
wall times and commits where the page's recorded versions are this machine's, the tables'
columns elsewhere. A page whose commands train is a slow test.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rlrun.cli import app

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _load_script():
    spec = importlib.util.spec_from_file_location(
        "docs_transcripts", REPO / "scripts" / "docs_transcripts.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


docs = _load_script()


def page_name(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def costly(page: Path) -> bool:
    """Whether following the page runs more than commands that only read recipes."""
    return any(
        step.file is None and not docs.is_cheap(step.command) and docs.not_run(step.command) is None
        for step in docs.read_page(page.read_text())
    )


# --- reading a page -------------------------------------------------------------------------------

PAGE = """# A page

```bash
pip install -e . && rlrun train a.yaml   # the # in a comment
rlrun sweep s.yaml \\
    --executor slurm
cat > p.jsonl <<'EOF'
{"prompt": "1+1=", "answer": "2"}  # kept: a heredoc's body
EOF
```

```yaml
# my.yaml
extends: grpo
```

```yaml
rlrun: not a command
```

```console
$ rlrun compare x \\
    --plot a.png
┏━━━━━┓
┃ run ┃
...
$ rlrun recipes
grpo
```

Prose: `rlrun validate my.yaml rollout.n=8`, `rlrun train RECIPE [overrides]`, `rlrun validate --portable`,
`rlrun convert trl`, `rlrun train --num-processes N`.
"""


def test_a_page_is_read_as_the_reader_s_steps_in_order():
    steps = docs.read_page(PAGE)
    assert [(s.line, s.command, s.file) for s in steps] == [
        (4, "pip install -e .", None),
        (4, "rlrun train a.yaml", None),
        (5, "rlrun sweep s.yaml --executor slurm", None),
        (
            7,
            'cat > p.jsonl <<\'EOF\'\n{"prompt": "1+1=", "answer": "2"}  # kept: a heredoc\'s body\nEOF',
            None,
        ),
        (13, "", "my.yaml"),
        (22, "rlrun compare x --plot a.png", None),
        (27, "rlrun recipes", None),
    ]
    assert steps[4].content == "# my.yaml\nextends: grpo\n"
    compare, recipes = steps[5], steps[6]
    assert compare.written == ("$ rlrun compare x \\", "    --plot a.png")
    assert (compare.shown, compare.cut) == (("┏━━━━━┓", "┃ run ┃"), True)
    assert (recipes.shown, recipes.cut) == (("grpo",), False)
    assert steps[0].shown is None  # a bash command: its output is not shown


def test_the_prose_names_invocations_not_summaries_or_options():
    assert docs.inline_commands(PAGE) == [(31, "rlrun validate my.yaml rollout.n=8")]


def test_shell_syntax_runs_in_bash_and_variables_carry_to_the_next_command(tmp_path):
    session = docs.Session.start(tmp_path / "reader", [])
    assert docs.is_assignment('S="a=1 b=2"') and not docs.is_assignment("OMP_NUM_THREADS=1 rlrun train x")
    assert session.run('S="trainer.seed=1 rollout.n=4"').exit_code == 0
    assert session.run('echo "$S" > s.txt').exit_code == 0
    assert (tmp_path / "reader" / "s.txt").read_text() == "trainer.seed=1 rollout.n=4\n"
    assert docs.is_plain("rlrun validate dapo") and not docs.is_plain("rlrun validate dapo $S")
    assert docs.is_cheap("rlrun schema > s.json") and not docs.is_plain("rlrun schema > s.json")
    assert not docs.is_cheap("rlrun train grpo")


def test_a_failing_command_stops_the_page_naming_its_line_and_what_to_do(tmp_path):
    page = "# P\n\n```bash\nrlrun recipes\nrlrun validate no_such_recipe\nrlrun recipes\n```\n"
    with pytest.raises(docs.PageError) as failed:
        docs.follow(page, tmp_path / "reader", name="docs/p.md")
    message = str(failed.value)
    assert message.startswith("docs/p.md:5: `rlrun validate no_such_recipe` exited 2")
    assert "no_such_recipe" in message and "NOT_RUN in scripts/docs_transcripts.py" in message


def test_the_reader_s_folder_holds_the_clone_folders_the_page_names_and_its_files(tmp_path):
    page = "```yaml\n# mine.yaml\nextends: ./recipes/grpo.yaml\n```\n```bash\nrlrun validate mine.yaml\n```\n"
    run = docs.follow(page, tmp_path / "reader")
    assert sorted(p.name for p in run.folder.iterdir()) == ["mine.yaml", "recipes"]
    assert (run.folder / "recipes" / "grpo.yaml").read_text() == (REPO / "recipes" / "grpo.yaml").read_text()


TABLE_PAGE = [
    "┏━━━━━━┳━━━━━━━━━━━┳━━━━━━━━━━┓",
    "┃ run  ┃ wall time ┃ git      ┃",
    "┡━━━━━━╇━━━━━━━━━━━╇━━━━━━━━━━┩",
    "│ grpo │ 4m19s     │ 8d260213 │",
    "└──────┴───────────┴──────────┘",
    "final 0.8407",
]


def test_a_transcript_matches_but_for_wall_times_and_commits_where_the_versions_match():
    step = docs.Step(3, command="rlrun compare grpo", shown=tuple(TABLE_PAGE))
    now = [line.replace("4m19s    ", "10m2s    ").replace("8d260213", "3d36fcb1") for line in TABLE_PAGE]
    assert docs.transcript_differences(step, now, exact=True) == []
    now[-1] = "final 0.8352"
    assert docs.transcript_differences(step, now, exact=True) == [
        "line 3: `rlrun compare grpo`, output line 6:\n  page: final 0.8407\n  now:  final 0.8352"
    ]
    assert docs.transcript_differences(step, now, exact=False) == []  # other versions: the columns only
    now[1] = "┃ run  ┃ setup ┃ wall time ┃ git      ┃"
    assert "the tables' columns differ" in docs.transcript_differences(step, now, exact=False)[0]
    cut = docs.Step(3, command="rlrun compare grpo", shown=tuple(TABLE_PAGE[:2]), cut=True)
    assert docs.transcript_differences(cut, TABLE_PAGE, exact=True) == []


def test_rewriting_a_page_replaces_its_outputs_and_figures_and_keeps_the_rest(tmp_path):
    page = (
        "Made with <!--fig:versions-->torch 0<!--/fig-->.\n\n```console\n$ rlrun a \\\n  --b\nold\n...\n"
        "$ rlrun c\nold 1\nold 2\n```\nend\n"
    )
    run = docs.PageRun(tmp_path, outputs={4: ["new 1", "new 2", "new 3"], 8: ["new"]})
    assert docs.rewrite(page, run) == (
        f"Made with <!--fig:versions-->{docs.numerics()}<!--/fig-->.\n\n```console\n$ rlrun a \\\n  --b\nnew 1\n"
        "...\n$ rlrun c\nnew\n```\nend\n"
    )


def dapo_seeds(folder: Path) -> None:
    """The last held-out accuracies of the grpo-vs-dapo sweep's dapo seeds: 85.0, 85.4, 85.2 %."""
    for seed, last in ((0, 0.85), (1, 0.854), (2, 0.852)):
        run = folder / "runs" / "grpo-vs-dapo" / "recipe=dapo" / f"seed-{seed}"
        run.mkdir(parents=True)
        rows = [{"step": 0, "val/accuracy": 0.532}, {"step": 1}, {"step": 2, "val/accuracy": last}]
        (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        (run.parent / f"seed-{seed}.log").write_text("the run's console\n")


def test_a_figure_is_computed_from_the_reader_s_runs_and_transcripts(tmp_path):
    dapo_seeds(tmp_path)
    row = "│ val/accuracy ↑ better │ recipe=dapo │ +0.012 [-0.0092, +0.033] │ better │"
    run = docs.PageRun(tmp_path, outputs={9: [row]})
    assert docs.FIGURES["dapo-seed-finals"](run) == "85.0, 85.4 and 85.2 %"
    assert docs.FIGURES["dapo-reaches-75"](run) == "2"
    assert docs.FIGURES["dapo-accuracy-delta"](run) == "+0.012 [-0.0092, +0.033]"
    assert docs.FIGURES["dapo-accuracy-verdict"](run) == "better"


def test_figures_are_checked_where_the_page_s_versions_are_the_machine_s(tmp_path):
    dapo_seeds(tmp_path)
    run = docs.PageRun(tmp_path)
    page = (
        "Seeds end at <!--fig:dapo-seed-finals-->{}<!--/fig-->, made with <!--fig:versions-->{}<!--/fig-->."
    )
    assert docs.page_differences(page.format("85.0, 85.4 and 85.2 %", docs.numerics()), run) == []
    assert docs.page_differences(page.format("84.2, 85.4 and 86.2 %", docs.numerics()), run) == [
        "<!--fig:dapo-seed-finals-->: the page says '84.2, 85.4 and 86.2 %', the run gives '85.0, 85.4 and 85.2 %'"
    ]
    assert docs.page_differences(page.format("84.2, 85.4 and 86.2 %", "torch 0 (AVX2 kernels)"), run) == []
    unknown = "<!--fig:no-such-->1<!--/fig--> <!--fig:versions-->torch 0<!--/fig-->"
    assert docs.page_differences(unknown, run) == [
        "<!--fig:no-such-->: no such figure in FIGURES (scripts/docs_transcripts.py)"
    ]


# --- the pages ----------------------------------------------------------------------------------


def readme_checks(folder: Path) -> None:
    """The README's first command, as CI's .ci/run and a new user run it: a run named after the
    recipe and the time, finished, its recipe.yaml the file as given."""
    readme = (REPO / "README.md").read_text()
    assert "pip install -e . && rlrun train recipes/dapo.yaml" in readme.split("\n## ")[0]
    (run_dir,) = (folder / "runs").glob("dapo-*")
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["status"] == "finished" and meta["final_step"] == 300
    assert (run_dir / "recipe.yaml").read_text() == (REPO / "recipes" / "dapo.yaml").read_text()


def training_checks(folder: Path) -> None:
    """What the page says `setup.strategy` records for one process is what its runs record."""
    assert "`none` for a single process" in (REPO / "docs" / "training.md").read_text()
    strategies = {
        json.loads(meta.read_text())["setup"]["strategy"] for meta in folder.glob("runs/*/meta.json")
    }
    assert strategies == {"none"}


def compare_checks(folder: Path) -> None:
    """Followed in order, each `--plot` writes its own file (an existing one is never overwritten)."""
    assert (folder / "seeds.png").is_file() and (folder / "runs.png").is_file()


PAGE_CHECKS = {
    "README.md": readme_checks,
    "docs/training.md": training_checks,
    "docs/compare.md": compare_checks,
}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=[pytest.mark.slow] if costly(page) else [], id=page_name(page))
        for page in PAGES
    ],
)
def test_the_page_runs_as_written_and_shows_what_its_commands_print(page, tmp_path):
    text = page.read_text()
    run = docs.follow(text, tmp_path / "reader", name=page_name(page))
    problems = docs.page_differences(text, run)
    assert problems == [], (
        f"{page_name(page)} no longer shows what its commands print:\n" + "\n".join(problems) + "\n"
        f"If the change is right, rewrite the page: python scripts/docs_transcripts.py {page_name(page)}"
    )
    if check := PAGE_CHECKS.get(page_name(page)):
        check(run.folder)


def test_every_command_named_in_prose_is_run_somewhere():
    """A command in a sentence is run: as a command of its page's blocks, here (one that only
    reads recipes), or not at all, as NOT_RUN says and why."""
    unrun = []
    for page in PAGES:
        text = page.read_text()
        in_blocks = {" ".join(s.command.split()) for s in docs.read_page(text)}
        for line, command in docs.inline_commands(text):
            if command not in in_blocks and not docs.is_cheap(command) and docs.not_run(command) is None:
                unrun.append(f"{page_name(page)}:{line}: `{command}`")
    assert unrun == [], (
        "commands in prose that no test runs; put each in a ```bash block of its page, or into "
        "NOT_RUN in scripts/docs_transcripts.py with why it cannot run:\n" + "\n".join(unrun)
    )


@pytest.mark.parametrize(
    "command",
    sorted({c for page in PAGES for _, c in docs.inline_commands(page.read_text()) if docs.is_cheap(c)}),
)
def test_a_command_named_in_prose_that_reads_recipes_runs_as_written(command, tmp_path):
    reader = docs.Session.start(tmp_path / "reader", [docs.Step(0, command=command)])
    result = reader.run(command)
    assert result.exit_code == 0, result.output


def test_each_command_not_run_is_on_a_page_and_its_test_exists():
    written = {
        " ".join(c.split())
        for page in PAGES
        for c in [s.command for s in docs.read_page(page.read_text())]
        + [c for _, c in docs.inline_commands(page.read_text())]
    }
    assert set(docs.NOT_RUN) <= written, f"no longer on a page: {sorted(set(docs.NOT_RUN) - written)}"
    for command, reason in docs.NOT_RUN.items():
        path, _, name = reason.tested_by.partition("::")
        assert (REPO / path.split(" ")[0]).is_file(), (command, reason.tested_by)
        if name:
            tree = ast.parse((REPO / path).read_text())
            assert name in {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}, reason


def test_the_readme_s_annotated_recipe_validates(tmp_path, monkeypatch):
    readme = (REPO / "README.md").read_text()
    recipe = readme[readme.index("```yaml\n# my_dapo.yaml\n") + len("```yaml\n") :]
    (tmp_path / "my_dapo.yaml").write_text(recipe[: recipe.index("```")])
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, shlex.split("validate my_dapo.yaml --strict"))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "16 samples" in text and "steps 150" in text and "rlrun:math_answer" in text  # its own keys
