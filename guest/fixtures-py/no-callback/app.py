"""A rule set as someone outside the project writes it: against the WIT world's bindings alone
(`componentize-py -d wit -w zundoko-rules bindings`), no kit, and to the contract's sentence on
`requeue-after`: it never asks for a callback. Each call says the next word (Zun or Doko by the
call's entropy, whatever the interval) and nothing else; its own word is what calls it again.
After Zun Zun Zun Zun Doko it says Ki-yo-shi!, then nothing. The differential test sings it
through `simulate` and through the operator."""

from wit_world import exports
from wit_world.imports import types as t

CALL = ["Zun", "Zun", "Zun", "Zun", "Doko"]


class Rules(exports.Rules):
    def info(self):
        return t.ModuleInfo("zundoko-py-no-callback", "0.1.0", "test fixture: never asks for a callback")

    def reconcile(self, observed):
        if observed.kiyoshi is not None:
            return t.Plan([])
        hikawa = observed.hikawa
        words = [z.word for z in observed.zundokos]
        if words[-5:] == CALL:
            say = t.Say(t.ChildKind.KIYOSHI, hikawa.namespace, f"{hikawa.name}-kiyoshi", len(words) + 1, "Ki-yo-shi!")
        else:
            index = len(words) + 1
            word = "Zun" if (observed.entropy >> 33) & 1 else "Doko"
            say = t.Say(t.ChildKind.ZUNDOKO, hikawa.namespace, f"{hikawa.name}-zundoko-{index:03}", index, word)
        return t.Plan([t.Action_Say(say)])
