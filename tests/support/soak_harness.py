"""The chaos soak's harness: one control plane process on the twin, the calls the soak makes over REST and MCP
(each answer recorded), twin faults, kill -9, and the invariant checks (tests/support/soak.py drives it)."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from instantstart.twin_process import TwinProcess
from tests.support.crash import ControlPlane
from tests.support.faces import mcp_http
from tests.support.servers import SSL_CONTEXT
from tests.support.twin import reset_twin

ACTIVE = ("PENDING", "RUNNING")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


class Violation(AssertionError):
    """An invariant the soak found broken (hypothesis shrinks the sequence that led to it)."""


@dataclass
class Profile:
    """How big a soak run is: clusters alive at once, whether full cluster_create is among the creates, kills per
    example, and the wall seconds an operation may stay active (across kills) before it counts as stuck."""

    max_clusters: int = 1
    full_create: bool = False
    max_kills: int = 2
    op_deadline: float = 240.0


@dataclass
class Stats:
    """Figures the long run prints (summed over every example hypothesis ran, shrinking included)."""

    examples: int = 0
    steps: int = 0
    operations: int = 0
    faults: int = 0
    kills: int = 0
    checks: int = 0
    violations: int = 0
    verbose: bool = False  # print each violation as it is found (the long run; shrinking finds it again and again)
    by_kind: dict[str, int] = field(default_factory=dict)
    # Every failing sequence as it ran (kill timing makes a shrunk replay flaky: the bench saves the shortest).
    failures: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)

    def line(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items()))
        return (f"examples {self.examples}, steps {self.steps}, operations {self.operations} ({kinds}), "
                f"faults {self.faults}, kills {self.kills}, invariant checks {self.checks}, "
                f"violations {self.violations}")


STATS = Stats()


@dataclass
class Submitted:
    """An operation the soak started: its kind, the face it came through, when (monotonic seconds)."""

    kind: str
    face: str
    at: float


class Harness:
    """A fresh twin account and a control plane process on a fresh SQLite database, and what the soak did to
    them: operations submitted, idempotency keys sent, clusters created and deleted, secrets sent."""

    def __init__(self, twin: TwinProcess, root: Path, profile: Profile) -> None:
        reset_twin(twin)
        self.twin, self.profile = twin, profile
        self.dir = Path(tempfile.mkdtemp(prefix="soak-", dir=root))
        self.database_url = f"sqlite:///{self.dir / 'state.db'}"
        self.cp = ControlPlane(twin, self.dir / "data", self.database_url)
        self.running = self.cp.start()
        self.secrets = {twin.env["AWS_SECRET_ACCESS_KEY"], self.running.token}
        self.unscanned: list[str] = []
        self.log_offset: dict[Path, int] = {}
        self.submitted: dict[str, Submitted] = {}
        self.keys: dict[str, set[str]] = {}
        self.clusters: dict[str, dict[str, str | None]] = {}  # tag -> {"create": op id, "delete": op id}
        self.blocked: set[str] = set()
        self.serial = 0
        self.steps: list[dict[str, Any]] = []  # the machine's step log (its rule calls so far)

    # -- calls ---------------------------------------------------------------------------------------------------

    def rest(self, method: str, path: str, body: dict[str, Any] | None = None,
             key: str | None = None, params: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
        """One REST call; its status and JSON body (both recorded and checked)."""
        headers = {"Idempotency-Key": key} if key else {}
        with self.running.client() as client:
            response = client.request(method, "/api/v1" + path, json=body, headers=headers, params=params)
        payload: dict[str, Any] = response.json() if response.content else {}
        self._answer(f"REST {method} {path}", response.status_code, response.text, payload)
        return response.status_code, payload

    def mcp(self, tool: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """One MCP tool call over streamable HTTP; a status (200, or the error's HTTP-like class) and payload."""

        async def call() -> Any:
            async with mcp_http(self.running) as session:
                return await session.call_tool(tool, args)

        result = asyncio.run(call())
        text = result.content[0].text
        payload: dict[str, Any] = json.loads(text)
        status = 200
        if result.is_error:
            code = str(payload.get("error", {}).get("code", ""))
            status = 500 if code in ("INTERNAL", "") else 400
        self._answer(f"MCP {tool}", status, text, payload)
        return status, payload

    def _answer(self, what: str, status: int, text: str, payload: dict[str, Any]) -> None:
        self.unscanned.append(text)
        if status >= 500:
            self.fail(f"{what} answered {status}: {text[:500]}")
        if status >= 400:
            error = payload.get("error") or {}
            if not error.get("code") or not error.get("hint"):
                self.fail(f"{what} refused without a code and a hint: {text[:500]}")

    def submit(self, kind: str, face: str, tool: str, method: str, path: str, body: dict[str, Any],
               key: str | None) -> str | None:
        """Start an operation through `face` (rest: its resource route; mcp: the tool); its id, if one started."""
        if face == "mcp":
            status, payload = self.mcp(tool, {**body, **({"clientToken": key} if key else {})})
        else:
            for name, value in body.items():
                path = path.replace("{" + name + "}", str(value))
            rest_body = {k: v for k, v in body.items() if "{" + k + "}" not in path}
            status, payload = self.rest(method, path, rest_body, key)
        operation_id = payload.get("operationId") if status < 400 else None
        if operation_id:
            if operation_id not in self.submitted:
                self.submitted[operation_id] = Submitted(kind, face, time.monotonic())
            if key:
                self.keys.setdefault(key, set()).add(operation_id)
            STATS.operations += 1
            STATS.by_kind[kind] = STATS.by_kind.get(kind, 0) + 1
        return str(operation_id) if operation_id else None

    def new_key(self) -> str:
        self.serial += 1
        return f"soak-{self.dir.name}-{self.serial}"

    # -- twin ----------------------------------------------------------------------------------------------------

    def twin_post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        response = httpx.post(self.twin.endpoint_url + path, json=body, timeout=30, verify=SSL_CONTEXT)
        return response

    def heal(self) -> None:
        """Every scripted fault cleared and every blocked Kubernetes API server open again."""
        httpx.delete(self.twin.endpoint_url + "/_twin/faults", timeout=30, verify=SSL_CONTEXT).raise_for_status()
        for name in sorted(self.blocked):
            self.twin_post(f"/_twin/kube/{name}/api/block", {"blocked": False})
        self.blocked.clear()

    def kill_and_restart(self) -> None:
        self.cp.kill_9()
        self.running = self.cp.start()

    # -- reads ---------------------------------------------------------------------------------------------------

    def operations(self) -> list[dict[str, Any]]:
        """Every operation the control plane holds (all pages)."""
        found: list[dict[str, Any]] = []
        while True:
            _, page = self.rest("GET", "/operations", params={"limit": 500, "offset": len(found)})
            found += page["operations"]
            if page.get("nextOffset") is None or not page["operations"]:
                return found

    def view(self, operation_id: str) -> dict[str, Any]:
        _, view = self.rest("GET", f"/operations/{operation_id}")
        return view

    def close(self) -> None:
        self.cp.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def fail(self, message: str) -> None:
        STATS.violations += 1
        STATS.failures.append((message, list(self.steps)))
        if STATS.verbose:
            print(f"  violation in example {STATS.examples}: {message[:600]}", flush=True)
        raise Violation(message)

    def new_log_text(self) -> str:
        """What the control plane's logs gained since the last call."""
        text: list[str] = []
        for log in sorted((self.dir / "data").glob("server-*.log")):
            with open(log, "rb") as handle:
                handle.seek(self.log_offset.get(log, 0))
                chunk = handle.read()
            self.log_offset[log] = self.log_offset.get(log, 0) + len(chunk)
            # The one line a first start prints on its terminal (stdout, never the log pipeline) shows the token
            # it just created, by design (api/app.py); everything else must not.
            text += [line for line in chunk.decode("utf-8", "replace").splitlines(keepends=True)
                     if not line.startswith("API token created in ")]
        return "".join(text)
