"""A test fixture for the fresh-instance guarantee, as wide as Python code can look: at the start
of every call it hashes what it can see of the interpreter (host/tests/fresh_bytes.rs), then
leaves a mess in all of it, so that a call that sees anything another call left says so.

What a call sees, before it writes anything of its own: the memory blocks the interpreter has
allocated (`sys.getallocatedblocks()`, which any object a call left alive changes), where the
allocator puts a new small object and a new 4 KiB buffer (`id`: a heap that a call left
otherwise moves them), the garbage collector's counts and whether it is on, the names in
`sys.modules`, in `builtins`, in this module's globals and on its class, this module's kept
list, `json.dumps` (a function a call may replace), the `re` module's cache and the recursion
limit. Python's own hash of a string is left out (randomised per process, though fixed in the
snapshot); the bytes are hashed with FNV-1a.

The mess, as `spec.params["pattern"]` (two digits, N) asks: N * 200 KiB kept in a global, in a
few large buffers and 10,000 small objects, names added to `builtins`, `sys.modules`, the module
and its class, `json.dumps` replaced, `re` patterns compiled, the recursion limit changed and,
for odd N, the collector turned off. A pattern with N % 4 == 3 then raises (the call traps),
its mess left as it is.

The status message: `seen <hash> blocks <n>; wrote <KiB> KiB`. The part before `;` is the same
for every call of a pattern when every call starts from the module as built (the input differs
between patterns, and is in the heap)."""

import builtins
import gc
import json
import re
import sys
import types

from zundoko_kit import Plan, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)
KEPT = []
DUMPS = json.dumps


def fnv1a(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def what_is_seen() -> tuple:
    blocks = sys.getallocatedblocks()
    small, page = object(), bytearray(4096)
    parts = [
        blocks,
        id(small),
        id(page),
        gc.get_count(),
        gc.isenabled(),
        sorted(sys.modules),
        sorted(vars(builtins)),
        sorted(globals()),
        sorted(vars(FreshBytes)),
        len(KEPT),
        json.dumps is DUMPS,
        len(getattr(re, "_cache", ())),
        sys.getrecursionlimit(),
    ]
    return fnv1a(repr(parts).encode()), blocks


class FreshBytes:
    def info(self):
        return INFO

    def reconcile(self, observed):
        seen, blocks = what_is_seen()
        pattern = int(observed.hikawa.param("pattern") or "0")
        kib = pattern * 200
        KEPT.append([bytearray(b"\x5a" * (kib * 1024 // 4)) for _ in range(4)])
        KEPT.append([f"leak {pattern} {i}" for i in range(10_000)])
        setattr(builtins, f"leak_{pattern}", pattern)
        sys.modules[f"leak_{pattern}"] = types.ModuleType(f"leak_{pattern}")
        globals()[f"LEAK_{pattern}"] = pattern
        setattr(FreshBytes, f"leak_{pattern}", pattern)
        json.dumps = lambda *args, **kwargs: f"leak {pattern}"
        for i in range(pattern + 1):
            re.compile(f"leak {pattern} {i}")
        sys.setrecursionlimit(1000 + pattern)
        if pattern % 2 == 1:
            gc.disable()
        if pattern % 4 == 3:
            raise RuntimeError("fresh-bytes raises after its mess, on purpose")
        message = f"seen {seen:016x} blocks {blocks}; wrote {kib} KiB"
        return Plan([StatusUpdate("Singing", len(observed.zundokos), False, message)])


Rules = export_rules(FreshBytes())
