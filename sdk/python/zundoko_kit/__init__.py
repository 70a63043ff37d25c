"""The Zundoko rules kit for Python: what a rule set in Python is written against.

The same contract as the Rust SDK (sdk/rust) and the WIT world (wit/zundoko-rules.wit): a
rule set gets everything it may know in an `Observed` and answers with a `Plan`, or raises a
`RuleError`. It has no clock, no randomness and no I/O of its own: the time is `observed.now`,
64 random bits are `observed.entropy`. (Inside the operator `time.time()` reads the call's
`now` and `random`/`os.urandom` are seeded by its entropy, so nothing leaks in; but rules that
use them are harder to read and to test: use `observed`.)

- `model`: the data (Observed, Plan, Say, StatusUpdate, RequeueAfter, RuleError, ModuleInfo).
- `steps`: the plans a song is made of (`say_word`, `say_kiyoshi`, `wait`, `song_over`).
- `song`: the song engine the classic rules are (`RuleSet`), and `mix`, entropy to a word.
- `testing`: whole songs on a virtual clock, natively (`sing`, `new_hikawa`).
- `component`: `export_rules(rules)`, the glue to the WIT world; `log(level, message)`.
- `warm_up`, `as_built`: the rules run on sample calls while the component is built, each on a
  copy of the rule set as built (as `testing.sing` plays each decision), so calls start warm.
"""

from .model import (  # noqa: F401
    Action,
    ChildKind,
    Hikawa,
    HikawaStatus,
    InconsistentSong,
    Internal,
    InvalidParams,
    ModuleInfo,
    Observed,
    Plan,
    RequeueAfter,
    RuleError,
    Said,
    Say,
    StatusUpdate,
    module_info_from_pyproject,
)
