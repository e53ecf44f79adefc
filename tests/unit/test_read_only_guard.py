"""The read-only guard: while a read-only operation runs (the one invocation path sets it), the store refuses a
row-changing statement, the timeline refuses an entry and the informers refuse to start a feed; outside it, and
after the read, everything writes as before."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from instantstart.catalog.base import NoInput, WireModel
from instantstart.catalog.invoke import invoke_spec
from instantstart.catalog.registry import Catalog, operation
from instantstart.context import CallContext
from instantstart.errors import InternalError
from instantstart.kube.informers import Informer, Informers
from instantstart.readonly import ReadWrote, read_only_call
from instantstart.services.base.watch.timeline import TimelineWriter
from instantstart.store import timeline as store
from instantstart.store.db import Database
from instantstart.store.models import utcnow
from instantstart.store.state import read_state, write_state


class Done(WireModel):
    """A result."""

    value: str | None = None


def probes(catalog: Catalog) -> None:
    """A read that writes (the bug the guard catches) and a read that only reads."""

    @operation("probe_sneaky_read", method="GET", path="/probe/sneaky", catalog=catalog)
    async def sneaky(ctx: Any, req: NoInput) -> Done:
        """Look at a value, and (wrongly) remember that it was looked at."""
        write_state(ctx.app.db, "looked", True)
        return Done()

    @operation("probe_honest_read", method="GET", path="/probe/honest", catalog=catalog)
    async def honest(ctx: Any, req: NoInput) -> Done:
        """Look at a value."""
        return Done(value=str(read_state(ctx.app.db, "looked")))


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'state.db'}")
    database.migrate()
    return database


async def test_a_read_only_operation_cannot_write_a_row_and_the_guard_ends_with_the_call(db: Database) -> None:
    catalog = Catalog()
    probes(catalog)
    ctx = CallContext(app=SimpleNamespace(db=db))  # type: ignore[arg-type]
    with pytest.raises(InternalError, match="probe_sneaky_read failed unexpectedly"):
        await invoke_spec(catalog.get("probe_sneaky_read"), {}, ctx)  # type: ignore[arg-type]
    assert read_state(db, "looked") is None  # refused before the statement ran
    assert await invoke_spec(catalog.get("probe_honest_read"), {}, ctx) == {"value": "None"}  # type: ignore[arg-type]
    assert read_only_call.get() is None
    write_state(db, "looked", True)  # outside a read, the store writes as ever
    assert read_state(db, "looked") is True


def test_the_timeline_and_the_feeds_refuse_a_read(db: Database) -> None:
    writer = TimelineWriter(SimpleNamespace(db=db))  # type: ignore[arg-type]
    now = utcnow()
    entry = store.Entry(cluster_tag="t", dedupe_key="k", source="operation", object_kind="Operation",
                        object_name="o", namespace="", type="Normal", reason="r", message="", count=1,
                        first_at=now, last_at=now)
    started: list[str] = []

    def factory() -> Informer:
        started.append("feed")
        raise AssertionError("a read must not get this far")

    token = read_only_call.set("cluster_timeline")
    try:
        with pytest.raises(ReadWrote, match="cluster_timeline tried to record a timeline entry"):
            writer.put(entry)
        with pytest.raises(ReadWrote, match="tried to start the feed"):
            Informers().get("us-west-2:eks:events", factory, pinned=True)
    finally:
        read_only_call.reset(token)
    assert started == [] and writer.pending.empty()
