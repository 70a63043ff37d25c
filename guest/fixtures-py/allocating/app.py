"""A test fixture for the kit's frozen snapshot (`gc.freeze()` in sdk/python/zundoko_kit/component.py):
each call keeps `objects` (a param) small containers alive until it returns, as a rule set that
builds a model of its own does, and with `collector: off` turns Python's cyclic collector off
first. What the collector costs a call is the difference in fuel (host/tests/py_call_fuel.rs).

The plan: a status saying how many it kept."""

import gc

from zundoko_kit import Plan, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)


class Allocating:
    def info(self):
        return INFO

    def reconcile(self, observed):
        if observed.hikawa.param("collector") == "off":
            gc.disable()
        kept = [{"index": i} for i in range(int(observed.hikawa.param("objects") or "0"))]
        return Plan([StatusUpdate("Singing", len(observed.zundokos), False, f"kept {len(kept)}")])


Rules = export_rules(Allocating())
