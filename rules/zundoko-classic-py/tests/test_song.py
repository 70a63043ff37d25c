"""Native tests: whole songs on a virtual clock, no wasm (`make test-rules NAME=zundoko-classic-py`).
The same checks as the Rust rules' (rules/zundoko-classic/tests/song.rs), and the decisions
that must match them word for word."""

import dataclasses

import pytest

from rules import rules
from zundoko_kit import (
    ChildKind,
    HikawaStatus,
    InconsistentSong,
    InvalidParams,
    Plan,
    RequeueAfter,
    Said,
    Say,
    StatusUpdate,
)
from zundoko_kit.song import Words, mix
from zundoko_kit.testing import T0, new_hikawa, sing

CALL = ["Zun", "Zun", "Zun", "Zun", "Doko"]


def test_every_song_ends_with_one_kiyoshi_right_after_the_call():
    for seed in range(500):
        song = sing(rules(), new_hikawa(500), seed)
        assert song.kiyoshi == "Ki-yo-shi!", f"seed {seed}: {song.words}"
        assert song.words[-5:] == CALL, f"seed {seed}: {song.words}"
        assert not song.after_kiyoshi, f"seed {seed}: said {song.after_kiyoshi} after the Kiyoshi"
        assert all(w in ("Zun", "Doko") for w in song.words), f"seed {seed}: {song.words}"


def test_words_come_one_interval_apart():
    song = sing(rules(), new_hikawa(500), 7)
    assert all(b - a == 500 for a, b in zip(song.times, song.times[1:])), song.times


def test_mix_is_splitmix64s_finaliser():
    # Values from the Rust SDK's `mix` (sdk/rust/src/song.rs).
    assert mix(0) == 0xE220A8397B1DCDAF
    assert mix(1) == 0x910A2DEC89025CC1
    assert mix((1 << 64) - 1) == 0xE4D971771B652C20


def test_the_word_comes_from_the_entropy_alone():
    r = rules()
    observed = new_hikawa(500)
    for e in (0, 1, 2, 3, (1 << 64) - 1):
        observed.entropy = e
        word = r.reconcile(observed).says()[0].word
        assert word == ("Zun" if mix(e) >> 63 == 0 else "Doko")


def test_the_first_plan():
    observed = new_hikawa(500)
    observed.entropy = 0  # mix(0) has its top bit set: Doko
    assert rules().reconcile(observed) == Plan(
        [
            Say(ChildKind.ZUNDOKO, "default", "hikawa-sample-zundoko-001", 1, "Doko"),
            StatusUpdate("Singing", 1, False, "1 words said"),
            RequeueAfter(500),
        ]
    )


def _said(words, at=T0):
    return [Said(f"hikawa-sample-zundoko-{i:03d}", i, w, at) for i, w in enumerate(words, 1)]


def test_waits_for_the_interval_and_says_so_once():
    observed = new_hikawa(500)
    observed.zundokos = _said(["Zun"])
    observed.now = T0 + 200
    assert rules().reconcile(observed) == Plan([StatusUpdate("Singing", 1, False, "1 words said"), RequeueAfter(300)])
    observed.hikawa.status = HikawaStatus(1, False, "Singing")
    assert rules().reconcile(observed) == Plan([RequeueAfter(300)])


def test_kiyoshi_after_the_call_then_nothing():
    observed = new_hikawa(500)
    observed.zundokos = _said(["Doko"] + CALL)
    observed.now = T0 + 500
    assert rules().reconcile(observed) == Plan(
        [
            Say(ChildKind.KIYOSHI, "default", "hikawa-sample-kiyoshi", 7, "Ki-yo-shi!"),
            StatusUpdate("Kiyoshied", 6, True, "Ki-yo-shi! after 6 words"),
        ]
    )
    observed.kiyoshi = Said("hikawa-sample-kiyoshi", 7, "Ki-yo-shi!", T0 + 500)
    assert rules().reconcile(observed) == Plan([StatusUpdate("Kiyoshied", 6, True, "the song is over")])
    observed.hikawa.status = HikawaStatus(6, True, "Kiyoshied")
    assert rules().reconcile(observed) == Plan()


