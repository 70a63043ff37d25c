"""A configurable song engine (sdk/rust/src/song.rs, decision for decision): when to say the
next word, which word, and when to say Kiyoshi. The classic rules are this engine with their
own words; a new rule set may use it or write its own `reconcile` (the scaffold does)."""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass

from .model import (
    I64_MAX,
    U64_MASK,
    ChildKind,
    InconsistentSong,
    InvalidParams,
    ModuleInfo,
    Observed,
    Plan,
    RequeueAfter,
    Say,
    StatusUpdate,
    saturating_i64,
)
from .naming import kiyoshi_name, zundoko_name
from .rust import debug_str, is_blank

PHASE_SINGING = "Singing"
PHASE_KIYOSHIED = "Kiyoshied"

# Parameters a Hikawa may set in `spec.params`; unknown keys are left for other rule sets.
PARAM_ZUN = "zun"
PARAM_DOKO = "doko"
PARAM_KIYOSHI = "kiyoshi"
PARAM_ZUNS = "zuns"
MAX_ZUNS = 16

# What Rust's `usize::from_str` accepts: an optional `+`, then ASCII digits.
_UNSIGNED = re.compile(r"\+?[0-9]+")


def mix(z: int) -> int:
    """SplitMix64's finaliser, in u64 arithmetic: spreads every input bit over the output, so
    consecutive entropy values (seeds 0, 1, 2, ...) still give independent words."""
    z = (z + 0x9E3779B97F4A7C15) & U64_MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & U64_MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & U64_MASK
    return z ^ (z >> 31)


@dataclass
class Words:
    zun: str
    doko: str
    kiyoshi: str


@dataclass
class RuleSet:
    """A rule set: fixed defaults that `spec.params` may override per Hikawa."""

    module: ModuleInfo
    words: Words
    # How many Zun must come before the Doko.
    zuns: int = 4
    # Strict: *exactly* `zuns` Zun before the Doko. Otherwise the last `zuns + 1` words decide.
    strict: bool = False

    def info(self) -> ModuleInfo:
        return copy.copy(self.module)

    def with_params(self, observed: Observed) -> "RuleSet":
        """This rule set with the Hikawa's `spec.params` applied."""
        hikawa = observed.hikawa
        if not hikawa.params:
            # Nothing to apply: `self` is never changed by a decision, so it serves as it is
            # (still refused if its own words cannot tell Zun from Doko, as below).
            if self.words.zun == self.words.doko:
                raise InvalidParams(f"params.zun and params.doko must differ (both are {debug_str(self.words.zun)})")
            return self
        # A shallow copy with its own words: only `words` and `zuns` change below. (Not a deep
        # copy: that was two thirds of a classic call's interpreter time.)
        rules = copy.copy(self)
        rules.words = copy.copy(self.words)
        for key, slot in ((PARAM_ZUN, "zun"), (PARAM_DOKO, "doko"), (PARAM_KIYOSHI, "kiyoshi")):
            word = hikawa.param(key)
            if word is not None:
                if is_blank(word):
                    raise InvalidParams(f"params.{key} must be a non-empty word")
                setattr(rules.words, slot, word)
        if rules.words.zun == rules.words.doko:
            raise InvalidParams(f"params.zun and params.doko must differ (both are {debug_str(rules.words.zun)})")
        zuns = hikawa.param(PARAM_ZUNS)
        if zuns is not None:
            n = int(zuns) if _UNSIGNED.fullmatch(zuns) else None
            if n is None or not 1 <= n <= MAX_ZUNS:
                raise InvalidParams(f"params.zuns must be a whole number from 1 to {MAX_ZUNS}, found {debug_str(zuns)}")
            rules.zuns = n
        return rules

    def song_complete(self, words: list[str]) -> bool:
        """Does the song so far end the way that calls for Kiyoshi?"""
        from_end = iter(reversed(words))
        if next(from_end, None) != self.words.doko:
            return False
        for _ in range(self.zuns):
            if next(from_end, None) != self.words.zun:
                return False
        return not (self.strict and next(from_end, None) == self.words.zun)

    def pick_word(self, entropy: int) -> str:
        """The word for this entropy: Zun or Doko with equal chance."""
        return self.words.zun if mix(entropy) >> 63 == 0 else self.words.doko

    def reconcile(self, observed: Observed) -> Plan:
        """One decision: one word per `intervalMillis` (measured from the previous word; the first
        at once), Kiyoshi one interval after the completing Doko, then nothing more."""
        rules = self.with_params(observed)
        hikawa = observed.hikawa
        for position, said in enumerate(observed.zundokos):
            expected = position + 1
            if said.index != expected:
                raise InconsistentSong(
                    f"expected word {expected} but found {said.index} ({said.name}): a word is missing"
                )
        said = len(observed.zundokos)
        plan = Plan()

        if observed.kiyoshi is not None:
            rules._set_status(plan, observed, said, True, "the song is over")
            return plan

        last = observed.zundokos[-1] if observed.zundokos else None
        if last is not None and last.said_at is not None:
            due = saturating_i64(last.said_at + min(hikawa.interval_millis, I64_MAX))
        else:
            # Nothing said yet, or no record of when: the next word may come at once.
            due = observed.now
        wait = saturating_i64(due - observed.now)
        if wait > 0:
            rules._set_status(plan, observed, said, False, f"{said} words said")
            plan.actions.append(RequeueAfter(wait))
            return plan

        # song_complete reads at most zuns + 2 words from the end: only those are copied, not
        # every word of the song at every call.
        if rules.song_complete([z.word for z in observed.zundokos[-(rules.zuns + 2) :]]):
            plan.actions.append(
                Say(ChildKind.KIYOSHI, hikawa.namespace, kiyoshi_name(hikawa.name), said + 1, rules.words.kiyoshi)
            )
            rules._set_status(plan, observed, said, True, f"{rules.words.kiyoshi} after {said} words")
        else:
            index = said + 1
            plan.actions.append(
                Say(
                    ChildKind.ZUNDOKO,
                    hikawa.namespace,
                    zundoko_name(hikawa.name, index),
                    index,
                    rules.pick_word(observed.entropy),
                )
            )
            rules._set_status(plan, observed, index, False, f"{index} words said")
            plan.actions.append(RequeueAfter(hikawa.interval_millis))
        return plan

    def _set_status(self, plan: Plan, observed: Observed, said: int, kiyoshied: bool, message: str) -> None:
        """Add a status update unless the observed status already says the same."""
        phase = PHASE_KIYOSHIED if kiyoshied else PHASE_SINGING
        status = observed.hikawa.status
        if status.num_zundokos_said == said and status.kiyoshied == kiyoshied and status.phase == phase:
            return
        plan.actions.append(StatusUpdate(phase, said, kiyoshied, message))
