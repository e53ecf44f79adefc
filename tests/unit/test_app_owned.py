"""Objects services keep per application live on its context (AppContext.owned), not in module globals keyed by
id(app): each context holds its own, made once, and gone with it."""

from __future__ import annotations

import gc
import weakref
from concurrent.futures import ThreadPoolExecutor

from instantstart.context import Owned, Slot

BOX: Slot[list[int]] = Slot("box")
OTHER: Slot[list[int]] = Slot("other box")


def test_each_owner_makes_its_object_once_and_owners_never_share_one() -> None:
    made: list[int] = []

    def make() -> list[int]:
        made.append(1)
        return []

    first, second = Owned(), Owned()
    with ThreadPoolExecutor(max_workers=8) as pool:
        found = list(pool.map(lambda _: first.get(BOX, make), range(32)))
    assert all(box is found[0] for box in found) and len(made) == 1
    assert second.get(BOX, make) is not found[0] and len(made) == 2
    assert first.get(OTHER, list) is not found[0]  # another slot, another object


def test_peek_put_and_pop() -> None:
    owned = Owned()
    assert owned.peek(BOX) is None and owned.pop(BOX) is None
    box = [1]
    owned.put(BOX, box)
    assert owned.peek(BOX) is box
    assert owned.pop(BOX) is box and owned.peek(BOX) is None


def test_an_object_goes_with_its_owner() -> None:
    class Thing:
        pass

    owned = Owned()
    kept = weakref.ref(owned.get(Slot[Thing]("thing"), Thing))
    del owned
    gc.collect()
    assert kept() is None  # no module-level map keeps it (nor a recycled id(app) finds it)
