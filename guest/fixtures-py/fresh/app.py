"""A test fixture for the fresh-instance guarantee: it counts its calls in every place a Python
rule set may keep state, and says the count. Every call must see 1, since each runs in a fresh
instance made from the module's snapshot: nothing a call leaves in memory may reach the next
one, nor may the kit's warm-up, which runs `reconcile` on sample calls while the component is
built (sdk/python/zundoko_kit/warm_up.py), leave its calls' counts in the snapshot.

The places: a global of this module, an attribute of its class, the rules object itself, a
global of a module of its own (`fresh_counts`), and a list a `functools.cache`d function keeps.

Each call also keeps `spec.params["hoard-kib"]` KiB (default 1024) in a global list, written
byte by byte, so a call writes well past the snapshot's pages (the heap grows): a pool slot
reused without being reset would show it in `len(HOARD)` as well as in the count.

The plan: a status whose message is `calls N, hoard M` (N the highest of the counts) and a
requeue-after of N milliseconds."""

import functools

import fresh_counts
from zundoko_kit import Plan, RequeueAfter, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)
CALLS = 0
HOARD = []


@functools.cache
def calls_seen() -> list:
    return []


class Fresh:
    calls_on_class = 0

    def __init__(self):
        self.calls = 0

    def info(self):
        return INFO

    def reconcile(self, observed):
        global CALLS
        CALLS += 1
        Fresh.calls_on_class += 1
        self.calls += 1
        fresh_counts.CALLS += 1
        calls_seen().append(1)
        calls = max(CALLS, Fresh.calls_on_class, self.calls, fresh_counts.CALLS, len(calls_seen()))
        kib = observed.hikawa.param("hoard-kib")
        HOARD.append(bytearray(b"\x5a" * (int(kib) if kib is not None and kib.isdigit() else 1024) * 1024))
        message = f"calls {calls}, hoard {len(HOARD)}"
        return Plan([StatusUpdate("Singing", len(observed.zundokos), False, message), RequeueAfter(calls)])


Rules = export_rules(Fresh())
