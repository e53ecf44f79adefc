"""A replica that dies holding an operation's lease: another runner on the same database waits for the lease to
run out, then takes it over and resumes the interrupted stage, recording itself as that attempt's runner."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from typing import Any

from instantstart.operations.kinds import KindRegistry, OperationKind, StageSpec
from instantstart.operations.models import OpStatus
from instantstart.operations.runner import Runner
from instantstart.operations.stage_record import StageRecord
from instantstart.operations.store import OperationStore
from instantstart.settings import Settings
from instantstart.store.db import Database
from instantstart.store.models import OperationRow

RUNS: list[str] = []


async def _work(_ctx: Any) -> dict[str, object]:
    RUNS.append("work")
    return {"done": True}


KIND = OperationKind(name="takeover_probe", stages=(StageSpec("work", _work),))


def _lease_expiry(store: OperationStore, operation_id: str) -> datetime:
    with store.db.session() as session:
        row = session.get(OperationRow, operation_id)
        assert row is not None and row.lease_expires_at is not None
        return row.lease_expires_at


async def _until_terminal(store: OperationStore, operation_id: str) -> None:
    for _ in range(600):
        if store.get(operation_id).status in (OpStatus.SUCCEEDED, OpStatus.FAILED):
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{operation_id} did not finish: {store.get(operation_id)}")


def test_an_expired_lease_is_taken_over_and_the_stage_resumed_by_the_survivor(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'state.db'}")
    db.migrate()
    store = OperationStore(db)
    view, _ = store.submit(KIND, {}, "probe:takeover", None)
    # Replica a claims it, begins the stage's first attempt, and dies (kill -9: its lease is never given back).
    token = store.claim(view.operation_id, "replica-a", 1.0)
    assert token is not None
    begun = StageRecord("work").replace(status=OpStatus.RUNNING, attempts=1, runner="replica-a",
                                        started_at="2026-01-01T00:00:00+00:00",
                                        attempt_started_at="2026-01-01T00:00:00+00:00")
    assert store.save_leased(view.operation_id, token, status="RUNNING", stages=[begun.to_dict()])
    dead_until = _lease_expiry(store, view.operation_id)
    assert store.claim(view.operation_id, "replica-b", 1.0) is None  # a live lease is never shared

    kinds = KindRegistry()
    kinds.register(KIND)
    settings = Settings(data_dir=tmp_path / "data", database_url=db.url, lease_seconds=1.0,
                        worker_poll_seconds=0.05, worker_id="replica-b")  # type: ignore[call-arg]
    survivor: Runner[Any] = Runner(settings, store, kinds)
    assert survivor.owner == "replica-b"

    async def main() -> None:
        survivor.start(object())
        try:
            await _until_terminal(store, view.operation_id)
        finally:
            await survivor.stop()

    RUNS.clear()
    asyncio.run(main())
    done = store.get(view.operation_id)
    assert done.status is OpStatus.SUCCEEDED and RUNS == ["work"]
    stage = done.stages[0]
    assert stage.attempts == 2 and stage.runner == "replica-b"
    assert stage.started_at is not None and stage.started_at.isoformat() == "2026-01-01T00:00:00+00:00"
    assert stage.attempt_started_at is not None and stage.attempt_started_at >= dead_until


def test_a_stage_record_keeps_its_latest_attempt_and_runner() -> None:
    record = StageRecord("eks").replace(status=OpStatus.RUNNING, attempts=2, runner="replica-b",
                                        attempt_started_at="2026-01-02T03:04:05+00:00")
    stored = record.to_dict()
    assert stored["runner"] == "replica-b" and stored["attemptStartedAt"] == "2026-01-02T03:04:05+00:00"
    assert StageRecord.from_dict(stored) == record
    assert "runner" not in StageRecord("eks").to_dict()  # a stage no attempt began stores what it always did