def test_a_missing_word_is_an_inconsistent_song():
    observed = new_hikawa(500)
    observed.zundokos = [Said("hikawa-sample-zundoko-001", 1, "Zun", T0), Said("hikawa-sample-zundoko-003", 3, "Zun", T0)]
    with pytest.raises(InconsistentSong) as e:
        rules().reconcile(observed)
    assert e.value.message == "expected word 2 but found 3 (hikawa-sample-zundoko-003): a word is missing"


@pytest.mark.parametrize(
    "params, message",
    [
        ({"zun": " "}, "params.zun must be a non-empty word"),
        ({"kiyoshi": ""}, "params.kiyoshi must be a non-empty word"),
        ({"zun": "Doko"}, 'params.zun and params.doko must differ (both are "Doko")'),
        ({"zun": 'a"b\n', "doko": 'a"b\n'}, 'params.zun and params.doko must differ (both are "a\\"b\\n")'),
        ({"zuns": "0"}, 'params.zuns must be a whole number from 1 to 16, found "0"'),
        ({"zuns": "17"}, 'params.zuns must be a whole number from 1 to 16, found "17"'),
        ({"zuns": " 3"}, 'params.zuns must be a whole number from 1 to 16, found " 3"'),
        ({"zuns": "-1"}, 'params.zuns must be a whole number from 1 to 16, found "-1"'),
        ({"zuns": "٣"}, 'params.zuns must be a whole number from 1 to 16, found "٣"'),
    ],
)
def test_bad_params_are_refused_with_the_rust_message(params, message):
    with pytest.raises(InvalidParams) as e:
        rules().reconcile(new_hikawa(500, params))
    assert e.value.message == message


def test_the_same_zun_and_doko_are_refused_without_params_too_as_in_rust():
    # The engine serves itself as it is when there are no params; its words must still differ.
    same = dataclasses.replace(rules(), words=Words("Zun", "Zun", "K"))
    with pytest.raises(InvalidParams) as e:
        same.reconcile(new_hikawa(500))
    assert e.value.message == 'params.zun and params.doko must differ (both are "Zun")'


def test_params_change_the_words_and_the_call():
    params = {"zun": "ズン", "doko": "ドコ", "kiyoshi": "キ・ヨ・シ！", "zuns": "+2"}
    for seed in range(50):
        song = sing(rules(), new_hikawa(0, params), seed)
        assert song.kiyoshi == "キ・ヨ・シ！"
        assert song.words[-3:] == ["ズン", "ズン", "ドコ"], song.words


def test_module_info():
    info = rules().info()
    assert (info.name, info.version) == ("zundoko-classic-py", "0.1.0")
    assert info.description


def test_the_rules_are_called_again_as_the_host_calls_them():
    """The WIT contract's `requeue-after`, as the host implements it (Plan::next_call in Rust):
    after the callback if asked; else at once if the plan changed what the rules observe (a word,
    the status's phase, count or kiyoshied); else not until something else changes."""
    observed = new_hikawa(0)
    say = Say(ChildKind.ZUNDOKO, "default", "hikawa-sample-zundoko-001", 1, "Zun")
    assert Plan([say, RequeueAfter(500)]).next_call(observed) == 500
    assert Plan([say]).next_call(observed) == 0
    assert Plan([StatusUpdate("Singing", 0, False, "")]).next_call(observed) == 0
    observed.hikawa.status = HikawaStatus(0, False, "Singing")
    assert Plan([StatusUpdate("Singing", 0, False, "a new message")]).next_call(observed) is None
    assert Plan([]).next_call(observed) is None
    observed.zundokos.append(Said("hikawa-sample-zundoko-001", 1, "Zun", T0))
    assert Plan([say]).next_call(observed) is None, "a word already said changes nothing"
