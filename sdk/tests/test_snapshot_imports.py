"""sdk/python/zundoko_kit/snapshot_imports.py, natively: what a rule set's source would import
when called is found (imports at any depth, relative ones, literal `import_module` names, codecs
named literally) and imported, and so is what that brings in; what cannot be imported is left
out without failing the build; a call's import that was still missed says what to do. Each case
that imports runs in a Python process of its own, on a package written for it. Run by
`make test-langs`; the same inside a component is host/tests/py_imports.rs's."""
import pathlib
import textwrap

from kit_process import run_with_kit
from zundoko_kit import snapshot_imports


def write(root: pathlib.Path, files: dict) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


def test_imports_are_found_at_any_depth_with_relative_and_literal_names(tmp_path):
    write(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/rules.py": """
                import json
                def reconcile():
                    import statistics, os.path as p
                    from fractions import Fraction
                    from . import helper
                    from .deep import thing
                    from .. import nothing_above
                    if True:
                        class Inner:
                            def m(self):
                                import importlib
                                importlib.import_module("difflib")
                                __import__("shlex")
                                importlib.import_module(".sibling", __package__)
                                importlib.import_module(name_only_a_call_knows)
                    "ず".encode("Shift-JIS")
                    b"".decode(encoding="latin1")
                    "x".encode()
                    "x".encode(chosen)
            """,
        },
    )
    import importlib.util

    spec = importlib.util.spec_from_file_location("pkg.rules", tmp_path / "pkg/rules.py")
    module = importlib.util.module_from_spec(spec)
    found = snapshot_imports.imports_in(module)
    assert sorted(found) == sorted([
        "json",
        "statistics",
        "os.path",
        "fractions",
        "fractions.Fraction",
        "pkg.helper",
        "pkg.deep",
        "pkg.deep.thing",
        "importlib",
        "difflib",
        "shlex",
        "encodings.shift_jis",
        "encodings.latin_1",
        "pkg.sibling",
    ]), found


def test_what_calls_would_import_is_imported_and_what_that_brings_in_too(tmp_path):
    write(
        tmp_path,
        {
            "myrules/__init__.py": "",
            "myrules/rules.py": """
                def reconcile():
                    from . import helper
                    import not_installed_anywhere
                    from broken import x
                    return helper.go()
            """,
            "myrules/helper.py": """
                def go():
                    import myrules.deeper
                    return "ku".encode("euc_jp")
            """,
            "myrules/deeper.py": "VALUE = 1\n",
            "broken.py": "raise RuntimeError('broken on import')\n",
        },
    )
    out = run_with_kit(
        """
        import sys
        import myrules.rules
        from zundoko_kit import snapshot_imports
        for name in ("myrules.helper", "myrules.deeper", "_strptime", "encodings.euc_jp", "encodings.cp1250"):
            sys.modules.pop(name, None)
        added = snapshot_imports.import_for_calls()
        for name in ("myrules.helper", "myrules.deeper", "_strptime", "encodings.euc_jp", "encodings.shift_jis"):
            assert name in sys.modules, name
            assert name in added, (name, added)
        assert "not_installed_anywhere" not in sys.modules
        assert "broken" not in sys.modules
        assert "encodings.cp1250" not in sys.modules, "not named by the rule set, not in the list"
        print("ok")
        """,
        tmp_path,
    )
    assert out.strip() == "ok"


def test_a_module_known_by_another_name_is_read_once(tmp_path):
    write(tmp_path, {"real_name.py": "def f():\n    import json\n"})
    out = run_with_kit(
        """
        import sys
        import real_name
        sys.modules["an_alias"] = real_name
        from zundoko_kit import snapshot_imports
        snapshot_imports.import_for_calls()
        print("ok")
        """,
        tmp_path,
        timeout=60,
    )
    assert out.strip() == "ok"


def test_the_standard_library_is_not_read():
    import json

    assert not snapshot_imports.outside_stdlib("json", json)
    assert not snapshot_imports.outside_stdlib("wit_world.imports", snapshot_imports)
    assert snapshot_imports.outside_stdlib("zundoko_kit.snapshot_imports", snapshot_imports)


def test_every_module_of_the_list_is_in_the_standard_library():
    missing = []
    for name in snapshot_imports.STDLIB_AT_FIRST_USE:
        try:
            __import__(name)
        except ImportError as e:
            missing.append(f"{name}: {e}")
    assert not missing, missing


def test_a_missed_import_says_to_import_it_at_the_top():
    hinted = snapshot_imports.with_hint(ModuleNotFoundError("No module named 'difflib'", name="difflib"))
    assert isinstance(hinted, ModuleNotFoundError) and hinted.name == "difflib"
    assert str(hinted) == (
        "No module named 'difflib' (a call can import only what was imported when the component"
        " was built: import difflib at the top of a module of the rule set)"
    )
    try:
        "x".encode("no-such-codec-here")
    except LookupError as e:
        assert str(e) == "unknown encoding: no-such-codec-here"
    hinted = snapshot_imports.with_hint(LookupError("unknown encoding: Shift-JIS"))
    assert "import encodings.shift_jis at the top" in str(hinted), str(hinted)
    assert snapshot_imports.with_hint(ValueError("x")) is None
    assert snapshot_imports.with_hint(KeyError("unknown encoding: x")) is None
    assert snapshot_imports.codec_module("sjis") == "encodings.shift_jis"
    assert snapshot_imports.codec_module("UTF-16") == "encodings.utf_16"
