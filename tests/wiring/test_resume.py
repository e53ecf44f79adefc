"""Crash and resume: kill -9 the server mid-operation, start it again, the operation completes once."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.support.servers import Running, process_server, thread_server
from tests.support.waits import probe_held_in_beta, wait_terminal


def test_kill_9_mid_operation_resumes_with_each_side_effect_once(tmp_path: Path, database_url: str) -> None:
    data = tmp_path / "data"
    journal = tmp_path / "journal"
    gate = tmp_path / "open-the-gate"  # beta holds until this exists: the kill lands mid-stage however slow
    with process_server(data, database_url) as (running, proc):
        operation_id = probe_held_in_beta(running, journal, gate)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    gate.touch()
    with process_server(data, database_url) as (restarted, _proc), restarted.client() as client:
        view = wait_terminal(client, operation_id, timeout=60)
    assert view["status"] == "SUCCEEDED", view
    # Side effects exist exactly once (they are created with O_EXCL: a duplicate would have failed the stage).
    assert sorted(p.name for p in journal.glob("effect-*")) == [
        f"effect-{s}" for s in ("alpha", "beta", "delta", "gamma")
    ]
    executions = [line.split() for line in (journal / "executions.log").read_text().splitlines()]
    by_stage = {name: [e for e in executions if e[0] == name] for name in ("alpha", "beta", "gamma", "delta")}
    assert len(by_stage["alpha"]) == 1, "a stage that succeeded is never rerun"
    assert len(by_stage["beta"]) == 2, "the interrupted stage ran again after the restart"
    assert by_stage["beta"][0][2] != by_stage["beta"][1][2], "by a different process"
    assert len(by_stage["gamma"]) == 1 and len(by_stage["delta"]) == 1
    assert view["stages"][1]["attempts"] == 2


def test_two_servers_on_one_database_never_drive_the_same_operation(tmp_path: Path, database_url: str) -> None:
    with thread_server(tmp_path / "a", database_url) as first, thread_server(tmp_path / "b", database_url) as second:
        runs: list[tuple[Running, str]] = []
        for i in range(6):
            running = first if i % 2 == 0 else second
            with running.client() as client:
                ref = client.post(
                    "/api/v1/test/probe",
                    json={"journalDir": str(tmp_path / f"j{i}"), "target": f"t{i}", "stageSeconds": 0.2},
                ).json()
                runs.append((running, ref["operationId"]))
        for running, operation_id in runs:
            with running.client() as client:
                assert wait_terminal(client, operation_id)["status"] == "SUCCEEDED"
    for i in range(6):
        executions = (tmp_path / f"j{i}" / "executions.log").read_text().splitlines()
        assert [e.split()[0] for e in executions] == ["alpha", "beta", "gamma", "delta"]
