"""__NAME__: a Zundoko rule set. Change `reconcile` and the words; `make test-rules NAME=__NAME__`
checks them natively, `make rules NAME=__NAME__` builds the component.

The rules get everything they may know in `observed` (the Hikawa, its children in order, the
time, 64 random bits) and answer with a plan; they have no clock, no randomness and no I/O of
their own: use `observed.now` and `observed.entropy`, never `time` or `random` (inside the
operator those read the call's `now` and a generator seeded by its entropy, so they decide
nothing new, but they hide what a decision depends on). `zundoko_kit.steps` builds the plans a
song is made of; raise `zundoko_kit.InvalidParams(...)` (or InconsistentSong, Internal) to
refuse; `zundoko_kit.component.log("info", ...)` writes to the operator's log. Every call starts
from the snapshot taken when the component was built: what you compute at import (a compiled
regular expression, a table) is there for every call, while a call's own caches start empty.
A call imports only modules the build imported: the kit imports every module this file names
(inside functions too), but not one whose name a call computes.
"""

from zundoko_kit import Observed, Plan, module_info_from_pyproject, steps

ZUN = "Zun"
DOKO = "Doko"
# The last word of every song: said once, after the call, and nothing after it.
KIYOSHI = "Ki-yo-shi!"
# The call that ends the song.
CALL = [ZUN, ZUN, ZUN, ZUN, DOKO]

# Name, version and description from pyproject.toml (read when the component is built).
INFO = module_info_from_pyproject(__file__)


class MyRules:
    def info(self):
        return INFO

    def reconcile(self, observed: Observed) -> Plan:
        if observed.kiyoshi is not None:
            return steps.song_over(observed)
        if observed.wait_millis() > 0:
            return steps.wait(observed)
        words = observed.words()
        if words[-len(CALL):] == CALL:
            return steps.say_kiyoshi(observed, KIYOSHI)
        word = ZUN if observed.entropy & 1 == 0 else DOKO
        return steps.say_word(observed, word)
