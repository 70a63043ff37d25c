"""Building blocks for a `reconcile` written from scratch (sdk/rust/src/steps.rs): the plans a
song is made of, with the names, indexes and status the host expects."""

from .model import ChildKind, Observed, Plan, RequeueAfter, Say, StatusUpdate
from .naming import kiyoshi_name, zundoko_name
from .song import PHASE_KIYOSHIED, PHASE_SINGING


def wait(observed: Observed) -> Plan:
    """Come back when the next word is due."""
    return Plan([RequeueAfter(observed.wait_millis())])


def say_word(observed: Observed, word: str) -> Plan:
    """Say the next word (a Zundoko child), count it in the status, and come back one interval later."""
    hikawa = observed.hikawa
    index = len(observed.zundokos) + 1
    return Plan(
        [
            Say(ChildKind.ZUNDOKO, hikawa.namespace, zundoko_name(hikawa.name, index), index, word),
            _status(index, False, f"{index} words said"),
            RequeueAfter(hikawa.interval_millis),
        ]
    )


def say_kiyoshi(observed: Observed, word: str) -> Plan:
    """Say the Kiyoshi: the song's last word. Nothing may be said after it."""
    hikawa = observed.hikawa
    said = len(observed.zundokos)
    return Plan(
        [
            Say(ChildKind.KIYOSHI, hikawa.namespace, kiyoshi_name(hikawa.name), said + 1, word),
            _status(said, True, f"{word} after {said} words"),
        ]
    )


def song_over(observed: Observed) -> Plan:
    """After the Kiyoshi: nothing, except bringing a stale status up to date once."""
    said = len(observed.zundokos)
    current = observed.hikawa.status
    if current.kiyoshied and current.num_zundokos_said == said and current.phase == PHASE_KIYOSHIED:
        return Plan()
    return Plan([_status(said, True, "the song is over")])


def _status(said: int, kiyoshied: bool, message: str) -> StatusUpdate:
    return StatusUpdate(PHASE_KIYOSHIED if kiyoshied else PHASE_SINGING, said, kiyoshied, message)
