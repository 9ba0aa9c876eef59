"""Optional packages are looked up without the working directory (issue 25)."""

import importlib.util
import sys

from rlrun.facts.packages import installed_spec


def test_a_module_in_the_working_directory_does_not_pass_for_an_installed_package(tmp_path, monkeypatch):
    (tmp_path / "rlrun_absent_package.py").write_text("raise SystemExit('this file must not run')\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [*sys.path, str(tmp_path)])  # as `rlrun` adds it
    assert importlib.util.find_spec("rlrun_absent_package") is not None  # what the check used to see
    assert installed_spec("rlrun_absent_package") is None
    assert str(tmp_path) in sys.path  # the path is as it was
    assert installed_spec("yaml") is not None  # an installed package is still found
