"""A stage record is typed and immutable, and reads and writes the stored stage JSON unchanged (existing databases)."""

from __future__ import annotations

import dataclasses

import pytest

from instantstart.operations.models import OpStatus, StageView
from instantstart.operations.stage_record import StageRecord

STORED = {
    "name": "eks",
    "status": "FAILED",
    "attempts": 3,
    "startedAt": "2026-01-02T03:04:05+00:00",
    "finishedAt": "2026-01-02T03:14:05+00:00",
    "message": "gave up",
    "outputs": {"error": {"code": "TIMEOUT", "message": "gave up", "details": {"stage": "eks"}}},
}


def test_a_stored_stage_reads_typed_and_writes_back_unchanged() -> None:
    record = StageRecord.from_dict(STORED)
    assert record.status is OpStatus.FAILED and record.attempts == 3 and record.started_at == STORED["startedAt"]
    assert record.error == STORED["outputs"]["error"]  # type: ignore[index]
    assert record.to_dict() == STORED
    assert StageView.model_validate(record.to_dict()).status is OpStatus.FAILED
    older = {**STORED, "note": "a key this version does not know"}
    assert StageRecord.from_dict(older).to_dict() == older


def test_a_fresh_stage_is_the_stored_pending_shape() -> None:
    assert StageRecord("vpc").to_dict() == {
        "name": "vpc", "status": "PENDING", "attempts": 0, "startedAt": None, "finishedAt": None, "message": "",
        "outputs": {},
    }
    assert StageRecord("vpc").error == {}


def test_a_change_is_a_new_record_and_the_old_one_is_unchanged() -> None:
    before = StageRecord.from_dict(STORED)
    picture = before.to_dict()
    after = before.replace(status=OpStatus.RUNNING, attempts=4, finished_at=None)
    assert after.status is OpStatus.RUNNING and after.attempts == 4 and after.finished_at is None
    assert before.to_dict() == picture == STORED
    with pytest.raises(dataclasses.FrozenInstanceError):
        before.message = "changed in place"  # type: ignore[misc]
