"""Native tests: whole songs on a virtual clock, no wasm (`make test-rules NAME=__NAME__`)."""

from rules import CALL, KIYOSHI, MyRules
from zundoko_kit.testing import new_hikawa, sing


def test_every_song_ends_with_one_kiyoshi_right_after_the_call():
    for seed in range(500):
        song = sing(MyRules(), new_hikawa(500), seed)
        assert song.kiyoshi == KIYOSHI, f"seed {seed}: {song.words}"
        assert song.words[-len(CALL):] == CALL, f"seed {seed}: {song.words}"
        assert not song.after_kiyoshi, f"seed {seed}: said {song.after_kiyoshi} after the Kiyoshi"


def test_words_come_one_interval_apart():
    song = sing(MyRules(), new_hikawa(500), 7)
    assert all(b - a == 500 for a, b in zip(song.times, song.times[1:])), song.times
