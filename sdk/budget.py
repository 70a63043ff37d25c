#!/usr/bin/env python3
"""Write a Python or JavaScript rule set's budget into its component (scripts/set-budget.py's
`zundoko:budget` section): what the rule set asks for, else its language's default.

usage: sdk/budget.py RULES_DIR MODULE.wasm

A rule set asks in pyproject.toml:   [tool.zundoko.budget]  memory-mib = 64  fuel = 400000000  module-mib = 24
                 or in package.json: "zundoko": {"budget": {"memoryMiB": 64, "fuel": 400000000, "moduleMiB": 16}}
The operator grants a budget up to its ceilings (--max-memory-mib, default 256; --max-fuel,
default 2,000,000,000) and refuses a module asking for more; `zundoko-operator test` holds the
module to its size (moduleMiB)."""
import json
import os
import subprocess
import sys
import tomllib

# Measured with host/tests/languages.rs (measure_languages) on the classic rules, whose most
# expensive call is one at 1,000 children (the child cap): Python 22.0 M fuel and under 16 MiB
# of memory (12.75 MiB at start), JavaScript 33.6 M fuel (88.5 M before issue 38's bindings
# rewrite) and under 16 MiB (9.1 MiB at start).
# `zundoko-operator test` fails a module whose calls need more than half its fuel, so the fuel
# is over twice that with room for rules that do more; the memory leaves the heap room to grow.
# The size: the classic rules are 18.8 MB in Python (CPython and its standard library) and
# 12.1 MB in JavaScript (SpiderMonkey); the Makefile's PY_MAX_BYTES / JS_MAX_BYTES agree.
DEFAULTS = {
    "python": {"memory_mib": 48, "fuel": 100_000_000, "module_mib": 24},
    "js": {"memory_mib": 32, "fuel": 100_000_000, "module_mib": 16},
}


# The keys a rule set may ask with, per file: pyproject.toml's and package.json's spelling.
KEYS = {
    "python": {"memory-mib": "memory_mib", "fuel": "fuel", "module-mib": "module_mib"},
    "js": {"memoryMiB": "memory_mib", "fuel": "fuel", "moduleMiB": "module_mib"},
}


def asked_budget(path, lang, asked):
    """What the rule set asks for, checked: a misspelt key would otherwise get the default
    without a word, and a value that is not a whole number above zero would be refused only
    when the operator loads the module."""
    where = f"{path}: {'[tool.zundoko.budget]' if lang == 'python' else 'zundoko.budget'}"
    if not isinstance(asked, dict):
        sys.exit(f"{where} must be a table of {', '.join(KEYS[lang])}, found {asked!r}")
    unknown = sorted(set(asked) - set(KEYS[lang]))
    if unknown:
        sys.exit(f"{where}: unknown key {', '.join(unknown)} (the keys are {', '.join(KEYS[lang])})")
    budget = dict(DEFAULTS[lang])
    for key, value in asked.items():
        # bool is an int in Python: `true` is not a number of MiB.
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            sys.exit(f"{where}: {key} must be a whole number above zero, found {value!r}")
        budget[KEYS[lang][key]] = value
    return budget


def main():
    rules_dir, module = sys.argv[1:3]
    pyproject = os.path.join(rules_dir, "pyproject.toml")
    package = os.path.join(rules_dir, "package.json")
    if os.path.exists(pyproject):
        with open(pyproject, "rb") as f:
            asked = tomllib.load(f).get("tool", {}).get("zundoko", {}).get("budget", {})
        budget = asked_budget(pyproject, "python", asked)
    elif os.path.exists(package):
        with open(package) as f:
            asked = json.load(f).get("zundoko", {}).get("budget", {})
        budget = asked_budget(package, "js", asked)
    else:
        sys.exit(f"{rules_dir}: neither pyproject.toml nor package.json")
    memory, fuel, size = budget["memory_mib"], budget["fuel"], budget["module_mib"]
    here = os.path.dirname(os.path.abspath(__file__))
    setter = os.path.join(here, "..", "scripts", "set-budget.py")
    subprocess.run(
        [sys.executable, setter, module, "--memory-mib", str(memory), "--fuel", str(fuel), "--module-mib", str(size)],
        check=True,
    )


if __name__ == "__main__":
    main()
