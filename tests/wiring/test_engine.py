"""The operations engine through the REST API, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.support.servers import Running
from tests.support.waits import wait_for, wait_terminal


def _probe(client: httpx.Client, journal: Path, **extra: object) -> dict[str, object]:
    response = client.post("/api/v1/test/probe", json={"journalDir": str(journal), **extra})
    assert response.status_code == 202, response.text
    body: dict[str, object] = response.json()
    return body


def _executed(journal: Path) -> list[str]:
    """The stages the probe ran, one entry per execution, in the order they started."""
    return [line.split()[0] for line in (journal / "executions.log").read_text().splitlines() if line]


def test_stages_run_in_order_and_record_everything(server_any_db: Running, tmp_path: Path) -> None:
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j")
        assert set(ref) == {"operationId", "status", "statusTool", "pollAfterSeconds"}
        assert ref["status"] in ("PENDING", "RUNNING") and ref["statusTool"] == "operation_get"
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED"
    assert [s["name"] for s in view["stages"]] == ["alpha", "beta", "gamma", "delta"]
    for stage in view["stages"]:
        assert stage["status"] == "SUCCEEDED" and stage["attempts"] == 1
        assert stage["startedAt"] and stage["finishedAt"]
        assert stage["outputs"] == {"effect": f"effect-{stage['name']}"}
    assert view["result"]["alpha"] == {"effect": "effect-alpha"}
    lines = (tmp_path / "j" / "executions.log").read_text().split()
    assert lines[0::3] == ["alpha", "beta", "gamma", "delta"]


def test_temporary_errors_retry_with_backoff(server: Running, tmp_path: Path) -> None:
    with server.client() as client:
        ref = _probe(client, tmp_path / "j", behaviour={"beta": {"temporaryFailures": 2}})
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED"
    beta = view["stages"][1]
    assert beta["attempts"] == 3
    assert view["stages"][0]["attempts"] == 1


def test_retry_limit_then_operation_retry_reruns_only_the_failed_stage(server_any_db: Running, tmp_path: Path) -> None:
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j", behaviour={"gamma": {"temporaryFailures": 10}})
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED"
        assert view["error"]["code"] == "THROTTLED"
        assert "gave up after 4 attempts" in view["error"]["message"]
        assert [s["status"] for s in view["stages"]] == ["SUCCEEDED", "SUCCEEDED", "FAILED", "PENDING"]
        # The failed stage keeps failing: drop the fault by retrying with a journal that lets it pass.
        # (Its behaviour comes from the persisted params, so retry reuses them: 10 failures > 4 attempts.)
        again = client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        assert again.status_code == 202 and again.json()["operationId"] == ref["operationId"]
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED"
    executions = (tmp_path / "j" / "executions.log").read_text().split("\n")
    assert sum(1 for e in executions if e.startswith("alpha ")) == 1
    assert sum(1 for e in executions if e.startswith("beta ")) == 1
    assert sum(1 for e in executions if e.startswith("gamma ")) == 8


def test_permanent_error_then_retry_completes(server_any_db: Running, tmp_path: Path) -> None:
    flag = tmp_path / "refuse"
    flag.write_text("x")
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j", behaviour={"beta": {"failIfFileExists": str(flag)}})
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED"
        assert view["error"] == {
            "code": "PRECONDITION_FAILED",
            "message": f"beta refused: {flag} exists",
            "hint": "remove the file",
            "details": {"stage": "beta"},
        }
        assert view["stages"][1]["attempts"] == 1
        flag.unlink()
        client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED"
    assert _executed(tmp_path / "j") == ["alpha", "beta", "beta", "gamma", "delta"]


def test_independent_stages_continue_after_a_failure_and_retry_reruns_only_it(
    server_any_db: Running, tmp_path: Path
) -> None:
    flag = tmp_path / "refuse"
    flag.write_text("x")
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j", independent=True, behaviour={"beta": {"failIfFileExists": str(flag)}})
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED"
        assert [s["status"] for s in view["stages"]] == ["SUCCEEDED", "FAILED", "SUCCEEDED", "SUCCEEDED"]
        assert view["error"]["code"] == "PRECONDITION_FAILED"
        assert view["error"]["details"] == {"stage": "beta", "failedStages": ["beta"]}
        # The later stages ran knowing beta failed; the result holds every stage, the failed one as its error.
        assert view["stages"][2]["outputs"]["sawFailed"] == ["beta"]
        assert view["result"]["beta"]["error"]["message"] == f"beta refused: {flag} exists"
        assert view["result"]["delta"]["effect"] == "effect-delta"
        flag.unlink()
        client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED" and view["error"] is None
    assert _executed(tmp_path / "j") == ["alpha", "beta", "gamma", "delta", "beta"]


def _statuses(view: dict[str, object]) -> list[str]:
    return [str(s["status"]) for s in view["stages"]]  # type: ignore[attr-defined, index]


def test_a_stage_alongside_starts_once_the_one_before_waits(server_any_db: Running, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j", alongside=True, behaviour={"beta": {"holdUntilFileExists": str(gate)}})
        # beta holds in its wait; gamma, declared alongside it, runs to the end meanwhile; delta waits for both.
        view = wait_for(client, str(ref["operationId"]), lambda v: v["stages"][2]["status"] == "SUCCEEDED")
        assert _statuses(view) == ["SUCCEEDED", "RUNNING", "SUCCEEDED", "PENDING"] and view["status"] == "RUNNING"
        gate.touch()
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED" and _statuses(view) == ["SUCCEEDED"] * 4
    assert view["result"]["gamma"] == {"effect": "effect-gamma"}
    assert _executed(tmp_path / "j") == ["alpha", "beta", "gamma", "delta"]


def test_a_stage_busy_without_waiting_keeps_the_one_alongside_it_pending(server: Running, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with server.client() as client:
        ref = _probe(client, tmp_path / "j", alongside=True, behaviour={"beta": {"workUntilFileExists": str(gate)}})
        wait_for(client, str(ref["operationId"]), lambda v: v["stages"][1]["status"] == "RUNNING")
        gate.touch()
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED"
    beta, gamma = view["stages"][1], view["stages"][2]
    assert gamma["startedAt"] >= beta["finishedAt"]  # started when beta succeeded, not before


def test_a_failure_alongside_does_not_stop_the_other_and_retry_reruns_only_it(
    server_any_db: Running, tmp_path: Path
) -> None:
    gate, flag = tmp_path / "gate", tmp_path / "refuse"
    flag.write_text("x")
    behaviour = {"beta": {"holdUntilFileExists": str(gate)}, "gamma": {"failIfFileExists": str(flag)}}
    with server_any_db.client() as client:
        ref = _probe(client, tmp_path / "j", alongside=True, behaviour=behaviour)
        view = wait_for(client, str(ref["operationId"]), lambda v: v["stages"][2]["status"] == "FAILED")
        assert view["status"] == "RUNNING" and _statuses(view)[1] == "RUNNING"  # beta goes on
        gate.touch()
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED" and _statuses(view) == ["SUCCEEDED", "SUCCEEDED", "FAILED", "PENDING"]
        assert view["error"]["code"] == "PRECONDITION_FAILED"
        assert view["error"]["details"]["stage"] == "gamma"
        flag.unlink()
        assert client.post(f"/api/v1/operations/{ref['operationId']}/retry").status_code == 202
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED" and view["error"] is None
    assert _executed(tmp_path / "j") == ["alpha", "beta", "gamma", "gamma", "delta"]


def test_a_stage_that_fails_before_it_waits_leaves_the_one_alongside_pending(server: Running, tmp_path: Path) -> None:
    flag = tmp_path / "refuse"
    flag.write_text("x")
    with server.client() as client:
        ref = _probe(client, tmp_path / "j", alongside=True, behaviour={"beta": {"failIfFileExists": str(flag)}})
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "FAILED" and _statuses(view) == ["SUCCEEDED", "FAILED", "PENDING", "PENDING"]
        assert view["error"]["details"]["stage"] == "beta"
        flag.unlink()
        client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "SUCCEEDED"
    assert _executed(tmp_path / "j") == ["alpha", "beta", "beta", "gamma", "delta"]


def test_cancel_stops_the_stages_running_together(server: Running, tmp_path: Path) -> None:
    never = str(tmp_path / "never")
    behaviour = {"beta": {"holdUntilFileExists": never}, "gamma": {"holdUntilFileExists": never}}
    with server.client() as client:
        ref = _probe(client, tmp_path / "j", alongside=True, behaviour=behaviour)
        wait_for(client, str(ref["operationId"]), lambda v: _statuses(v)[1:3] == ["RUNNING", "RUNNING"])
        assert client.post(f"/api/v1/operations/{ref['operationId']}/cancel").status_code == 202
        view = wait_terminal(client, str(ref["operationId"]))
    assert view["status"] == "CANCELLED" and view["error"]["code"] == "CANCELLED"
    assert _statuses(view) == ["SUCCEEDED", "CANCELLED", "CANCELLED", "CANCELLED"]


def test_one_active_operation_per_target(server_any_db: Running, tmp_path: Path) -> None:
    with server_any_db.client() as client:
        first = _probe(client, tmp_path / "a", stageSeconds=0.5, target="busy")
        second = client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "b"), "target": "busy"})
        assert second.status_code == 409
        error = second.json()["error"]
        assert error["code"] == "CONFLICT"
        assert error["details"]["blockingOperationId"] == first["operationId"]
        assert first["operationId"] in error["message"]
        other = client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "c"), "target": "other"})
        assert other.status_code == 202
        wait_terminal(client, str(first["operationId"]))
        third = client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "d"), "target": "busy"})
        assert third.status_code == 202


def test_cancel_running_and_pending(server: Running, tmp_path: Path) -> None:
    with server.client() as client:
        ref = _probe(client, tmp_path / "j", stageSeconds=5, target="t1")
        wait_for(client, str(ref["operationId"]), lambda v: v["stages"][0]["status"] == "RUNNING")
        cancel = client.post(f"/api/v1/operations/{ref['operationId']}/cancel")
        assert cancel.status_code == 202
        view = wait_terminal(client, str(ref["operationId"]))
        assert view["status"] == "CANCELLED"
        assert view["stages"][0]["status"] == "CANCELLED"
        assert view["error"]["code"] == "CANCELLED"
        again = client.post(f"/api/v1/operations/{ref['operationId']}/cancel")
        assert again.status_code == 409
        retried = client.post(f"/api/v1/operations/{ref['operationId']}/retry")
        assert retried.status_code == 202
        # Cancelling again while it runs the long stage, then the target is free for others.
        wait_for(client, str(ref["operationId"]), lambda v: v["status"] == "RUNNING")
        client.post(f"/api/v1/operations/{ref['operationId']}/cancel")
        assert wait_terminal(client, str(ref["operationId"]))["status"] == "CANCELLED"
        assert _probe(client, tmp_path / "k", target="t1")["status"] == "PENDING"


def test_twenty_concurrent_identical_requests_create_one_operation(server_any_db: Running, tmp_path: Path) -> None:
    async def fire() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            base_url=server_any_db.url,
            timeout=60,
            headers={"Authorization": f"Bearer {server_any_db.token}", "Idempotency-Key": "same-key-1"},
        ) as client:
            body = {"journalDir": str(tmp_path / "j"), "target": "idem"}
            return list(await asyncio.gather(*(client.post("/api/v1/test/probe", json=body) for _ in range(20))))

    responses = asyncio.run(fire())
    assert [r.status_code for r in responses] == [202] * 20
    ids = {r.json()["operationId"] for r in responses}
    assert len(ids) == 1
    with server_any_db.client() as client:
        listing = client.get("/api/v1/operations", params={"kind": "probe"}).json()
        assert listing["total"] == 1
        # The same key as a clientToken in the body is the same operation too.
        again = client.post(
            "/api/v1/test/probe",
            json={"journalDir": str(tmp_path / "j"), "target": "idem", "clientToken": "same-key-1"},
        )
        assert again.json()["operationId"] in ids
        wait_terminal(client, ids.pop())


def test_operation_list_filters_and_pages(server: Running, tmp_path: Path) -> None:
    with server.client() as client:
        ids = [str(_probe(client, tmp_path / f"j{i}", target=f"t{i}")["operationId"]) for i in range(3)]
        for operation_id in ids:
            wait_terminal(client, operation_id)
        page = client.get("/api/v1/operations", params={"limit": 2}).json()
        assert page["total"] == 3 and len(page["operations"]) == 2 and page["nextOffset"] == 2
        rest = client.get("/api/v1/operations", params={"limit": 2, "offset": 2}).json()
        assert len(rest["operations"]) == 1 and rest["nextOffset"] is None
        assert {o["operationId"] for o in page["operations"] + rest["operations"]} == set(ids)
        by_target = client.get("/api/v1/operations", params={"target": "t1"}).json()
        assert [o["operationId"] for o in by_target["operations"]] == [ids[1]]
        assert client.get("/api/v1/operations", params={"status": "FAILED"}).json()["total"] == 0
        assert client.get("/api/v1/operations", params={"status": "BOGUS"}).status_code == 422
        missing = client.get("/api/v1/operations/op-0123456789")
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"


def _store_as_older_version(database_url: str, target: str, params: dict[str, object]) -> str:
    """Record a probe operation the way an older version would have: its params bypass today's model."""
    from instantstart.operations.kinds import KINDS, OpenParams, OperationKind
    from instantstart.operations.store import OperationStore
    from instantstart.store.db import Database
    from tests.support import probe_ops  # noqa: F401  (registers the probe kind in this process)

    current = KINDS.get("probe")
    assert current is not None
    legacy = OperationKind(name="probe", stages=current.stages, params=OpenParams)
    db = Database(database_url)
    try:
        view, created = OperationStore(db).submit(legacy, params, target, None)
    finally:
        db.dispose()
    assert created
    return view.operation_id


