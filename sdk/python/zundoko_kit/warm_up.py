"""The rule set's code run on sample calls while componentize-py builds the component.

Every call in the operator is a fresh instance's first, so it would run cold: CPython specialises
a code object's bytecode only after a couple of runs, and `re`'s cache of compiled patterns,
`_strptime`'s, the codecs' start empty. Run here, that state lands in the snapshot every call
starts from, instead of being redone by every call: the kit's conversions, and the rules' own
`reconcile` (measured on rule sets written from the docs: 13 to 42% of a call's fuel).

The rules' calls here leave nothing of theirs behind: each runs on a copy of the rule set as it
was built (`as_built.AsBuilt`: the rules object, its modules' globals, its classes' attributes,
its caches emptied), and the originals are put back after. What they print is dropped, and the
operator's log (a WIT import, which cannot be called while the component is built) is not
reached. A call that raises is fine: the warm-up goes on with the next.

A `reconcile` that never returns on a sample would keep the build from ending, as a module that
loops at import does: `make` bounds the build (`PY_BUILD_TIMEOUT_SECS`) and says so. Watching
the calls here instead (`sys.settrace`, `sys.setprofile`) cost every call of the component about
5% more fuel: CPython's code, once instrumented, runs slower after.
"""

from __future__ import annotations

import contextlib

from .as_built import AsBuilt
from .model import ChildKind, Plan, RequeueAfter, Say, StatusUpdate

# How often each sample runs: specialisation wants a couple of runs of the code.
RUNS = 4


def warm_up(rules, wit, to_model, to_wit) -> None:
    """Run `rules.reconcile` on sample calls (each on the rule set as built), converting each
    call's input with `to_model` and its plan with `to_wit`, as a call in the operator does."""
    samples = _samples(wit)
    as_built = AsBuilt(rules)
    stand_in = Plan([Say(ChildKind.ZUNDOKO, "warm-up", "warm-up-zundoko-006", 6, "Zun"), RequeueAfter(500)])
    with _quiet(wit):
        try:
            for _ in range(RUNS):
                for sample in samples:
                    observed = to_model(sample)
                    try:
                        plan = as_built.fresh().reconcile(observed)
                    except BaseException:  # noqa: BLE001: a rule error, or a bug the sample hit
                        plan = stand_in
                    try:
                        to_wit(plan, wit)
                    except BaseException:  # noqa: BLE001: not a plan; the operator's call says so
                        to_wit(stand_in, wit)
                    to_wit(Plan([StatusUpdate("Singing", 6, False, "")]), wit)
        finally:
            as_built.restore()
    # What the calls made and dropped is not collected here: the holes a collection leaves are
    # what a call's own objects would fill, spread over more pages than a call writes otherwise
    # (the classic rules at 1,000 Hikawas: 0.998 ms CPU per word collected, 0.936 not). Frozen
    # with the rest (component.py), it is never walked.


def _samples(wit) -> list:
    """Calls a song is made of: its first, a word due, a word not yet due, the Kiyoshi's turn and
    a song over."""
    words = ["Zun", "Doko", "Zun", "Zun", "Zun", "Zun", "Doko"]
    said = [wit.Said(f"warm-up-zundoko-{i:03d}", i, w, 1_000 * i) for i, w in enumerate(words, 1)]
    kiyoshi = wit.Said("warm-up-kiyoshi", len(words) + 1, "Ki-yo-shi!", 8_000)

    def hikawa(n, phase):
        return wit.Hikawa("warm-up", "warm-up", "", 1, 0, 500, [], wit.HikawaStatus(n, phase == "Kiyoshied", phase))

    return [
        wit.Observed(hikawa(0, None), [], None, 0, 1),
        wit.Observed(hikawa(3, "Singing"), said[:3], None, 10_000, 2),
        wit.Observed(hikawa(5, "Singing"), said[:5], None, 5_100, 3),
        wit.Observed(hikawa(7, "Singing"), said, None, 10_000, 4),
        wit.Observed(hikawa(7, "Kiyoshied"), said, kiyoshi, 10_000, 5),
    ]


@contextlib.contextmanager
def _quiet(wit):
    """What the warm-up's calls print dropped, and the operator's log not reached (a call to a
    WIT import fails the build)."""
    try:
        from wit_world.imports import log as wit_log
    except ImportError:  # natively: no component around
        wit_log = None
    real_log = wit_log.log if wit_log else None
    if wit_log:
        wit_log.log = lambda level, message: None
    try:
        with contextlib.redirect_stdout(_Dropped()), contextlib.redirect_stderr(_Dropped()):
            yield
    finally:
        if wit_log:
            wit_log.log = real_log


class _Dropped:
    def write(self, text):
        return len(text)

    def flush(self):
        pass

