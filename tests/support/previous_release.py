"""A database as the previous release (schema revision 0003) left it, with a probe operation mid-stage."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import update

from instantstart.store.db import MIGRATIONS, Database
from instantstart.store.models import OperationRow

# The last released schema: the revision before this release's head (no tags yet; see `git log -- store/migrations`).
PREVIOUS_REVISION = "0003"
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / f"previous_release_{PREVIOUS_REVISION}.sqlite"
OPERATION_ID = "op-0003aa0000000000000001"
_AT = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def _stage(name: str, status: str, attempts: int) -> dict[str, object]:
    done = status == "SUCCEEDED"
    return {"name": name, "status": status, "attempts": attempts,
            "startedAt": _AT.isoformat() if attempts else None, "finishedAt": _AT.isoformat() if done else None,
            "message": f"{name} working (attempt 1)" if attempts else "",
            "outputs": {"effect": f"effect-{name}"} if done else {}}


def write_previous_release(url: str) -> None:
    """Migrate the empty database at `url` to PREVIOUS_REVISION only and record a probe operation the previous
    release's worker was running when it stopped: alpha done, beta RUNNING, its lease long expired."""
    db = Database(url)
    try:
        config = Config()
        config.set_main_option("script_location", str(MIGRATIONS))
        with db.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, PREVIOUS_REVISION)
            connection.execute(OperationRow.__table__.insert().values(
                id=OPERATION_ID, kind="probe", target="probe-target",
                params={"journalDir": "/nonexistent/journal", "target": "probe-target", "stageSeconds": 0.05,
                        "behaviour": {}},
                idempotency_key=None, status="RUNNING",
                stages=[_stage("alpha", "SUCCEEDED", 1), _stage("beta", "RUNNING", 1), _stage("gamma", "PENDING", 0),
                        _stage("delta", "PENDING", 0)],
                error=None, result=None, active_target="probe-target", cancel_requested=False,
                created_at=_AT, updated_at=_AT, started_at=_AT, finished_at=None,
                lease_owner="previous-release-worker", lease_token="0" * 32, lease_expires_at=_AT,
            ))
    finally:
        db.dispose()


def point_journal(url: str, journal: Path) -> None:
    """Point the fixture operation's journal (where the probe stages write) at `journal`; alpha's effect, made
    before the previous release stopped, is put there too."""
    journal.mkdir(parents=True, exist_ok=True)
    (journal / "effect-alpha").write_text(OPERATION_ID)
    db = Database(url)
    try:
        with db.engine.begin() as connection:
            params = {"journalDir": str(journal), "target": "probe-target", "stageSeconds": 0.05, "behaviour": {}}
            connection.execute(update(OperationRow).where(OperationRow.id == OPERATION_ID).values(params=params))
    finally:
        db.dispose()
