"""A caller's Secret is kept out of what its own call records (params refused naming the field, outputs scrubbed)
and out of every log line, while the same text in another call is that call's data; server secrets stay out of
every row."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from sqlalchemy import text

from instantstart import logs
from instantstart.errors import InternalError, InvalidInput
from instantstart.logs import TextFormatter, carry_secrets, register_secret, register_server_secret, release_secrets
from instantstart.operations.kinds import OperationKind, StageSpec
from instantstart.operations.store import OperationStore
from instantstart.store.db import Database


async def _noop(_stage: object) -> dict[str, object]:
    return {}


KIND = OperationKind(name="scope_probe", stages=(StageSpec("one", _noop),))


@pytest.fixture(autouse=True)
def own_registries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The secrets these tests register go with them (the registries are process-wide)."""
    monkeypatch.setattr(logs, "_SECRETS", dict(logs._SECRETS))
    monkeypatch.setattr(logs, "_SERVER_SECRETS", dict(logs._SERVER_SECRETS))


def _store(tmp_path: Path) -> OperationStore:
    db = Database(f"sqlite:///{tmp_path / 'state.db'}")
    db.migrate()
    return OperationStore(db)


def _dump(store: OperationStore) -> str:
    with store.db.session() as session:
        rows = session.execute(text("SELECT params, stages, error, result FROM operations")).all()
    return repr(rows)


def test_a_secret_equal_to_ordinary_text_poisons_only_its_own_call(tmp_path: Path) -> None:
    store = _store(tmp_path)
    scope = carry_secrets([("hfToken", "us-west-2")])
    try:
        # The carrying call's params hold the same text in the clear: refused, naming the Secret field.
        with pytest.raises(InvalidInput) as refused:
            store.submit(KIND, {"region": "us-west-2"}, "probe:a", None)
        assert "hfToken" in refused.value.message and refused.value.details["fields"][0]["field"] == "hfToken"
        # A call of the same scope whose params do not hold it records; its outputs are scrubbed of it.
        mine, _ = store.submit(KIND, {"region": "eu-west-1"}, "probe:b", None)
    finally:
        release_secrets(scope)
    # Another call (no Secret field) with that Region records, and its outputs keep the Region.
    other, created = store.submit(KIND, {"region": "us-west-2"}, "probe:c", None)
    assert created
    for view in (mine, other):
        token = store.claim(view.operation_id, "me", 60)
        assert token is not None
        arn = "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc"
        assert store.save_leased(view.operation_id, token, result={"arn": arn})
    assert store.get(other.operation_id).result == {"arn": "arn:aws:sagemaker:us-west-2:123456789012:cluster/abc"}
    assert store.get(mine.operation_id).result == {"arn": "arn:aws:sagemaker:***:123456789012:cluster/abc"}
    # Logs redact every carried secret, whatever call logs it.
    record = logging.makeLogRecord({"msg": "creating in us-west-2", "levelname": "INFO", "name": "t"})
    assert "us-west-2" not in TextFormatter("%(message)s").format(record)


def test_a_secret_a_service_registers_is_scoped_to_its_call(tmp_path: Path) -> None:
    store = _store(tmp_path)
    scope = carry_secrets([])
    try:
        register_secret("team-a-bucket")  # e.g. an API key the service function reads from its request
        with pytest.raises(InvalidInput):
            store.submit(KIND, {"bucket": "team-a-bucket"}, "probe:f", None)
    finally:
        release_secrets(scope)
    _view, created = store.submit(KIND, {"bucket": "team-a-bucket"}, "probe:g", None)
    assert created


def test_a_server_secret_stays_out_of_every_row(tmp_path: Path) -> None:
    store = _store(tmp_path)
    register_server_secret("server-api-token-0123456789")
    with pytest.raises(InternalError):
        store.submit(KIND, {"header": "server-api-token-0123456789"}, "probe:d", None)
    view, _ = store.submit(KIND, {}, "probe:e", None)
    token = store.claim(view.operation_id, "me", 60)
    assert token is not None
    error = {"code": "INTERNAL", "message": "echo server-api-token-0123456789"}
    assert store.save_leased(view.operation_id, token, error=error)
    stored = store.get(view.operation_id).error
    assert stored is not None and stored.message == "echo ***"
    assert "server-api-token-0123456789" not in _dump(store)
