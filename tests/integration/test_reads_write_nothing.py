"""Every read-only operation, called on a twin cluster, writes nothing: no database statement that changes a row
runs on its behalf, the twin (AWS and Kubernetes) sees no write, and cluster_timeline starts no watch (the
cluster registry started the cluster's events feed when the cluster became known)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from instantstart.catalog import CATALOG
from instantstart.catalog.registry import READ_ONLY, OperationSpec
from instantstart.catalog.routes import API_PREFIX
from instantstart.logs import request_id_var
from instantstart.readonly import WRITE_SQL
from instantstart.services import load_all
from instantstart.services.base.watch.state import informer_key
from instantstart.twin_process import TwinProcess
from tests.support.flows import make_hyperpod
from tests.support.servers import Running

load_all()
TAG = "ro1"
MUST_ANSWER = ("cluster_timeline", "cluster_events", "cluster_get_status", "node_list", "cluster_list_all")


@pytest.fixture
def db_writes() -> Iterator[list[tuple[str | None, str]]]:
    """(request id, statement) of every row-changing SQL statement this process runs while the test does."""
    seen: list[tuple[str | None, str]] = []
    lock = threading.Lock()

    def record(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        if WRITE_SQL.match(statement):
            with lock:
                seen.append((request_id_var.get(None), statement.split("\n", 1)[0][:120]))

    event.listen(Engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(Engine, "before_cursor_execute", record)


def reads() -> list[OperationSpec]:
    """The control plane's read-only operations (the test plugins' probes left out), the wait primitive too."""
    return [s for s in CATALOG if s.behaviour == READ_ONLY and s.handler.__module__.startswith("instantstart.")]


def call(client: httpx.Client, spec: OperationSpec, request_id: str) -> httpx.Response:
    """The read through REST with its catalog example (on this test's cluster), tagged with `request_id`."""
    args = {**spec.example, **({"clusterTag": TAG} if "clusterTag" in spec.example else {})}
    path = spec.path
    for param in spec.path_params:
        path = path.replace("{" + param + "}", str(args.pop(param)))
    headers = {"x-request-id": request_id}
    if spec.method == "GET":
        return client.get(API_PREFIX + path, params=args, headers=headers)
    return client.request(spec.method, API_PREFIX + path, json=args, headers=headers)


def test_every_read_writes_nothing_and_the_timeline_starts_no_watch(
    cp: Running, twin: TwinProcess, db_writes: list[tuple[str | None, str]]
) -> None:
    with cp.client() as client:
        make_hyperpod(client, TAG)
        app = cp.context
        row = client.get("/api/v1/clusters").json()["clusters"][0]
        events = app.informers.peek(informer_key(row["region"], row["eksClusterName"], "events"))
        # The registry started the events feed when the cluster became known, pinned: no read keeps it alive.
        assert events is not None and events.idle_seconds is None
        before = set(app.informers.running)
        timeline = call(client, CATALOG.get("cluster_timeline"), "guard-first-timeline")  # type: ignore[arg-type]
        assert timeline.status_code == 200 and timeline.json()["unavailable"] == [], timeline.text
        assert set(app.informers.running) == before  # the read started no watch

        httpx.delete(twin.endpoint_url + "/_twin/writes").raise_for_status()
        answers: dict[str, int] = {}
        for spec in reads():
            if spec.name == "wait_seconds":
                continue  # sleeps, touches nothing
            answers[spec.name] = call(client, spec, f"guard-{spec.name}").status_code
        twin_writes = httpx.get(twin.endpoint_url + "/_twin/writes").json()["writes"]

    assert twin_writes == {}, twin_writes
    ours = [(rid, sql) for rid, sql in db_writes if rid and rid.startswith("guard-")]
    assert ours == [], ours
    assert all(code < 500 for code in answers.values()), answers
    assert all(answers[name] == 200 for name in MUST_ANSWER if name != "cluster_timeline"), answers
    assert len(answers) >= 30, sorted(answers)
