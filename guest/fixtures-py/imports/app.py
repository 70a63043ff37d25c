"""A test fixture for the kit's imports made when the component is built
(sdk/python/zundoko_kit/snapshot_imports.py): a component has no files when a call runs, so a
call imports only what the build imported. Its calls do what natively just works, and each
would fail in the operator without the kit (`ModuleNotFoundError`, `LookupError: unknown
encoding`). Chosen by `spec.params["use"]`:

  (none)        imports a module of its own inside the call (which imports two of the standard
                library inside its own function), parses a time with datetime.strptime, encodes
                Japanese as Shift JIS and EUC-JP (codecs named literally) and UTF-16 and hex (by
                names only the call knows): the status message gives what each gave
  module NAME   imports the module NAME, a name only the call knows
  codec NAME    encodes "x" with the codec NAME, a name only the call knows

The plan: a status saying what it found (host/tests/py_imports.rs)."""

import codecs
import datetime
import importlib

from zundoko_kit import Plan, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)


def _status(observed, message):
    return Plan([StatusUpdate("Singing", len(observed.zundokos), False, message)])


def _everything(observed):
    import imports_helper

    parsed = datetime.datetime.strptime("2026-11-27T10:00:00Z", "%Y-%m-%dT%H:%M:%SZ")
    named = observed.hikawa.param("utf") or "utf-16-le"
    return _status(
        observed,
        f"{imports_helper.summary()}, parsed {parsed.isoformat()}, "
        f"sjis {'ずんどこ'.encode('shift_jis').hex()}, eucjp {'きよし'.encode(encoding='euc_jp').hex()}, "
        f"utf16 {'Zun'.encode(named).hex()}, hex {codecs.encode(b'Doko', 'hex' + (observed.hikawa.param('suffix') or '')).decode()}",
    )


class Imports:
    def info(self):
        return INFO

    def reconcile(self, observed):
        use = (observed.hikawa.param("use") or "").split(" ")
        if use[0] == "module":
            return _status(observed, f"imported {importlib.import_module(use[1]).__name__}")
        if use[0] == "codec":
            return _status(observed, f"encoded {'x'.encode(use[1]).hex()}")
        return _everything(observed)


Rules = export_rules(Imports())
