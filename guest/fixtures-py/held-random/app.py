"""A test fixture for the kit's lazy seeding of `random` (sdk/python/zundoko_kit/lazy_seed.py):
it takes `random.random` and `random.seed` before the kit is imported, as a rule set may. The kit
must then leave `random` reseeded at every call's start, or these would draw from the state
baked into the snapshot, the same numbers whatever the call's entropy.

The plan: a status whose message gives three numbers drawn through the held function."""

from random import random as held_random
from random import seed as held_seed  # noqa: F401  (held, not called: holding it is the point)

from zundoko_kit import Plan, StatusUpdate, module_info_from_pyproject
from zundoko_kit.component import export_rules

INFO = module_info_from_pyproject(__file__)


class HeldRandom:
    def info(self):
        return INFO

    def reconcile(self, observed):
        drawn = [held_random() for _ in range(3)]
        return Plan([StatusUpdate("Singing", len(observed.zundokos), False, f"held: {drawn!r}")])


Rules = export_rules(HeldRandom())
