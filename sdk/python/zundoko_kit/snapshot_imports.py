"""The imports a call would make, made while the component is built.

A componentize-py component has no files when it runs (the operator preopens none): a call can
import only what was imported while the component was built, which is in the snapshot every
call starts from. Natively every import works, so a rule set that imports inside a function
(`import statistics` in `reconcile`), or calls a standard-library function that imports at its
first use (`datetime.strptime` imports `_strptime`, `"...".encode("shift_jis")` its codec),
passes its tests and traps in the operator: `ModuleNotFoundError: No module named 'statistics'`,
`LookupError: unknown encoding: shift_jis`.

`import_for_calls()` runs once, while the component is built, before the kit freezes the heap:
- every module already imported that is not the standard library's (the rule set's own, the
  kit, a package the rule set brings) is read for its import statements at any depth, for
  `importlib.import_module("...")` / `__import__("...")` with a literal name, and for the codecs
  it names literally (`.encode("cp1250")`, `.decode(encoding="euc_jp")`, `codecs.lookup(...)`),
  and each is imported; so are the modules that brings in, until nothing new comes;
- `STDLIB_AT_FIRST_USE` is imported: what the standard library imports at first use in
  functions a rule set reaches for.
An import that fails here is left out: it fails natively too, or is optional (guarded by
`except ImportError`), and a call that makes it raises as it would have. An import whose name
only a call knows (`importlib.import_module(name)`) is the one left: `with_hint` makes the
call's exception say what to do.
"""

from __future__ import annotations

import ast
import encodings
import functools
import encodings.aliases
import importlib
import importlib.util
import sys
import sysconfig

# What the standard library imports at first use, in functions rule sets reach for: parsing a
# time (`datetime.strptime`, `time.strptime`) and the codecs beyond UTF-8 and ASCII that a
# rule set writing Japanese or Western text, escapes, IDNA or hex may name. Measured on the
# classic rules, with the imports the kit reads: a component no bigger (18.35-18.37 MB in three
# builds, 18.79-18.87 MB in three without) and a call's fuel the same within 0.5%. Every other
# codec is left out (all of `encodings` made a component 1.7 MB bigger).
STDLIB_AT_FIRST_USE = (
    "_strptime",
    "encodings.utf_8_sig",
    "encodings.utf_16",
    "encodings.utf_16_le",
    "encodings.utf_16_be",
    "encodings.utf_32",
    "encodings.utf_32_le",
    "encodings.utf_32_be",
    "encodings.latin_1",
    "encodings.cp1252",
    "encodings.iso8859_15",
    "encodings.unicode_escape",
    "encodings.raw_unicode_escape",
    "encodings.hex_codec",
    "encodings.base64_codec",
    "encodings.idna",
    "encodings.punycode",
    "encodings.shift_jis",
    "encodings.cp932",
    "encodings.euc_jp",
    "encodings.iso2022_jp",
)

# componentize-py's own modules (bindings it generates, its runtime's helpers): what they
# import is its business, and they are imported whole.
_NOT_READ = ("wit_world", "componentize_py_")


def import_for_calls() -> list[str]:
    """Import, now, what a call would import (the module's doc). Returns the names imported
    that were not imported before, in the order imported."""
    before = set(sys.modules)
    read: set[str] = set()
    while True:
        unread = [(name, m) for name, m in list(sys.modules.items()) if name not in read and outside_stdlib(name, m)]
        if not unread:
            break
        for key, module in unread:
            read.add(key)
            for name in imports_in(module):
                _try_import(name)
    for name in STDLIB_AT_FIRST_USE:
        _try_import(name)
    return [name for name in sys.modules if name not in before]


def with_hint(e: BaseException) -> BaseException | None:
    """A call's import of a module, or a codec, that the component was built without (an
    import whose name only the call knew), as the same exception saying what to do; None for
    any other exception."""
    if isinstance(e, ModuleNotFoundError) and e.name:
        return ModuleNotFoundError(
            f"{e} (a call can import only what was imported when the component was built: "
            f"import {e.name} at the top of a module of the rule set)",
            name=e.name,
        )
    message = str(e)
    if type(e) is LookupError and message.startswith("unknown encoding: "):
        module = codec_module(message.removeprefix("unknown encoding: "))
        return LookupError(
            f"{message} (a codec is there only if imported when the component was built: "
            f"import {module} at the top of a module of the rule set)"
        )
    return None


def imports_in(module) -> list[str]:
    """The absolute names of the modules `module`'s source imports, at any depth. A module
    whose source cannot be read or parsed names none."""
    source = _source(module)
    if source is None:
        return []
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    package = module.__package__ or ""
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve("." * node.level + (node.module or ""), package)
            if base is None:
                continue
            if node.module or node.level == 0:
                names.append(base)
            # `from package import submodule`: the name may be a submodule, or just an attribute
            # (trying it costs nothing when it is not a module).
            names.extend(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call):
            literal = _first_literal(node)
            if literal is None:
                continue
            if _names_import_call(node.func):
                resolved = _resolve(literal, package)
                if resolved is not None:
                    names.append(resolved)
            elif _names_codec_call(node.func):
                names.append(codec_module(literal))
    return names


def codec_module(codec: str) -> str:
    """The module of the standard library's `encodings` package that `codec` names, as
    `encodings.search_function` finds it ("Shift-JIS" and "sjis" are `encodings.shift_jis`)."""
    normalized = encodings.normalize_encoding(codec).lower()
    return "encodings." + encodings.aliases.aliases.get(normalized, normalized)


def _first_literal(call: ast.Call) -> str | None:
    """The call's first argument, or its `encoding=`, when it is a literal string."""
    args = [call.args[0]] if call.args else []
    args += [k.value for k in call.keywords if k.arg == "encoding"]
    for arg in args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            return arg.value
    return None


def _names_codec_call(func) -> bool:
    """`.encode(...)`, `.decode(...)` or `.lookup(...)` (`codecs.lookup`): its literal first
    argument or `encoding=` is taken for a codec's name. A wrong guess (`codecs.encode("text",
    "rot13")` names "text") imports nothing."""
    return isinstance(func, ast.Attribute) and func.attr in ("encode", "decode", "lookup")


def _names_import_call(func) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` or `__import__(...)`."""
    if isinstance(func, ast.Attribute):
        return func.attr == "import_module"
    return isinstance(func, ast.Name) and func.id in ("import_module", "__import__")


def _resolve(name: str, package: str) -> str | None:
    try:
        return importlib.util.resolve_name(name, package) if name.startswith(".") else name
    except (ImportError, ValueError):
        return None


def _try_import(name: str) -> None:
    if not name or name in sys.modules:
        return
    try:
        importlib.import_module(name)
    except Exception:  # noqa: BLE001: fails natively too, or is optional (the module's doc)
        pass


@functools.cache
def _stdlib_dirs() -> tuple[str, ...]:
    paths = sysconfig.get_paths()
    return tuple({p for p in (paths.get("stdlib"), paths.get("platstdlib"), sys.prefix, sys.base_prefix) if p})


def outside_stdlib(name: str, module) -> bool:
    """A module from a source file outside the standard library and not componentize-py's own
    (the modules whose imports are read)."""
    if name.startswith(_NOT_READ):
        return False
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return False
    return not any(file.startswith(d.rstrip("/") + "/") for d in _stdlib_dirs())


def _source(module) -> str | None:
    try:
        with open(module.__file__, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None
