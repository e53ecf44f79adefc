"""Two `instantstart serve` replicas on one PostgreSQL behind a round-robin balancer, on the twin: kill -9 the
replica driving a cluster_create mid-stage; the survivor takes the expired lease over and finishes it, the
interrupted stage never runs on both at once, the twin holds one VPC / EKS / HyperPod for the tag, and the
WebSocket feed and an MCP session through the balancer reconnect to the survivor and keep working."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from mcp import ClientSession
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from instantstart.twin_process import TwinProcess
from tests.integration.test_crash_resume import STAGES, count_for
from tests.support.balancer import Balancer, balancer
from tests.support.databases import new_database_url, require_pg
from tests.support.faces import mcp_http
from tests.support.servers import Running, free_port, process_server
from tests.support.twin import control_plane_env
from tests.support.waits import until, wait_terminal

LEASE_SECONDS = 2
KILL_IN = "dependencies"  # a long stage: helm installs and add-ons, several seconds on the twin


@pytest.fixture(autouse=True)
def postgres() -> str:
    """Skip (or fail under make test) before the twin starts when there is no PostgreSQL server."""
    return require_pg()


def port_of(running: Running) -> int:
    return int(running.url.rsplit(":", 1)[1])


def replica_env(twin: TwinProcess, token: str, name: str) -> dict[str, str]:
    """One replica's environment: the shared token (as a Secret would give it), its own worker id."""
    return {
        **control_plane_env(twin),
        "INSTANTSTART_API_TOKEN": token,
        "INSTANTSTART_WORKER_ID": name,
        "INSTANTSTART_LEASE_SECONDS": str(LEASE_SECONDS),
    }


@contextlib.contextmanager
def two_replicas(twin: TwinProcess, tmp_path: Path, db: str) -> Iterator[dict[str, tuple[Running, Any]]]:
    """Replicas a and b on one database, each with its own data directory; a migrates first, then b starts."""
    token = secrets.token_urlsafe(32)
    with contextlib.ExitStack() as stack:
        replicas: dict[str, tuple[Running, Any]] = {}
        for name in ("a", "b"):
            running, proc = stack.enter_context(
                process_server(tmp_path / f"data-{name}", db, port=free_port(),
                               extra_env=replica_env(twin, token, f"replica-{name}"), token=token))
            replicas[name] = (running, proc)
        yield replicas


class FeedWatcher:
    """The UI's live feed through the balancer: a WebSocket that reconnects when its replica goes away, keeping
    every operation event and the backend each connection landed on."""

    def __init__(self, lb: Balancer, token: str) -> None:
        self.lb, self.token = lb, token
        self.events: list[dict[str, Any]] = []
        self.backends: list[int | None] = []
        self.closed_by_peer = 0
        self._stop = threading.Event()
        self._connected = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        self._thread.start()
        until(self._connected.is_set, "the feed to connect", timeout=60)

    def _open(self) -> ClientConnection:
        ws = connect(self.lb.url.replace("http://", "ws://") + "/api/v1/ws",
                     additional_headers={"Authorization": f"Bearer {self.token}"}, open_timeout=30)
        host, port = ws.socket.getsockname()[:2]
        self.backends.append(self.lb.backend_of((host, port)))
        assert json.loads(ws.recv(timeout=30))["type"] == "hello"
        self._connected.set()
        return ws

    def _run(self) -> None:
        ws = self._open()
        while not self._stop.is_set():
            try:
                message = json.loads(ws.recv(timeout=0.2))
            except TimeoutError:
                continue
            except ConnectionClosed:
                if self._stop.is_set():
                    return
                self.closed_by_peer += 1
                ws = self._open()  # the balancer skips the dead replica
                continue
            if message.get("type") == "operation":
                self.events.append(message["operation"])
        ws.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def saw(self, operation_id: str, status: str) -> bool:
        return any(e["operationId"] == operation_id and e["status"] == status for e in list(self.events))


def lease_of(db: str, operation_id: str) -> tuple[str | None, datetime | None]:
    """The operation's lease owner and expiry, read from the shared database."""
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            row = conn.execute(sa.text("SELECT lease_owner, lease_expires_at FROM operations WHERE id = :id"),
                               {"id": operation_id}).one()
    finally:
        engine.dispose()
    expires = row[1]
    if isinstance(expires, datetime) and expires.tzinfo is None:
        expires = expires.replace(tzinfo=UTC)
    return row[0], expires


def operation_count(db: str, kind: str, target: str) -> int:
    engine = sa.create_engine(db)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text("SELECT count(*) FROM operations WHERE kind = :k AND target = :t"),
                                    {"k": kind, "t": target}).scalar_one())
    finally:
        engine.dispose()


async def operation_over(session: ClientSession, operation_id: str) -> dict[str, Any]:
    """operation_get over an MCP session."""
    result = await session.call_tool("operation_get", {"operationId": operation_id})
    assert not result.is_error, result.content
    view: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return view


@dataclass
class Kill:
    """What happened around the kill."""

    operation_id: str
    killed_in: str
    victim: str
    survivor: str
    killed_at: datetime
    dead_lease_expiry: datetime
    view: dict[str, Any]


