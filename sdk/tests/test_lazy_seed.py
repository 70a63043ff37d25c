"""sdk/python/zundoko_kit/lazy_seed.py, natively: after `install()`, a per-call reseed (what
componentize-py calls) costs nothing until the call draws; the first draw seeds; an explicit
seed or state is kept; and a function taken from `random` before `install()` makes it change
nothing. Each case runs in a Python process of its own (it rewires the `random` module). Run by
`make test-langs`; the same behaviour inside a component is host/tests/wasi.rs's."""
from kit_process import run_with_kit as run


def test_a_call_that_never_draws_leaves_the_generator_unseeded_and_the_first_draw_seeds_it():
    run(
        """
        import random
        from zundoko_kit import lazy_seed
        assert lazy_seed.install()
        assert random.seed is lazy_seed._arm
        before = random.Random.getstate(random._inst)
        random.seed()  # the runtime's per-call reseed
        assert random.Random.getstate(random._inst) == before, "arming must not seed"
        assert type(random._inst) is lazy_seed._SeedFirst
        random.random()
        assert type(random._inst) is random.Random
        assert random.Random.getstate(random._inst) != before, "the first draw seeds"
        """
    )


def test_every_way_to_the_state_seeds_first():
    for draw in ("random.random()", "random.getrandbits(8)", "random.randint(1, 6)", "random.choice('ab')",
                 "random.randbytes(4)", "random.getstate()", "random.gauss()"):
        run(
            f"""
            import random
            from zundoko_kit import lazy_seed
            assert lazy_seed.install()
            random.seed()
            before = random.Random.getstate(random._inst)
            {draw}
            assert type(random._inst) is random.Random, {draw!r}
            assert random.Random.getstate(random._inst)[1][:624] != before[1][:624], {draw!r}
            """
        )


def test_an_explicit_seed_or_state_is_kept():
    run(
        """
        import random
        from zundoko_kit import lazy_seed
        assert lazy_seed.install()
        reference = random.Random(42)
        expected = [reference.random() for _ in range(3)]
        random.seed()  # armed, as every call starts
        random.seed(42)
        assert [random.random() for _ in range(3)] == expected
        random.seed()
        random.setstate(random.Random(7).getstate())
        assert random.random() == random.Random(7).random()
        """
    )


def test_a_function_taken_before_install_leaves_random_as_it_was():
    run(
        """
        from random import random as held
        import random
        original_seed = random.seed
        from zundoko_kit import lazy_seed
        assert not lazy_seed.install()
        assert random.seed is original_seed and type(random._inst) is random.Random
        assert random.random is held
        """
    )
