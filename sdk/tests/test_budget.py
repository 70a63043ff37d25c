"""sdk/budget.py: the budget a Python or JavaScript rule set asks for (or its language's
default) is what lands in its component's `zundoko:budget` section, and a budget it cannot
write is refused naming the file and the key. Run by `make test-langs`."""
import json
import pathlib
import subprocess
import sys

import pytest

SDK = pathlib.Path(__file__).resolve().parent.parent
# The smallest component: magic, component version and layer, no sections.
EMPTY_COMPONENT = b"\0asm\x0d\x00\x01\x00"


def read_leb(data, at):
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def budget_sections(module):
    """Every top-level `zundoko:budget` section of the component, decoded."""
    data = module.read_bytes()
    found, at = [], 8
    while at < len(data):
        section_id = data[at]
        size, body = read_leb(data, at + 1)
        at = body + size
        if section_id == 0:
            name_len, name_at = read_leb(data, body)
            if data[name_at:name_at + name_len] == b"zundoko:budget":
                found.append(json.loads(data[name_at + name_len:at]))
    return found


def build(tmp_path, files):
    """Run sdk/budget.py on a rule set made of `files` and an empty component."""
    rules = tmp_path / "rules"
    rules.mkdir()
    for name, text in files.items():
        (rules / name).write_text(text)
    module = tmp_path / "rules.wasm"
    module.write_bytes(EMPTY_COMPONENT)
    ran = subprocess.run([sys.executable, SDK / "budget.py", rules, module], capture_output=True, text=True)
    return ran, module


def written(tmp_path, files):
    ran, module = build(tmp_path, files)
    assert ran.returncode == 0, ran.stderr
    [budget] = budget_sections(module)
    return budget


PYPROJECT = '[project]\nname = "r"\nversion = "0.1.0"\n'


def test_a_python_rule_set_asking_for_nothing_gets_pythons_default(tmp_path):
    assert written(tmp_path, {"pyproject.toml": PYPROJECT}) == {"memoryMiB": 48, "fuel": 100_000_000, "moduleMiB": 24}


def test_a_javascript_rule_set_asking_for_nothing_gets_javascripts_default(tmp_path):
    assert written(tmp_path, {"package.json": '{"name": "r"}'}) == {"memoryMiB": 32, "fuel": 100_000_000, "moduleMiB": 16}


def test_what_a_python_rule_set_asks_for_is_written_and_the_rest_defaults(tmp_path):
    asked = PYPROJECT + "[tool.zundoko.budget]\nmemory-mib = 16\nfuel = 400000000\n"
    assert written(tmp_path, {"pyproject.toml": asked}) == {"memoryMiB": 16, "fuel": 400_000_000, "moduleMiB": 24}


def test_what_a_javascript_rule_set_asks_for_is_written_and_the_rest_defaults(tmp_path):
    asked = json.dumps({"name": "r", "zundoko": {"budget": {"memoryMiB": 8, "moduleMiB": 12}}})
    assert written(tmp_path, {"package.json": asked}) == {"memoryMiB": 8, "fuel": 100_000_000, "moduleMiB": 12}


def test_a_second_run_replaces_the_section(tmp_path):
    ran, module = build(tmp_path, {"package.json": '{"name": "r"}'})
    assert ran.returncode == 0, ran.stderr
    (tmp_path / "rules" / "package.json").write_text('{"zundoko": {"budget": {"fuel": 7}}}')
    again = subprocess.run([sys.executable, SDK / "budget.py", tmp_path / "rules", module], capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert budget_sections(module) == [{"memoryMiB": 32, "fuel": 7, "moduleMiB": 16}]


def test_a_directory_of_neither_language_is_refused(tmp_path):
    ran, module = build(tmp_path, {"Cargo.toml": "[package]\n"})
    assert ran.returncode != 0
    assert "neither pyproject.toml nor package.json" in ran.stderr
    assert module.read_bytes() == EMPTY_COMPONENT


@pytest.mark.parametrize(
    "files, says",
    [
        # A misspelt key would silently give the default: refused, naming it and the right ones.
        ({"pyproject.toml": PYPROJECT + "[tool.zundoko.budget]\nmemory_mib = 64\n"}, "memory_mib"),
        ({"package.json": '{"zundoko": {"budget": {"memoryMib": 64}}}'}, "memoryMib"),
        ({"pyproject.toml": PYPROJECT + '[tool.zundoko.budget]\nfuel = "lots"\n'}, "fuel"),
        ({"pyproject.toml": PYPROJECT + "[tool.zundoko.budget]\nmemory-mib = 0\n"}, "memory-mib"),
        ({"package.json": '{"zundoko": {"budget": {"fuel": -1}}}'}, "fuel"),
        ({"package.json": '{"zundoko": {"budget": {"moduleMiB": 1.5}}}'}, "moduleMiB"),
        ({"package.json": '{"zundoko": {"budget": {"memoryMiB": true}}}'}, "memoryMiB"),
        ({"package.json": '{"zundoko": {"budget": 64}}'}, "zundoko.budget"),
    ],
)
def test_a_budget_that_cannot_be_written_is_refused_naming_the_file_and_key(tmp_path, files, says):
    ran, module = build(tmp_path, files)
    assert ran.returncode != 0, f"accepted: {budget_sections(module)}"
    assert says in ran.stderr and next(iter(files)) in ran.stderr, ran.stderr
    assert "Traceback" not in ran.stderr, ran.stderr
    assert module.read_bytes() == EMPTY_COMPONENT
