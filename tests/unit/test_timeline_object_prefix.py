"""The timeline's objectPrefix filter on both database backends: the object itself and `<prefix>-…`, never a
longer name that merely starts the same, and LIKE wildcards in the prefix taken literally."""

from __future__ import annotations

from datetime import UTC, datetime

from instantstart.store import timeline as store
from instantstart.store.db import Database


def _entry(name: str, n: int) -> store.Entry:
    at = datetime(2026, 12, 3, 12, 0, n, tzinfo=UTC)
    return store.Entry(cluster_tag="c1", dedupe_key=f"k{n}", source="kubernetes", object_kind="Pod",
                       object_name=name, namespace="default", type="Normal", reason="Scheduled", message="",
                       count=1, first_at=at, last_at=at)


def test_object_prefix_is_the_object_and_its_dash_children(database_url: str) -> None:
    db = Database(database_url)
    db.migrate()
    names = ["train-a", "train-a-worker-0", "train-a-worker-1", "train-ab-worker-0", "train-a_x", "xtrain-a-1",
             "train%a-1"]
    store.record(db, [_entry(name, n) for n, name in enumerate(names)])
    found = [r.object_name for r in store.query(db, "c1", object_prefix="train-a", limit=50)]
    assert found == ["train-a-worker-1", "train-a-worker-0", "train-a"]  # newest first
    assert [r.object_name for r in store.query(db, "c1", object_prefix="train%a", limit=50)] == ["train%a-1"]
    assert store.query(db, "c1", object_prefix="train_a", limit=50) == []  # "_" is not a wildcard
    assert store.query(db, "other", object_prefix="train-a", limit=50) == []
