"""The glue between a rule set and the WIT world `zundokokiyoshi:rules/zundoko-rules`.

In a rule set's `app.py` (what componentize-py builds):

    from zundoko_kit.component import export_rules
    Rules = export_rules(MyRules())

`log(level, message)` writes a line to the operator's log (natively, to stderr).
"""

from __future__ import annotations

import dataclasses
import gc
import sys
import traceback

from . import lazy_seed, model, snapshot_imports, warm_up
from .model import (
    ChildKind,
    Hikawa,
    HikawaStatus,
    InconsistentSong,
    InvalidParams,
    Observed,
    Plan,
    RequeueAfter,
    RuleError,
    Said,
    Say,
    StatusUpdate,
)

LEVELS = ("trace", "debug", "info", "warn", "error")


# Python's own names for levels (`logging`'s), taken as the log's nearest.
LEVEL_ALIASES = {"warning": "warn", "critical": "error", "fatal": "error"}


def log(level: str, message: str) -> None:
    """A line in the operator's log, tagged with the Hikawa being reconciled. `level` is one of
    trace, debug, info, warn, error, in any case (`logging`'s warning, critical and fatal are
    taken as warn, error, error). The host bounds how much one call may log."""
    level = str(level).lower()
    level = LEVEL_ALIASES.get(level, level)
    if level not in LEVELS:
        raise ValueError(f"log level must be one of {LEVELS} (or warning, critical, fatal), not {level!r}")
    try:
        from wit_world.imports import log as wit_log
    except ImportError:  # natively: no component around
        print(f"[{level.capitalize()}] {message}", file=sys.stderr)
        return
    wit_log.log(getattr(wit_log.Level, level.upper()), message)


def _said(s) -> Said:
    return Said(s.name, s.index, s.word, s.said_at)


# The records a call's input is made of, by their name in the WIT bindings and in the kit's model.
INPUT_RECORDS = ("Observed", "Hikawa", "HikawaStatus", "Said")


def lift_into_model(wit) -> bool:
    """Have componentize-py lift a call's input straight into the kit's own classes, so a call
    does not copy every child a second time (about 6k fuel a child). Its runtime finds the class of
    each record by name in the bindings' `types` module when the component is built, after the
    app is imported: naming the kit's class there makes the runtime construct it, with the fields
    in the WIT's order. Done only where each kit class has the same fields in the same order;
    otherwise (or with a runtime that finds its classes another way) `observed_from_wit` copies."""
    fields = lambda cls: [f.name for f in dataclasses.fields(cls)]  # noqa: E731
    if any(fields(getattr(model, name)) != fields(getattr(wit, name)) for name in INPUT_RECORDS):
        return False
    for name in INPUT_RECORDS:
        setattr(wit, name, getattr(model, name))
    return True


def observed_from_wit(o) -> Observed:
    if type(o) is Observed:
        # Lifted as the kit's own (`lift_into_model`).
        return o
    h = o.hikawa
    status = HikawaStatus(h.status.num_zundokos_said, h.status.kiyoshied, h.status.phase)
    hikawa = Hikawa(
        h.namespace, h.name, h.uid, h.generation, h.created_at, h.interval_millis, [tuple(p) for p in h.params], status
    )
    return Observed(
        hikawa, [_said(z) for z in o.zundokos], None if o.kiyoshi is None else _said(o.kiyoshi), o.now, o.entropy
    )


def plan_to_wit(plan: Plan, wit):
    actions = []
    for a in plan.actions:
        if isinstance(a, Say):
            kind = wit.ChildKind.KIYOSHI if a.kind == ChildKind.KIYOSHI else wit.ChildKind.ZUNDOKO
            actions.append(wit.Action_Say(wit.Say(kind, a.namespace, a.name, a.index, a.word)))
        elif isinstance(a, StatusUpdate):
            actions.append(
                wit.Action_SetStatus(wit.StatusUpdate(a.phase, a.num_zundokos_said, a.kiyoshied, a.message))
            )
        elif isinstance(a, RequeueAfter):
            actions.append(wit.Action_RequeueAfter(a.millis))
        else:
            raise TypeError(f"not an action: {a!r} (Say, StatusUpdate or RequeueAfter)")
    return wit.Plan(actions)


def error_to_wit(error: RuleError, wit):
    if isinstance(error, InvalidParams):
        return wit.RuleError_InvalidParams(error.message)
    if isinstance(error, InconsistentSong):
        return wit.RuleError_InconsistentSong(error.message)
    return wit.RuleError_Internal(error.message)


def export_rules(rules):
    """The class componentize-py exports as the world's `rules` interface: `rules` is any
    object with `info()` (a ModuleInfo) and `reconcile(observed)` (a Plan, or raises a
    RuleError). Any other exception traps the call: the operator reports it as GuestTrapped,
    and the exception with the end of its traceback is logged first."""
    from componentize_py_types import Err
    from wit_world import exports
    from wit_world.imports import types as wit

    class Rules(exports.Rules):
        def info(self):
            i = rules.info()
            return wit.ModuleInfo(i.name, i.version, i.description)

        def reconcile(self, observed):
            try:
                plan = rules.reconcile(observed_from_wit(observed))
            except RuleError as e:
                raise Err(error_to_wit(e, wit))
            except BaseException as e:
                # The trap that follows says nothing of Python: the exception goes to the log first.
                lines = traceback.format_exception(e)
                log("error", f"reconcile raised {type(e).__name__}: {e}\n" + "".join(lines[-6:]))
                hinted = snapshot_imports.with_hint(e)
                if hinted is not None:
                    raise hinted from e
                raise
            return plan_to_wit(plan, wit)

    lift_into_model(wit)
    # What a call would import, imported now: a call has no files to import from.
    snapshot_imports.import_for_calls()
    # The kit's code and the rules' own run on sample calls, so calls start warm (warm_up.py).
    warm_up.warm_up(rules, wit, observed_from_wit, plan_to_wit)
    # `random` seeded when a call first draws, not at every call's start (lazy_seed.py).
    lazy_seed.install()
    # Everything made so far (CPython's, the kit's, the module's) lives as long as the snapshot:
    # frozen, the cyclic collector leaves it out, so a collection during a call walks only what
    # the call made. Not frozen, a call that crossed the collector's threshold walked the whole
    # heap: about 2.7M fuel, five times the rest of a call of rules that build objects of their
    # own (host/tests/py_call_fuel.rs).
    gc.freeze()
    return Rules
