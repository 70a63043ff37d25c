"""sdk/python/zundoko_kit/testing.py's `sing`, natively: each decision starts from the rules as
they were when the song started, as each call does in the operator (a fresh instance of the
component). A rule set that counts its song on `self` or in a global sings natively what it
sings in the operator, and `sing` leaves the module as it found it. Run by `make test-langs`."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent / "python"))

from zundoko_kit import steps  # noqa: E402
from zundoko_kit.testing import new_hikawa, sing  # noqa: E402

# Calls seen by the rules below, kept in a global (as `global CALLS_SEEN; CALLS_SEEN += 1`).
CALLS_SEEN = 0
SEEN_WORDS = []


class CountsOnSelf:
    """Says its Kiyoshi at its sixth call, counted on itself; gives up after 12 words."""

    def __init__(self):
        self.calls = 0

    def reconcile(self, observed):
        self.calls += 1
        return _decide(observed, self.calls)


class CountsOnItsClass:
    calls = 0

    def reconcile(self, observed):
        CountsOnItsClass.calls += 1
        return _decide(observed, CountsOnItsClass.calls)


class CountsInAGlobal:
    def reconcile(self, observed):
        global CALLS_SEEN
        CALLS_SEEN += 1
        SEEN_WORDS.append("call")
        return _decide(observed, CALLS_SEEN)


def _decide(observed, calls):
    if observed.kiyoshi is not None or len(observed.zundokos) >= 12:
        return steps.song_over(observed)
    if calls >= 6:
        return steps.say_kiyoshi(observed, "Ki-yo-shi!")
    return steps.say_word(observed, "Zun")


def test_a_count_kept_on_self_is_gone_by_the_next_call_as_in_the_operator():
    rules = CountsOnSelf()
    song = sing(rules, new_hikawa(0), 1)
    assert song.kiyoshi is None and len(song.words) == 12, song
    assert rules.calls == 0, "the rules handed in are not the ones called"


def test_a_count_kept_in_a_global_is_gone_by_the_next_call_and_put_back_after_the_song():
    song = sing(CountsInAGlobal(), new_hikawa(0), 1)
    assert song.kiyoshi is None and len(song.words) == 12, song
    assert CALLS_SEEN == 0 and SEEN_WORDS == [], (CALLS_SEEN, SEEN_WORDS)
    assert "ADDED_BY_A_CALL" not in globals()


def test_a_global_a_call_adds_is_removed():
    class AddsAGlobal:
        def reconcile(self, observed):
            assert "ADDED_BY_A_CALL" not in globals(), "left by the call before"
            globals()["ADDED_BY_A_CALL"] = True
            return _decide(observed, 6 if len(observed.zundokos) else 0)

    song = sing(AddsAGlobal(), new_hikawa(0), 1)
    assert song.kiyoshi == "Ki-yo-shi!" and song.words == ["Zun"], song
    assert "ADDED_BY_A_CALL" not in globals()


def test_a_count_kept_on_the_rules_class_is_gone_by_the_next_call_and_put_back_after_the_song():
    song = sing(CountsOnItsClass(), new_hikawa(0), 1)
    assert song.kiyoshi is None and len(song.words) == 12, song
    assert CountsOnItsClass.calls == 0