def test_stored_params_from_an_older_version_load_or_fail_clearly(server: Running, tmp_path: Path) -> None:
    # Today's model refuses a params shape it does not know at submit time (nothing is recorded) …
    with server.client() as client:
        refused = client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "j"), "stageSeconds": -1})
        assert refused.status_code == 422
    # … an older shape that still fits (a field added since has a default) loads and runs …
    (tmp_path / "old").mkdir()
    older = _store_as_older_version(server.database_url, "old", {"journalDir": str(tmp_path / "old")})
    # … and one that does not (a field this version no longer knows) fails at once with a clear error.
    gone = _store_as_older_version(server.database_url, "gone", {"journalDir": str(tmp_path / "gone"), "retired": 1})
    with server.client() as client:
        client.post("/api/v1/test/probe", json={"journalDir": str(tmp_path / "wake")})  # wakes the runner
        assert wait_terminal(client, older)["status"] == "SUCCEEDED"
        view = wait_terminal(client, gone)
    assert view["status"] == "FAILED" and view["error"]["code"] == "INVALID_INPUT"
    assert "recorded by a version of InstantStart" in view["error"]["message"]
    assert "retired" in view["error"]["message"] and "start the same request again" in view["error"]["hint"]
    assert all(s["attempts"] == 0 for s in view["stages"])
    assert not (tmp_path / "gone" / "executions.log").exists()
