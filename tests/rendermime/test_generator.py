"""The generator is reproducible from (seed, index) and reaches every kind of hostile piece."""

from __future__ import annotations

from .generator import CODE, ENTITY, FENCE_BLOCKS, HTML, LINK, MATH, PLACEHOLDER, TABLE, case, cases


def test_an_input_is_made_again_from_its_seed_and_index() -> None:
    assert cases("s", 100, 50) == [case("s", i) for i in range(100, 150)]
    assert cases("s", 0, 50) != cases("t", 0, 50)


def test_the_first_inputs_hold_every_piece() -> None:
    joined = "\0".join(cases("coverage", 0, 3000))
    for pool in (MATH, CODE, HTML, ENTITY, LINK, PLACEHOLDER, TABLE):
        missing = [p for p in pool if p not in joined]
        assert not missing, missing
    for shape in ("> ```\n> ", ">\n> ```", "- ```\n  ", "> ~~~\n>\n> "):
        assert shape in joined, shape
    assert len(FENCE_BLOCKS) > 4
