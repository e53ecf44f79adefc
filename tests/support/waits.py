"""Condition waits for tests: polling operations through the REST API, or any condition (never a bare sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from tests.support.servers import Running

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def wait_terminal(client: httpx.Client, operation_id: str, timeout: float = 60.0) -> dict[str, Any]:
    """Poll operation_get until the operation ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/api/v1/operations/{operation_id}").json()
        if view["status"] in TERMINAL:
            return view
        time.sleep(0.05)
    raise TimeoutError(f"{operation_id} did not finish: {view}")


def wait_for(client: httpx.Client, operation_id: str, predicate: Any, timeout: float = 60.0) -> dict[str, Any]:
    """Poll until `predicate(view)` holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view: dict[str, Any] = client.get(f"/api/v1/operations/{operation_id}").json()
        if predicate(view):
            return view
        time.sleep(0.02)
    raise TimeoutError(f"{operation_id}: condition not reached: {view}")


def until(check: Callable[[], Any], what: str = "condition", timeout: float = 60.0, every: float = 0.05) -> Any:
    """Poll `check()` until it returns something truthy (returned); TimeoutError naming `what` otherwise.

    Use it instead of a sleep that gambles on timing: wait for the state the next step needs."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{what}: not reached within {timeout} s")
        time.sleep(every)


def probe_held_in_beta(running: Running, journal: Path, gate: Path) -> str:
    """Start a probe operation whose stage beta holds until `gate` exists; return its id once beta runs."""
    with running.client() as client:
        ref = client.post("/api/v1/test/probe", json={
            "journalDir": str(journal), "stageSeconds": 0.05,
            "behaviour": {"beta": {"holdUntilFileExists": str(gate)}},
        }).json()
        operation_id = str(ref["operationId"])
        wait_for(client, operation_id, lambda v: v["stages"][1]["status"] == "RUNNING", timeout=60)
    until(lambda: "beta" in (journal / "executions.log").read_text().split(), what="beta started")
    return operation_id
