"""The data of the WIT contract (interface `types`) as plain Python, with the Rust SDK's
helpers (sdk/rust/src/model.rs). Field meanings are documented once, in the WIT file."""

from __future__ import annotations

import enum
import os
import tomllib
from dataclasses import dataclass, field
from typing import Optional, Union

I64_MIN = -(1 << 63)
I64_MAX = (1 << 63) - 1
U64_MASK = (1 << 64) - 1


def saturating_i64(value: int) -> int:
    """An i64 result of Rust's saturating arithmetic."""
    return max(I64_MIN, min(I64_MAX, value))


@dataclass
class HikawaStatus:
    num_zundokos_said: int = 0
    kiyoshied: bool = False
    phase: Optional[str] = None


@dataclass
class Hikawa:
    namespace: str = ""
    name: str = ""
    uid: str = ""
    generation: int = 0
    created_at: Optional[int] = None
    interval_millis: int = 0
    # Sorted by key.
    params: list[tuple[str, str]] = field(default_factory=list)
    status: HikawaStatus = field(default_factory=HikawaStatus)

    def param(self, key: str) -> Optional[str]:
        """`spec.params[key]`, or None."""
        for k, v in self.params:
            if k == key:
                return v
        return None


@dataclass
class Said:
    name: str
    index: int
    word: str
    said_at: Optional[int] = None


class ChildKind(enum.Enum):
    ZUNDOKO = 0
    KIYOSHI = 1


@dataclass
class Say:
    """Create one child (a Zundoko or the Kiyoshi)."""

    kind: ChildKind
    namespace: str
    name: str
    index: int
    word: str


@dataclass
class StatusUpdate:
    """Write the rules' part of the status."""

    phase: str
    num_zundokos_said: int
    kiyoshied: bool
    message: str


@dataclass
class RequeueAfter:
    """Reconcile this Hikawa again after this many milliseconds (at most one per plan)."""

    millis: int


Action = Union[Say, StatusUpdate, RequeueAfter]


@dataclass
class Plan:
    actions: list[Action] = field(default_factory=list)

    def says(self) -> list[Say]:
        return [a for a in self.actions if isinstance(a, Say)]

    def status(self) -> Optional[StatusUpdate]:
        return next((a for a in self.actions if isinstance(a, StatusUpdate)), None)

    def requeue_after(self) -> Optional[int]:
        return next((a.millis for a in self.actions if isinstance(a, RequeueAfter)), None)

    def changes(self, observed: "Observed") -> bool:
        """Whether carrying out this plan changes what the rules observe: a child not there yet,
        or a status whose phase, count or kiyoshied differs (the message is not observed)."""
        seen = observed.hikawa.status
        for a in self.actions:
            if isinstance(a, Say):
                if a.kind == ChildKind.ZUNDOKO and not any(z.name == a.name for z in observed.zundokos):
                    return True
                if a.kind == ChildKind.KIYOSHI and observed.kiyoshi is None:
                    return True
            elif isinstance(a, StatusUpdate):
                if (seen.num_zundokos_said, seen.kiyoshied, seen.phase) != (a.num_zundokos_said, a.kiyoshied, a.phase):
                    return True
        return False

    def next_call(self, observed: "Observed") -> Optional[int]:
        """When the host calls the rules again after this plan (the WIT contract, as the host
        implements it): after `requeue-after` milliseconds if the plan asks; else at once (0) if
        the plan changed what the rules observe; else `None`: only when something else changes."""
        ms = self.requeue_after()
        if ms is not None:
            return ms
        return 0 if self.changes(observed) else None

    def __str__(self) -> str:
        """One line: `say #3 Doko, status Singing(3), requeue 500 ms` (or `nothing to do`)."""
        if not self.actions:
            return "nothing to do"
        parts = []
        for a in self.actions:
            if isinstance(a, Say):
                parts.append(f"say {a.word}" if a.kind == ChildKind.KIYOSHI else f"say #{a.index} {a.word}")
            elif isinstance(a, StatusUpdate):
                parts.append(f"status {a.phase}({a.num_zundokos_said})")
            else:
                parts.append(f"requeue {a.millis} ms")
        return ", ".join(parts)


@dataclass
class Observed:
    hikawa: Hikawa = field(default_factory=Hikawa)
    # Ordered by index.
    zundokos: list[Said] = field(default_factory=list)
    kiyoshi: Optional[Said] = None
    now: int = 0
    entropy: int = 0

    def words(self) -> list[str]:
        """The words said so far, in order (the Kiyoshi not included)."""
        return [z.word for z in self.zundokos]

    def wait_millis(self) -> int:
        """Milliseconds until the next word is due: `intervalMillis` after the last word; 0 for
        the first word or when the last word's time is unknown."""
        if not self.zundokos or self.zundokos[-1].said_at is None:
            return 0
        due = saturating_i64(self.zundokos[-1].said_at + min(self.hikawa.interval_millis, I64_MAX))
        return max(saturating_i64(due - self.now), 0)

    def apply(self, plan: Plan) -> None:
        """Carry out a plan on this in-memory view, the way the cluster would: children appear
        (a create of an existing name is a no-op), the status is replaced."""
        for a in plan.actions:
            if isinstance(a, Say):
                said = Said(a.name, a.index, a.word, self.now)
                if a.kind == ChildKind.ZUNDOKO:
                    if not any(z.name == said.name for z in self.zundokos):
                        self.zundokos.append(said)
                        self.zundokos.sort(key=lambda z: z.index)
                elif self.kiyoshi is None:
                    self.kiyoshi = said
            elif isinstance(a, StatusUpdate):
                self.hikawa.status = HikawaStatus(a.num_zundokos_said, a.kiyoshied, a.phase)


class RuleError(Exception):
    """Why the rules could not decide: raise one of its kinds from `reconcile`. The host records
    it on the Hikawa as a condition and retries with backoff."""

    reason = "RulesInternalError"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message

    def __eq__(self, other):
        return type(self) is type(other) and self.message == other.message

    def __hash__(self):
        return hash((type(self), self.message))

    def __repr__(self):
        return f"{type(self).__name__}({self.message!r})"

    def __str__(self):
        return f"{self.reason}: {self.message}"


class InvalidParams(RuleError):
    """`spec.params` holds a value the rules cannot use (the message names it)."""

    reason = "InvalidParams"


class InconsistentSong(RuleError):
    """The observed children do not form a song the rules can continue."""

    reason = "InconsistentSong"


class Internal(RuleError):
    """Anything else."""

    reason = "RulesInternalError"


@dataclass
class ModuleInfo:
    name: str
    version: str
    description: str


def module_info_from_pyproject(beside: str) -> ModuleInfo:
    """The module's name, version and description from the `[project]` table of the
    pyproject.toml in the directory of `beside` (pass `__file__`). Called at import, so in a
    component it runs once, when the component is built."""
    path = os.path.join(os.path.dirname(os.path.abspath(beside)), "pyproject.toml")
    with open(path, "rb") as f:
        project = tomllib.load(f)["project"]
    return ModuleInfo(project["name"], project["version"], project["description"])
