"""The Usage page in a real browser against `instantstart serve --twin`: a team's pod that held a GPU shows in the
per-team and per-user tables and the GPU-hours chart (with its summary as text alternative), the rows download as
CSV, a period that ends before it starts is refused beside the field, and axe-core finds no WCAG 2.0/2.1 A or AA
violation."""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from playwright.sync_api import expect

from tests.support.browser import CLOCK_SCALE, Served, audit, shot
from tests.support.flows import make_hyperpod
from tests.support.waits import until

pytestmark = pytest.mark.e2e

NAMESPACE = "hyperpod-ns-vision"
RUN_SECONDS = 1800  # twin seconds: 1 GPU for half an hour


def local(moment: datetime) -> str:
    """A datetime-local input's value (the browser's zone is the test process's)."""
    return moment.astimezone().strftime("%Y-%m-%dT%H:%M")


def test_the_usage_page_shows_a_teams_gpu_hours_and_downloads_csv(page: Any, served: Served, tmp_path: Path) -> None:
    with served.api() as api:
        make_hyperpod(api, "webuse")  # one node, 1 GPU
    with served.kube_api(tmp_path) as client:
        core = k8s.CoreV1Api(client)
        core.create_namespace({"metadata": {"name": NAMESPACE}})
        core.create_namespaced_pod(NAMESPACE, {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "vision-burn", "annotations": {"twin.instantstart.io/run-seconds": str(RUN_SECONDS)}},
            "spec": {"restartPolicy": "Never", "containers": [
                {"name": "c", "image": "busybox", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}})
    # The twin's clock runs CLOCK_SCALE times faster than ours: a period reaching well past now covers the pod.
    start, end = datetime.now() - timedelta(days=1), datetime.now() + timedelta(days=365 * 3)
    period = {"since": start.astimezone().isoformat(), "until": end.astimezone().isoformat()}
    with served.api() as api:
        def ended() -> dict[str, Any] | None:
            found: dict[str, Any] = api.get("/api/v1/usage", params=period).json()
            return found if found["total"]["pods"] == 1 and found["total"]["gpuHours"] >= 0.5 else None

        report = until(ended, "the pod's hold ended and recorded", timeout=60 + RUN_SECONDS / CLOCK_SCALE)
    assert report["byTeam"][0]["team"] == "vision" and report["total"]["gpuHours"] == pytest.approx(0.5, abs=0.01)

    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Usage").click()
    expect(page.locator("#usage-title")).to_have_text("Usage")
    page.get_by_label("From").fill(local(start))
    page.get_by_label("To").fill(local(end))
    page.get_by_role("button", name="Show usage").click()
    row = page.locator("#usage tr[data-team=vision]")
    expect(row).to_contain_text("0.50")
    expect(page.locator("#usage tr[data-user='']")).to_contain_text("(not via InstantStart)")
    expect(page.locator("svg.usage-chart rect.bar")).to_have_count(1)
    expect(page.locator("#usage-summary")).to_contain_text("vision used the most (0.50 GPU-hours)")
    audit(page, "usage")
    shot(page, "usage")

    with page.expect_download() as download:
        page.locator("#usage-csv").click()
    text = Path(download.value.path()).read_text()
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [(r["team"], r["namespace"], r["user"], float(r["gpu_hours"])) for r in rows] == [
        ("vision", NAMESPACE, "", pytest.approx(0.5, abs=0.01))]

    # A period that ends before it starts: refused, the message beside From.
    page.get_by_label("From").fill(local(end))
    page.get_by_label("To").fill(local(start))
    page.get_by_role("button", name="Show usage").click()
    expect(page.locator("#usage-since")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#usage-filters .field-error")).to_contain_text("is not before until")
    audit(page, "usage-refused")
    assert not page.page_errors
