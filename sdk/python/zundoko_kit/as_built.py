"""A rule set as it was built, for each call made outside the operator.

In the operator every call starts from a fresh instance of the component: the rules object, the
globals of the rule set's modules and the attributes of its classes are what the build left.
Natively one object would answer every call, so a rule set that counted its Zuns on `self`, in a
global or on its class passed its tests and never sang its Kiyoshi in the operator; and the kit's
warm-up, which runs the rules' `reconcile` while the component is built, would leave its calls'
state in the snapshot. `AsBuilt` gives each such call the rule set as it was built instead.

What it covers: the rules object; the globals of every module of the rule set (every module
from a source file outside the standard library, installed packages and the kit); the
attributes of the plain classes those modules define (the rules' class among them, even one
defined in a function); and the `functools.lru_cache` and `functools.cache` caches among those,
emptied. Each call gets copies of those, made together (what two of them share, their copies
share), while the originals stay untouched; `restore()` puts the originals back. What cannot be
copied (a lock, a module, a function) is shared, as it was. State kept anywhere else (a mutable
default argument, a closure, the standard library) is not covered.
"""

from __future__ import annotations

import copy
import functools
import os
import sys

from . import snapshot_imports

_MISSING = object()
# What `functools.lru_cache` and `functools.cache` make of a function.
_LRU_CACHED = type(functools.lru_cache(maxsize=None)(lambda: None))


class AsBuilt:
    def __init__(self, rules):
        self._rules = rules
        modules = _own_modules()
        classes = {id(c): c for m in modules for c in _classes_of(m)}
        # The rules' own class and its bases from the rule set, wherever they were defined (in a
        # function, say).
        names = {m.__name__ for m in modules}
        classes.update({id(c): c for c in type(rules).__mro__ if type(c) is type and c.__module__ in names})
        # Every global of the rule set's modules and every attribute of their classes, by
        # reference: what `restore()` puts back. A module's globals are its attributes, so both
        # are set and deleted alike.
        self._built = [(owner, dict(_own_items(vars(owner)))) for owner in [*modules, *classes.values()]]
        # The ones a copy would only share (a function, a number, a lock) are found once.
        self._to_copy = [(owner, k, v) for owner, built in self._built for k, v in built.items() if _copies(v)]
        self._caches = [v for _, built in self._built for v in built.values() if isinstance(v, _LRU_CACHED)]

    def fresh(self):
        """The rules for the next call: the rule set's globals and class attributes replaced by
        copies of what was built, its caches emptied, and a copy of the rules object. The copies
        are made together: what two of them share, their copies share."""
        self.restore()
        memo: dict = {}
        for owner, name, value in self._to_copy:
            setattr(owner, name, _copy(value, memo))
        return _copy(self._rules, memo)

    def restore(self) -> None:
        """The rule set as it was built: the original objects back in their places, what a call
        added removed, what it deleted put back, its caches emptied."""
        for owner, built in self._built:
            for name, _ in _own_items(vars(owner)):
                if name not in built:
                    delattr(owner, name)
            for name, value in built.items():
                if vars(owner).get(name, _MISSING) is not value:
                    setattr(owner, name, value)
        for cached in self._caches:
            cached.cache_clear()


def _own_modules() -> list:
    """The rule set's modules: those loaded from a source file that is neither the standard
    library's, an installed package's, componentize-py's nor the kit's."""
    kit = os.path.dirname(os.path.abspath(__file__)) + os.sep
    own = {}
    for name, module in list(sys.modules.items()):
        if not snapshot_imports.outside_stdlib(name, module):
            continue
        file = os.path.abspath(module.__file__)
        if not file.startswith(kit) and "site-packages" not in file.split(os.sep):
            own[id(module)] = module
    return list(own.values())


def _own_items(namespace) -> list:
    """A namespace's entries without Python's own (`__builtins__`, `__name__`, `__dict__`, ...)."""
    return [(k, v) for k, v in list(namespace.items()) if not (k.startswith("__") and k.endswith("__"))]


def _classes_of(module) -> list:
    """The plain classes a module defines (made by `type`: not an enum, whose members are fixed,
    nor a class with a metaclass of its own, whose attributes may be its machinery)."""
    return [v for _, v in _own_items(vars(module)) if type(v) is type and v.__module__ == module.__name__]


def _copies(value) -> bool:
    """Whether a deep copy of `value` is another object (a function, a class, a number, a
    string are their own copies; a lock cannot be copied)."""
    try:
        return copy.deepcopy(value) is not value
    except Exception:  # noqa: BLE001: shared, as it was
        return False


def _copy(value, memo):
    try:
        return copy.deepcopy(value, memo)
    except Exception:  # noqa: BLE001: shared, as it was
        return value
