"""sdk/python/zundoko_kit/warm_up.py, natively: the rules' own `reconcile` runs on the warm-up's
sample calls while the component is built, and leaves nothing of theirs behind (`as_built.py`):
what the snapshot holds of the rule set is what its import made. Each case runs in a Python
process of its own, with a rule set written to a temporary directory (the kit's model classes
stand in for the WIT bindings, which take the same fields in the same order). Run by
`make test-langs`."""
import json
import textwrap

from kit_process import run_with_kit

# A rule set that counts its calls in every place Python keeps state: a global, its class,
# itself, a module of its own, a `functools.cache`d list; and in a closure, which the warm-up
# does not cover, so the test can count the calls that ran. It prints, and logs through the
# kit (a WIT import in a component, which fails the build if called while it is built).
RULES = '''
import functools

import helper
from zundoko_kit import steps
from zundoko_kit.component import log

CALLS = 0
WORDS = []


@functools.cache
def seen():
    return []


def counted():
    runs = []

    class Counting:
        calls_on_class = 0

        def __init__(self):
            self.calls = 0

        def reconcile(self, observed):
            global CALLS
            runs.append(len(observed.zundokos))
            CALLS += 1
            WORDS.append("call")
            Counting.calls_on_class += 1
            self.calls += 1
            helper.CALLS += 1
            seen().append(1)
            globals()["ADDED"] = True
            print("a line the build does not show")
            log("info", "a line the operator's log would show")
            if observed.kiyoshi is not None:
                raise ValueError("a bug the sample hits")
            return steps.say_word(observed, "Zun")

    return Counting(), runs
'''

HELPER = "CALLS = 0\n"

WARM = '''
import json, sys, types
from zundoko_kit import model, warm_up

# The operator's log, as the bindings name it: a call to it fails the build.
logged = []
wit_log = types.ModuleType("wit_world.imports.log")
wit_log.Level = types.SimpleNamespace(INFO="info")
def refuse(level, message):
    logged.append(message)
    raise AssertionError("the log import was called while the component was built")
wit_log.log = refuse
for name in ("wit_world", "wit_world.imports"):
    sys.modules[name] = types.ModuleType(name)
sys.modules["wit_world.imports"].log = wit_log
sys.modules["wit_world.imports.log"] = wit_log

import rules, helper
obj, runs = rules.counted()
converted = []
warm_up.warm_up(obj, model, lambda sample: sample, lambda plan, wit: converted.append(plan))
print(json.dumps({
    "runs": runs,
    "converted": len(converted),
    "calls": [rules.CALLS, len(rules.WORDS), type(obj).calls_on_class, obj.calls, helper.CALLS, len(rules.seen())],
    "added": "ADDED" in vars(rules),
    "logged": logged,
    "log_put_back": wit_log.log is refuse,
}))
'''


def warmed(tmp_path) -> dict:
    (tmp_path / "rules.py").write_text(textwrap.dedent(RULES))
    (tmp_path / "helper.py").write_text(HELPER)
    out = run_with_kit(WARM, tmp_path)
    return json.loads(out.strip().splitlines()[-1])


def test_the_rules_run_on_every_sample_and_leave_nothing_behind(tmp_path):
    state = warmed(tmp_path)
    # Every sample ran, every round: 5 samples, 4 rounds.
    assert state["runs"] == [0, 3, 5, 7, 7] * 4, state
    assert state["calls"] == [0, 0, 0, 0, 0, 0], "a count the warm-up's calls left in the snapshot"
    assert not state["added"], "a global a warm-up call added is still there"


def test_a_sample_the_rules_fail_on_is_passed_over_and_every_plan_is_converted(tmp_path):
    state = warmed(tmp_path)
    # Two plans a sample (the rules' or a stand-in, and a status): the conversions warm too.
    assert state["converted"] == 5 * 4 * 2, state


def test_the_build_shows_nothing_the_rules_print_and_the_log_import_is_not_called(tmp_path):
    (tmp_path / "rules.py").write_text(textwrap.dedent(RULES))
    (tmp_path / "helper.py").write_text(HELPER)
    out = run_with_kit(WARM, tmp_path)
    assert "a line" not in out, out
    assert json.loads(out.strip().splitlines()[-1])["logged"] == [], "the log import was called"
    assert json.loads(out.strip().splitlines()[-1])["log_put_back"], "the log import was not put back"
