"""Whole songs played natively on a virtual clock, for a rule set's own tests (pytest): the
same loop the operator's `simulate` and `test` run (sdk/rust/src/testing.rs), without wasm."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Optional

from .as_built import AsBuilt
from .model import U64_MASK, ChildKind, Hikawa, Observed, Plan, saturating_i64
from .song import mix

# When every test song starts (virtual milliseconds since the epoch).
T0 = 1_000_000
# Decisions after which a song that has not ended is given up.
MAX_DECISIONS = 100_000


def new_hikawa(interval_millis: int, params: Optional[dict[str, str]] = None) -> Observed:
    """A brand-new Hikawa `default/hikawa-sample` with this interval and these `spec.params`."""
    return Observed(
        hikawa=Hikawa(
            namespace="default",
            name="hikawa-sample",
            uid="uid-1",
            generation=1,
            created_at=T0,
            interval_millis=interval_millis,
            params=sorted((params or {}).items()),
        ),
        now=T0,
    )


def entropy(seed: int, decision: int) -> int:
    """The entropy of a song's `decision`-th call (from 0), as the operator's tests draw it."""
    return mix((seed * 1_000_003 + decision) & U64_MASK)


@dataclass
class Song:
    """How a song went."""

    # The Zundoko words, in order.
    words: list[str] = field(default_factory=list)
    # The Kiyoshi's word, if it was said.
    kiyoshi: Optional[str] = None
    # Words the rules tried to say once the Kiyoshi was there (a valid song has none).
    after_kiyoshi: list[str] = field(default_factory=list)
    # Virtual time of each word, Kiyoshi included.
    times: list[int] = field(default_factory=list)
    decisions: int = 0
    # Every plan, in order.
    plans: list[Plan] = field(default_factory=list)
    # The Hikawa and its children at the end.
    final_state: Optional[Observed] = None


def sing(rules, observed: Observed, seed: int) -> Song:
    """Play a song: each decision's requeue advances the clock, each plan is applied as the
    cluster would; the song ends when the rules wait for nothing. Entropy comes from `seed`,
    so a seed replays a song exactly. Each decision starts from the rules as they were when the
    song started (`AsBuilt`), as each call does in the operator. A RuleError propagates."""
    observed = copy.deepcopy(observed)
    song = Song()
    as_built = AsBuilt(rules)
    try:
        return _sing(as_built, observed, seed, song)
    finally:
        as_built.restore()


def _sing(as_built: AsBuilt, observed: Observed, seed: int, song: Song) -> Song:
    while song.decisions < MAX_DECISIONS:
        observed.entropy = entropy(seed, song.decisions)
        plan = as_built.fresh().reconcile(copy.deepcopy(observed))
        song.decisions += 1
        song.plans.append(plan)
        for say in plan.says():
            if observed.kiyoshi is not None or song.kiyoshi is not None:
                song.after_kiyoshi.append(say.word)
                continue
            song.times.append(observed.now)
            if say.kind == ChildKind.ZUNDOKO:
                song.words.append(say.word)
            else:
                song.kiyoshi = say.word
        if song.after_kiyoshi:
            break
        ms = plan.next_call(observed)
        observed.apply(plan)
        if ms is None:
            break
        # `ms as i64`: a u64 above i64::MAX wraps, as in Rust.
        observed.now = saturating_i64(observed.now + (ms - (1 << 64) if ms >= 1 << 63 else ms))
    song.final_state = observed
    return song
