"""A test fixture for the fresh-instance guarantee: it counts its calls in module globals and
says the count. Every call must see 1, since each runs in a fresh instance made from the
module's snapshot: nothing a call leaves in memory may reach the next one.

Each call also keeps `spec.params["hoard-kib"]` KiB (default 1024) in a global list, written
byte by byte, so a call writes well past the snapshot's pages (the heap grows): a pool slot
reused without being reset would show it in `len(HOARD)` as well as in `CALLS`.

The plan: a status whose message is `calls N, hoard M` and a requeue-after of N milliseconds."""

from zundoko_kit import Plan, RequeueAfter, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)
CALLS = 0
HOARD = []


class Fresh:
    def info(self):
        return INFO

    def reconcile(self, observed):
        global CALLS
        CALLS += 1
        kib = observed.hikawa.param("hoard-kib")
        HOARD.append(bytearray(b"\x5a" * (int(kib) if kib is not None and kib.isdigit() else 1024) * 1024))
        message = f"calls {CALLS}, hoard {len(HOARD)}"
        return Plan([StatusUpdate("Singing", len(observed.zundokos), False, message), RequeueAfter(CALLS)])


Rules = export_rules(Fresh())
