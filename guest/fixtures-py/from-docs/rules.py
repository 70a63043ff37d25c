"""A test fixture: a rule set as someone outside the project wrote it, from docs/writing-rules.md
alone, without the kit's song engine (kept as written, in issue 38's tenth stop): random.choice
for the word, print for a log line, a dataclass for settings read from params and checked with
`re.fullmatch` in every call, Japanese or English words, and a number of Zuns before the Doko set
by a param. host/tests/py_call_fuel.rs holds what a call of it costs."""

import json
import random
import re
import time
from dataclasses import dataclass

from zundoko_kit import InvalidParams, Observed, Plan, module_info_from_pyproject, steps

INFO = module_info_from_pyproject(__file__)

WORDS = {
    "en": ("Zun", "Doko", "Ki-yo-shi!"),
    "ja": ("ズン", "ドコ", "キ・ヨ・シ！"),
}


@dataclass(frozen=True)
class Settings:
    zun: str
    doko: str
    kiyoshi: str
    zuns: int

    @staticmethod
    def of(observed: Observed) -> "Settings":
        lang = observed.hikawa.param("lang") or "en"
        if lang not in WORDS:
            raise InvalidParams(f"lang must be one of {sorted(WORDS)}, not {lang!r}")
        zuns = observed.hikawa.param("zuns") or "4"
        if not re.fullmatch(r"[1-8]", zuns):
            raise InvalidParams(f"zuns must be a number from 1 to 8, not {zuns!r}")
        zun, doko, kiyoshi = WORDS[lang]
        return Settings(zun, doko, kiyoshi, int(zuns))


class HikawaSong:
    def info(self):
        return INFO

    def reconcile(self, observed: Observed) -> Plan:
        settings = Settings.of(observed)
        if observed.kiyoshi is not None:
            return steps.song_over(observed)
        if observed.wait_millis() > 0:
            return steps.wait(observed)
        words = observed.words()
        call = [settings.zun] * settings.zuns + [settings.doko]
        if words[-len(call):] == call:
            print(json.dumps({"hikawa": observed.hikawa.name, "event": "kiyoshi", "after": len(words), "at": time.time()}))
            return steps.say_kiyoshi(observed, settings.kiyoshi)
        return steps.say_word(observed, random.choice([settings.zun, settings.doko]))