def create_and_kill_owner(front: Running, replicas: dict[str, tuple[Running, Any]], db: str, tag: str) -> Kill:
    """Submit cluster_create through the balancer, kill -9 the replica holding its lease once KILL_IN (or a
    later stage) runs, and wait (through the balancer) for the survivor to finish it."""
    with front.client() as client:
        ref = client.post("/api/v1/clusters", json={
            "clusterTag": tag, "instanceType": "ml.g6.4xlarge", "instanceCount": 1, "availabilityZone": "us-west-2c"})
        assert ref.status_code == 202, ref.text
        operation_id = ref.json()["operationId"]

        def running_at_or_after_kill_stage() -> str | None:
            view = client.get(f"/api/v1/operations/{operation_id}").json()
            stage = next((s["name"] for s in view["stages"] if s["status"] == "RUNNING"), None)
            return stage if stage and STAGES.index(stage) >= STAGES.index(KILL_IN) else None

        killed_in = until(running_at_or_after_kill_stage, f"stage {KILL_IN} to run", timeout=120, every=0.01)
        owner, _ = lease_of(db, operation_id)
        assert owner in ("replica-a", "replica-b"), owner
        victim = owner.removeprefix("replica-")
        os.kill(replicas[victim][1].pid, signal.SIGKILL)
        replicas[victim][1].wait(timeout=10)
        killed_at = datetime.now(UTC)
        _, dead_lease_expiry = lease_of(db, operation_id)
        assert dead_lease_expiry is not None
        view = wait_terminal(client, operation_id, timeout=240)
    return Kill(operation_id, killed_in, victim, "b" if victim == "a" else "a", killed_at, dead_lease_expiry, view)


async def with_mcp_sessions(front: Running, lb: Balancer, kill: Any) -> tuple[Kill, list[set[int]]]:
    """Two MCP sessions through the balancer (one lands on each replica) kept open across `kill()` (run in a
    thread); each answers operation_get before and after. Returns the kill and each session's backends."""
    backends: list[set[int]] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions: list[ClientSession] = []
        for _ in range(2):
            seen = set(lb.routes)
            sessions.append(await stack.enter_async_context(mcp_http(front)))
            backends.append({port for peer, port in dict(lb.routes).items() if peer not in seen})
        for session in sessions:
            assert (await session.call_tool("operation_list", {})).is_error is False
        done: Kill = await asyncio.to_thread(kill)
        for session in sessions:  # the same sessions, now answered by the survivor
            assert (await operation_over(session, done.operation_id))["status"] == "SUCCEEDED"
    return done, backends


def test_kill_one_replica_mid_stage(twin: TwinProcess, tmp_path: Path) -> None:
    db = new_database_url("postgres", tmp_path)
    tag = "replicas"
    with two_replicas(twin, tmp_path, db) as replicas, balancer(
        [port_of(r) for r, _ in replicas.values()]
    ) as lb, contextlib.ExitStack() as stack:
        front = Running(lb.url, replicas["a"][0].token, tmp_path / "data-a", db)
        feeds = [FeedWatcher(lb, front.token) for _ in range(2)]
        for feed in feeds:
            feed.start()
            stack.callback(feed.stop)
        assert sorted(f.backends[0] or 0 for f in feeds) == sorted(lb.backends)  # one feed on each replica
        kill, mcp_backends = asyncio.run(
            with_mcp_sessions(front, lb, lambda: create_and_kill_owner(front, replicas, db, tag)))
        operation_id, view = kill.operation_id, kill.view
        until(lambda: all(f.saw(operation_id, "SUCCEEDED") for f in feeds), "the feeds to see the end", timeout=30)

    assert view["status"] == "SUCCEEDED", [(s["name"], s["status"], s["message"]) for s in view["stages"]]
    assert [s["status"] for s in view["stages"]] == ["SUCCEEDED"] * len(STAGES)
    interrupted = next(s for s in view["stages"] if s["name"] == kill.killed_in)
    assert interrupted["attempts"] == 2, interrupted  # run once by the victim, once by the survivor
    assert all(s["attempts"] == 1 for s in view["stages"] if s["name"] != kill.killed_in), view["stages"]
    # The survivor started its attempt only after the victim's lease had run out: never both at once.
    assert interrupted["runner"] == f"replica-{kill.survivor}", interrupted
    resumed_at = datetime.fromisoformat(interrupted["attemptStartedAt"])
    assert resumed_at >= kill.dead_lease_expiry, (resumed_at, kill.dead_lease_expiry)
    print(f"replicas: killed replica-{kill.victim} during {kill.killed_in}; replica-{kill.survivor} resumed it "
          f"{(resumed_at - kill.killed_at).total_seconds():.2f}s later (lease {LEASE_SECONDS}s) and finished it")
    assert tag in str(view["target"]) and operation_count(db, "cluster_create", view["target"]) == 1
    assert count_for(twin, tag) == (1, 1, 1)
    victim_port = port_of(replicas[kill.victim][0])
    # Each feed that was on the killed replica lost its socket and reconnected through the balancer.
    for feed in feeds:
        assert feed.closed_by_peer == (1 if feed.backends[0] == victim_port else 0), feed.backends
        assert feed.backends[-1] != victim_port
    # One MCP session had been talking to the killed replica, and kept working through the survivor.
    assert any(victim_port in ports for ports in mcp_backends), (mcp_backends, victim_port)
