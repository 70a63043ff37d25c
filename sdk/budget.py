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
# of memory (12.75 MiB at start), JavaScript 88.5 M fuel and under 16 MiB (9.1 MiB at start).
# `zundoko-operator test` fails a module whose calls need more than half its fuel, so the fuel
# is over twice that with room for rules that do more; the memory leaves the heap room to grow.
# The size: the classic rules are 18.8 MB in Python (CPython and its standard library) and
# 12.1 MB in JavaScript (SpiderMonkey); the Makefile's PY_MAX_BYTES / JS_MAX_BYTES agree.
DEFAULTS = {
    "python": {"memory_mib": 48, "fuel": 100_000_000, "module_mib": 24},
    "js": {"memory_mib": 32, "fuel": 250_000_000, "module_mib": 16},
}


def main():
    rules_dir, module = sys.argv[1:3]
    pyproject = os.path.join(rules_dir, "pyproject.toml")
    package = os.path.join(rules_dir, "package.json")
    if os.path.exists(pyproject):
        lang = "python"
        with open(pyproject, "rb") as f:
            asked = tomllib.load(f).get("tool", {}).get("zundoko", {}).get("budget", {})
        memory, fuel, size = asked.get("memory-mib"), asked.get("fuel"), asked.get("module-mib")
    elif os.path.exists(package):
        lang = "js"
        with open(package) as f:
            asked = json.load(f).get("zundoko", {}).get("budget", {})
        memory, fuel, size = asked.get("memoryMiB"), asked.get("fuel"), asked.get("moduleMiB")
    else:
        sys.exit(f"{rules_dir}: neither pyproject.toml nor package.json")
    memory = DEFAULTS[lang]["memory_mib"] if memory is None else memory
    fuel = DEFAULTS[lang]["fuel"] if fuel is None else fuel
    size = DEFAULTS[lang]["module_mib"] if size is None else size
    here = os.path.dirname(os.path.abspath(__file__))
    setter = os.path.join(here, "..", "scripts", "set-budget.py")
    subprocess.run(
        [sys.executable, setter, module, "--memory-mib", str(memory), "--fuel", str(fuel), "--module-mib", str(size)],
        check=True,
    )


if __name__ == "__main__":
    main()
