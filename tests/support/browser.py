"""Browser tests: `instantstart serve --twin` as a subprocess, Chromium driven by Playwright (fixtures, helpers)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.servers import CHILD_PYTHONPATH, REPO, SSL_CONTEXT, free_port, wait_healthy

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
ARTIFACTS = REPO / "test-artifacts" / "web"
AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
AXE_TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# Twin seconds per real second: the six stages of cluster_create finish in well under a minute.
CLOCK_SCALE = 500.0


@dataclass
class Served:
    """A running `instantstart serve --twin`: its URL, API token and the twin's control endpoint."""

    url: str
    token: str
    twin_url: str

    def api(self) -> httpx.Client:
        """A bearer-authenticated client (the test's independent view of the API)."""
        headers = {"Authorization": f"Bearer {self.token}"}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, verify=SSL_CONTEXT)

    def aws(self, service: str, region: str = "us-west-2") -> Any:
        """A boto3 client on the served twin (the test's own view of what the control plane did there)."""
        import boto3

        from hyperpod_twin.twin import ACCESS_KEY_ID, SECRET_ACCESS_KEY

        return boto3.client(service, endpoint_url=self.twin_url, region_name=region,
                            aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=SECRET_ACCESS_KEY)

    @contextmanager
    def kube_api(self, data_dir: Path) -> Iterator[Any]:
        """A Kubernetes ApiClient for the active cluster, made the way the control plane makes it (EKS token from
        the twin's credentials, set only for the block); `data_dir` is the test's scratch directory."""
        from hyperpod_twin.twin import ACCESS_KEY_ID, SECRET_ACCESS_KEY
        from instantstart.aws.clients import AwsClients
        from instantstart.kube.client import KubeClients
        from instantstart.settings import Settings

        with self.api() as api:
            active = next(c for c in api.get("/api/v1/clusters").json()["clusters"] if c["active"])
        with pytest.MonkeyPatch.context() as env:
            env.setenv("AWS_ACCESS_KEY_ID", ACCESS_KEY_ID)
            env.setenv("AWS_SECRET_ACCESS_KEY", SECRET_ACCESS_KEY)
            settings = Settings(data_dir=data_dir, aws_endpoint_url=self.twin_url, aws_region=active["region"])
            yield KubeClients(AwsClients(settings)).api_client(active["eksClusterName"], active["region"])


def _twin_endpoint(log: Path, deadline: float) -> str:
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if "digital twin started" in line:
                endpoint: str = json.loads(line)["endpoint"]
                return endpoint
        time.sleep(0.1)
    raise TimeoutError("serve --twin did not report its twin endpoint")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """`instantstart serve --twin` on a free port with its own data dir and SQLite database."""
    data = tmp_path_factory.mktemp("web-data")
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": CHILD_PYTHONPATH,
        "INSTANTSTART_DATA_DIR": str(data),
        "INSTANTSTART_DATABASE_URL": f"sqlite:///{data / 'state.db'}",
        "INSTANTSTART_POLL_SECONDS": "0.2",
        "INSTANTSTART_STATUS_CACHE_SECONDS": "1",
        "INSTANTSTART_ALERT_INTERVAL_SECONDS": "5",  # the alerts bell shows what the evaluator opens within seconds
        "INSTANTSTART_LOG_JSON": "true",
        "INSTANTSTART_LOG_LEVEL": "INFO",
    }
    env.pop("INSTANTSTART_AWS_ENDPOINT_URL", None)
    log = data / "serve.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "instantstart.cli.main", "serve", "--twin", "--port", str(port)],
            env=env,
            cwd=REPO,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, timeout=90, proc=proc)  # type: ignore[arg-type]
        twin_url = _twin_endpoint(log, time.monotonic() + 10)
        scaled = httpx.post(twin_url + "/_twin/clock", json={"scale": CLOCK_SCALE}, timeout=10, verify=SSL_CONTEXT)
        scaled.raise_for_status()
        yield Served(url=url, token=(data / "api-token").read_text().strip(), twin_url=twin_url)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_op(served: Served, operation_id: str, timeout: float = 240.0) -> dict[str, Any]:
    """An operation's view once terminal (or at the timeout), read through the API (the test's own view)."""
    deadline = time.monotonic() + timeout
    with served.api() as api:
        while True:
            op: dict[str, Any] = api.get(f"/api/v1/operations/{operation_id}").json()
            if op["status"] in ("SUCCEEDED", "FAILED", "CANCELLED") or time.monotonic() > deadline:
                return op
            time.sleep(0.5)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's Chromium (no browser download): headless, sandbox off (root in a container)."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "Debian's chromium is missing: `make pytest` installs it (apt-get install chromium)"
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="module")
def page(browser: Any, served: Served) -> Iterator[Any]:
    """One browser tab at 1280x800 for the whole module (the tests are steps of one session)."""
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.set_default_timeout(20_000)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda exc: errors.append(str(exc)))
    tab.page_errors = errors
    try:
        yield tab
    finally:
        context.close()


def shot(page: Any, name: str) -> Path:
    """Save a full-page screenshot under test-artifacts/web/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def _load_axe(page: Any) -> None:
    """Put axe-core into the page. The page's CSP forbids inline scripts, so a <script> tag carrying the source
    would be refused; the source is evaluated through the DevTools protocol instead (CSP does not apply there)."""
    if page.evaluate("() => typeof window.axe === 'object'"):
        return
    assert AXE.exists(), f"{AXE} is missing: `make axe` (or `make pytest`) installs the pinned axe-core with npm ci"
    page.evaluate(AXE.read_text() + "\n;undefined")


def format_violations(violations: list[dict[str, Any]]) -> str:
    """One block per violated rule: id, impact, help, and each offending node's selector and failure summary."""
    lines = []
    for v in violations:
        lines.append(f"- {v['id']} ({v.get('impact')}): {v['help']} [{v.get('helpUrl', '')}]")
        for node in v["nodes"]:
            summary = " ".join((node.get("failureSummary") or "").split())
            lines.append(f"    {', '.join(map(str, node['target']))}: {summary}")
            lines.append(f"      {node.get('html', '')[:200]}")
    return "\n".join(lines)


def audit(page: Any, name: str) -> None:
    """axe-core with the WCAG 2.0/2.1 A and AA rules on the page as it is now; fails listing every violation."""
    _load_axe(page)
    results = page.evaluate(
        "async (tags) => await axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: ['violations']})",
        AXE_TAGS,
    )
    violations = results["violations"]
    assert not violations, f"axe-core ({', '.join(AXE_TAGS)}) on {name}:\n{format_violations(violations)}"
