"""The browser is as capable as an agent: a walk through every page of the web UI (signed in as admin, against a
twin cluster with nodes, a claim and operations in every state) collects each rendered `data-operation` and fails
naming every catalog operation that no page offers. On the same cluster: a model download checked on Storage."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.keyboard import tab_reaches_every_operation
from tests.support.waits import wait_for, wait_terminal

pytestmark = pytest.mark.e2e

TAG = "walk"

# Operations no page offers, each with why a person in a browser never needs it.
EXCLUSIONS = {
    "wait_seconds": "an agent's pause between two polls; the browser follows operations live over the WebSocket "
    "and operation_get, so it never needs to be told to wait",
}

# KNOWN GAPS, issue 31 stays open until this set is empty: no page offers these yet. The walk fails if one of them
# is offered (delete it here then) and for any other operation missing. The node-group, Karpenter-disable and
# job-delete controls exist but render only when node groups, Karpenter or a job row exist, which this walk's
# cluster does not show; the workspace operations have no browser form yet.
NOT_YET_OFFERED = {
    "cluster_nodegroup_delete",
    "cluster_nodegroup_scale",
    "karpenter_uninstall",
    "training_job_delete",
    "workspace_delete_file",
    "workspace_list_files",
    "workspace_read_file",
    "workspace_write_file",
}

# Every route of the UI; the detail routes are filled in by the walk (a node, a running and a cancelled operation).
PAGES = ["clusters", "operations", "storage", "monitoring", "training", "training/walk-job", "inference",
         "inference/walk-model", "alerts", "admin"]

# Visible elements only (collapsed <details> opened first). A progress panel's data-operation is the id of the
# operation it shows, not an operation offered.
COLLECT = """() => {
  document.querySelectorAll('details').forEach((d) => { d.open = true; });
  return [...document.querySelectorAll('[data-operation]:not(.progress-panel)')]
    .filter((el) => el.checkVisibility())
    .map((el) => el.dataset.operation);
}"""


def catalog_names() -> set[str]:
    import instantstart.services as services
    from instantstart.catalog.registry import CATALOG

    services.load_all()
    # The product's operations only: test modules sharing this worker register their own (probe_run) in CATALOG.
    return {spec.name for spec in CATALOG if spec.handler.__module__.startswith("instantstart.")}


@pytest.fixture(scope="module")
def walk(served: Served) -> Iterator[dict[str, str]]:
    """A full cluster (nodes, the S3 claim), a second user, an own token, an operation left running and one
    cancelled: their ids and a node."""
    with served.api() as api:
        ref = api.post("/api/v1/clusters", json={"clusterTag": TAG, "instanceType": "ml.g6.4xlarge",
                                                 "instanceCount": 1, "availabilityZone": "us-west-2c"}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
        # Another user and a token of the admin's own: the rows that offer user_delete and token_revoke.
        assert api.post("/api/v1/users", json={"name": "walker", "role": "viewer"}).status_code == 200
        assert api.post("/api/v1/tokens", json={"name": "walk"}).status_code == 200
        node = api.get("/api/v1/clusters/status").json()["nodes"][0]["name"]
        group = api.get("/api/v1/capacity/instance-groups").json()["instanceGroups"][0]["name"]
        # Real time for the twin: the scale-out below waits for its new node long enough to be seen running.
        api.post(served.twin_url + "/_twin/clock", json={"scale": 1.0}).raise_for_status()
        cancelled = api.post("/api/v1/capacity/instance-groups/scale", json={"name": group, "targetCount": 2}).json()
        wait_for(api, cancelled["operationId"], lambda v: v["status"] == "RUNNING")
        assert api.post(f"/api/v1/operations/{cancelled['operationId']}/cancel").status_code == 202
        assert wait_terminal(api, cancelled["operationId"], timeout=120)["status"] == "CANCELLED"
        running = api.post("/api/v1/capacity/instance-groups/scale", json={"name": group, "targetCount": 2}).json()
        wait_for(api, running["operationId"], lambda v: v["status"] == "RUNNING")
    yield {"node": node, "running": running["operationId"], "cancelled": cancelled["operationId"]}


def visit(page: Any, served: Served, route: str) -> set[str]:
    """Load a route afresh, wait until the network is quiet (every read answered and drawn), collect."""
    page.goto(f"{served.url}/#/{route}")
    page.reload(wait_until="networkidle")
    expect(page.locator("#view > .route")).to_be_attached()
    page.wait_for_load_state("networkidle")
    return set(page.evaluate(COLLECT))


def test_every_catalog_operation_is_offered_by_some_page(page: Any, served: Served, walk: dict[str, str]) -> None:
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#whoami")).to_contain_text("(admin)")
    routes = [*PAGES, f"monitoring/{walk['node']}", f"operations/{walk['running']}", f"operations/{walk['cancelled']}"]
    offered: dict[str, set[str]] = {}
    for route in routes:
        offered[route] = visit(page, served, route)
        if route == "clusters":
            # The deletion plan is read in the dialog the Delete… button opens.
            page.locator(f'#clusters tr[data-cluster="{TAG}"]').get_by_role("button", name="Delete…").click()
            expect(page.locator('dialog [data-operation="cluster_delete_plan"] .plan-scroll')).to_be_visible()
            offered[route] |= set(page.evaluate(COLLECT))
            page.keyboard.press("Escape")
        page.locator("#alerts-bell").click()  # the bell's panel (alert_list) opens on every page
        offered[route] |= set(page.evaluate(COLLECT))
        page.keyboard.press("Escape")
    shot(page, "walk-last-page")
    everywhere = set().union(*offered.values())
    names = catalog_names()
    assert not (everywhere - names - {""}), f"data-operation values that are no catalog operation: {everywhere - names}"
    assert not set(EXCLUSIONS) & everywhere, f"excluded yet offered: {set(EXCLUSIONS) & everywhere}"
    offered_now = sorted(NOT_YET_OFFERED & everywhere)
    assert not offered_now, f"offered now, delete from NOT_YET_OFFERED: {offered_now}"
    missing = sorted(names - everywhere - set(EXCLUSIONS) - NOT_YET_OFFERED)
    assert not missing, "catalog operations no page offers:\n" + "\n".join(missing)
    assert not page.page_errors


def test_storage_checks_where_a_model_download_stands(page: Any, served: Served, walk: dict[str, str]) -> None:
    page.goto(served.url + "/#/storage")
    form = page.locator("#model-status")
    form.get_by_label("Model id").fill("not a model id!")
    form.get_by_role("button", name="Check").click()
    expect(form.locator('.field-error[data-for="modelId"]')).to_be_visible()
    expect(form.get_by_label("Model id")).to_have_value("not a model id!")
    form.get_by_label("Model id").fill("Qwen/Qwen3-0.6B")
    form.get_by_role("button", name="Check").click()
    with served.api() as api:
        expected = api.get("/api/v1/models/status", params={"modelId": "Qwen/Qwen3-0.6B"}).json()
    assert expected["state"] == "ABSENT"
    expect(page.locator("#model-status-result")).to_contain_text("Qwen/Qwen3-0.6B@main in s3-claim")
    expect(page.locator("#model-status-result")).to_contain_text("ABSENT")
    audit(page, "Storage & Models with a download checked")
    tab_reaches_every_operation(page)
    assert not page.page_errors, page.page_errors
