"""Python's shared `random` generator seeded when a call first uses it, not at every call's start.

componentize-py reseeds `random` from the OS (in the operator: the call's entropy) at the start of
every call, so a snapshot's baked-in state is never drawn from. Seeding a Mersenne Twister runs
about 1,900 loop rounds: 97,000 wasm instructions, a third of a classic rule call that never draws
a random number (its randomness is `observed.entropy`).

`install()` runs once, while the component is built. It makes the shared generator
(`random._inst`) a `_SeedFirst`: every way to its state (`random`, `getrandbits`, `getstate`)
seeds it first, from `os.urandom` as before, and turns it back into a plain `random.Random`;
`seed` and `setstate` just turn it back. The module's functions are rebound to it, and the
runtime's per-call reseed becomes `_arm`, which puts `_SeedFirst` back. So a call that draws
gets a generator seeded from its own entropy (the same input replays the same numbers), and a
call that does not draw pays nothing.

Sound only if no one holds the module's original functions: `from random import random` run
before `install()` keeps the C method, which draws without seeding. `install()` counts the
references to each function it replaces and, if anything else holds one, leaves `random` as it
was: reseeded at every call's start, as componentize-py does. (Calling the C methods on
`random._inst` through `random.Random` by hand bypasses this; that is private API.)
"""

from __future__ import annotations

import random
import sys

# The functions that reach the generator's state without going through a method lookup on its
# class: the C methods, and the Python ones that seed or read or set the state.
_STATEFUL = ("random", "getrandbits", "getstate", "setstate", "seed")

_C_RANDOM = random.Random.random
_C_GETRANDBITS = random.Random.getrandbits


class _SeedFirst(random.Random):
    """The shared generator until a call first uses it (see the module's doc)."""

    def random(self):
        if type(self) is _SeedFirst:
            _seed_now(self)
        return _C_RANDOM(self)

    def getrandbits(self, k):
        if type(self) is _SeedFirst:
            _seed_now(self)
        return _C_GETRANDBITS(self, k)

    def getstate(self):
        if type(self) is _SeedFirst:
            _seed_now(self)
        return random.Random.getstate(self)

    def setstate(self, state):
        self.__class__ = random.Random
        return random.Random.setstate(self, state)

    def seed(self, *args, **kwargs):
        self.__class__ = random.Random
        return random.Random.seed(self, *args, **kwargs)


def _seed_now(generator: random.Random) -> None:
    generator.__class__ = random.Random
    random.Random.seed(generator)


def install() -> bool:
    """Seed `random` on first use from now on (see the module's doc); False if something already
    holds one of its functions, in which case nothing is changed."""
    generator = random._inst
    names = [name for name, value in vars(random).items() if getattr(value, "__self__", None) is generator]
    originals = {name: getattr(random, name) for name in names}
    if not all(name in originals for name in _STATEFUL):
        return False
    generator.__class__ = _SeedFirst
    for name in names:
        setattr(random, name, getattr(generator, name))
    # One reference in `originals`, one as getrefcount's argument: any more is a holder.
    if any(sys.getrefcount(originals[name]) > 2 for name in _STATEFUL):
        generator.__class__ = random.Random
        for name, value in originals.items():
            setattr(random, name, value)
        return False
    # What componentize-py calls at every call's start (it looks `random.seed` up after the
    # component's modules are imported): arm the generator instead of seeding it.
    random.seed = _arm
    return True


def _arm(*args, **kwargs):
    """The per-call reseed: the generator seeds on first use. Rules calling `random.seed()` get
    the generator's own `seed`, which this puts back first."""
    generator = random._inst
    generator.__class__ = _SeedFirst
    # Bound while the class is `_SeedFirst`: its `seed` turns the generator back when called.
    random.seed = generator.seed
    if args or kwargs:
        return generator.seed(*args, **kwargs)
    return None
