"""Importing what a recipe names: modules and `pkg.module:attr` paths, failures reported."""

import sys

import pytest

from rlrun.user_code import ImportPathError, UserModuleError, import_user_module, resolve_import_path


@pytest.fixture
def modules(tmp_path, monkeypatch):
    (tmp_path / "uc_good.py").write_text("class Box:\n    def inner(self):\n        return 1\n\nVALUE = 3\n")
    (tmp_path / "uc_raises.py").write_text("raise RuntimeError('broken at import')\n")
    (tmp_path / "uc_exits.py").write_text("import sys\nsys.exit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("uc_good", "uc_raises", "uc_exits"):
        sys.modules.pop(name, None)


def test_a_dotted_attribute_is_found(modules):
    assert resolve_import_path("uc_good:VALUE") == 3
    assert resolve_import_path("uc_good:Box.inner").__name__ == "inner"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("uc_good", "not an import path of the form 'pkg.module:name'"),
        (":VALUE", "not an import path"),
        ("uc_good:", "not an import path"),
        ("uc_missing_module:f", "cannot import module 'uc_missing_module'"),
        ("uc_good:nothing", "module 'uc_good' has no attribute 'nothing'"),
        (
            "uc_raises:f",
            "the module 'uc_raises' raised RuntimeError('broken at import') while being imported",
        ),
        ("uc_exits:f", "the module 'uc_exits' raised SystemExit(4) while being imported"),
    ],
)
def test_what_cannot_be_imported_says_why(modules, spec, message):
    with pytest.raises(ImportPathError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_import_path(spec)


def test_a_module_that_exits_is_an_error_not_an_exit(modules):
    with pytest.raises(UserModuleError, match="SystemExit"):
        import_user_module("uc_exits")


def test_a_named_entry_that_is_no_import_path_lists_the_builtins(modules):
    from rlrun.user_code import resolve_named

    with pytest.raises(
        ImportPathError, match=r"tool 'calc' is neither a built-in \(rlrun:a, rlrun:b\) nor an"
    ):
        resolve_named("calc", what="tool", builtins=["rlrun:a", "rlrun:b"])
    with pytest.raises(ImportPathError, match="tool 'uc_good:nothing': module 'uc_good' has no attribute"):
        resolve_named("uc_good:nothing", what="tool", builtins=[])
    assert resolve_named("uc_good:VALUE", what="tool", builtins=[]) == 3


def test_a_python_object_name_resolves_only_while_its_table_is_in_force():
    from rlrun.user_code import live_objects

    marker = object()
    with live_objects({"python-object:thing": marker}):
        with live_objects({"python-object:other": 1}):
            assert resolve_import_path("python-object:thing") is marker  # the outer table still holds it
        assert resolve_import_path("python-object:thing") is marker
    with pytest.raises(ImportPathError, match="was not given it: from Python, pass the object again"):
        resolve_import_path("python-object:thing")


def test_import_path_of_names_only_what_importing_gives_back():
    import json

    from rlrun.user_code import import_path_of

    assert import_path_of(json.dumps) == "json:dumps"
    assert import_path_of(lambda: 0) is None
    assert import_path_of(object()) is None
