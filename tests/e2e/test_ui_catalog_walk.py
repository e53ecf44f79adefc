"""The browser is as capable as an agent: a walk through every page of the web UI (signed in as admin, against a
twin cluster with nodes, a claim with a file, an EKS node group, a training job and operations in every state; the
Cluster page seen again with Karpenter enabled) collects each rendered `data-operation` and fails naming every
catalog operation that no page offers. On the same cluster: a model download checked on Storage, and a workspace
file written, listed, read back, refused over a newer version and deleted from the Storage page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import CLOCK_SCALE, Served, audit, shot
from tests.support.keyboard import tab_reaches_every_operation
from tests.support.waits import wait_for, wait_terminal

pytestmark = pytest.mark.e2e

TAG = "walk"

# Operations no page offers, each with why a person in a browser never needs it.
EXCLUSIONS = {
    "wait_seconds": "an agent's pause between two polls; the browser follows operations live over the WebSocket "
    "and operation_get, so it never needs to be told to wait",
}

# Every route of the UI; the detail routes are filled in by the walk (a node, a running and a cancelled operation).
PAGES = ["clusters", "operations", "storage", "monitoring", "training", "training/walk-job", "inference",
         "inference/walk-model", "teams", "usage", "alerts", "admin"]

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
    """A full cluster (nodes, the S3 claim), a second user in a team, an own token, an operation left running and one
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
        # What the row controls act on: a training job (its delete), a file in the claim (open, delete), a group
        # at 0 (Karpenter is enabled for it after the walk) and an EKS managed node group (scale, delete), which
        # the product never creates: made with boto3, like an operator's own.
        ref = api.post("/api/v1/capacity/advanced-features", json={"trainingOperator": {"enabled": True},
                                                                       "taskGovernance": {"enabled": True}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
        job = api.post("/api/v1/training/jobs", json={
            "jobName": "walk-job", "image": "example/train:1", "command": "train.py", "instanceType": "ml.g6.4xlarge",
            "podAnnotations": {"twin.instantstart.io/run-seconds": str(int(3600 * CLOCK_SCALE))}}).json()
        assert wait_terminal(api, job["operationId"], timeout=120)["status"] == "SUCCEEDED"
        # A team (the Teams page's rows offer team_update and team_delete).
        ref = api.post("/api/v1/teams", json={"name": "walkers", "members": ["walker"], "quota": {
            "instanceType": "ml.g6.4xlarge", "accelerators": 1}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=120)["status"] == "SUCCEEDED", ref
        wrote = api.post("/api/v1/workspace/files", json={"path": "walk/notes.txt", "contentBase64": "bm90ZXMK"})
        assert wrote.status_code == 200, wrote.text
        ref = api.post("/api/v1/capacity/instance-groups", json={
            "instanceGroupName": "auto-a", "instanceType": "ml.g6.12xlarge", "instanceCount": 0,
            "availabilityZone": "us-west-2c"}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
        eks = served.aws("eks")
        cluster = eks.describe_cluster(name=f"eks-cluster-{TAG}")["cluster"]
        role = served.aws("iam").create_role(RoleName=f"{TAG}-nodes", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
        eks.create_nodegroup(clusterName=cluster["name"], nodegroupName="system", nodeRole=role,
                             instanceTypes=["m5.xlarge"], subnets=cluster["resourcesVpcConfig"]["subnetIds"],
                             scalingConfig={"minSize": 1, "maxSize": 2, "desiredSize": 1})
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
    # Karpenter enabled (after the operation left running is cancelled): the Cluster page offers its disabling.
    with served.api() as api:
        assert api.post(f"/api/v1/operations/{walk['running']}/cancel").status_code == 202
        assert wait_terminal(api, walk["running"], timeout=120)["status"] == "CANCELLED"
        api.post(served.twin_url + "/_twin/clock", json={"scale": CLOCK_SCALE}).raise_for_status()
        ref = api.post("/api/v1/capacity/karpenter", json={"instanceGroups": ["auto-a"]}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
    visit(page, served, "clusters")
    expect(page.locator("#karpenter-uninstall")).to_be_visible()
    offered["clusters with Karpenter"] = set(page.evaluate(COLLECT))
    shot(page, "walk-last-page")
    everywhere = set().union(*offered.values())
    names = catalog_names()
    assert not (everywhere - names - {""}), f"data-operation values that are no catalog operation: {everywhere - names}"
    assert not set(EXCLUSIONS) & everywhere, f"excluded yet offered: {set(EXCLUSIONS) & everywhere}"
    missing = sorted(names - everywhere - set(EXCLUSIONS))
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


def test_workspace_files_round_trip_on_storage(page: Any, served: Served, walk: dict[str, str]) -> None:
    with served.api() as api:
        claim = next(c for c in api.get("/api/v1/storage").json()["claims"] if c["name"] == "s3-claim")
    s3, bucket, key = served.aws("s3"), claim["bucketName"], (claim["prefix"] or "") + "walk/ui.txt"
    page.goto(served.url + "/#/storage")
    card = page.locator("#workspace")
    expect(card.get_by_label("Claim")).to_have_value("s3-claim")
    expect(card.locator('#ws-files tr[data-path="walk/notes.txt"]')).to_be_visible()  # listed on arrival
    # Written as a new file, with the keyboard: the path, the text, then Save reached with Tab and pressed.
    editor = card.locator("#ws-editor")
    editor.get_by_label("Path").fill("walk/ui.txt")
    editor.get_by_label("Content").fill("hello from the browser\n")
    editor.get_by_label("Content").focus()
    for _ in range(5):
        if page.evaluate("() => document.activeElement?.dataset.operation === 'workspace_write_file'"):
            break
        page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(card.locator("#ws-status")).to_contain_text("Saved walk/ui.txt")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"hello from the browser\n"
    row = card.locator('#ws-files tr[data-path="walk/ui.txt"]')
    expect(row).to_be_visible()  # listed again after the save
    # Someone else writes a newer version: saving over the one the page holds is refused, clearly, the text kept.
    s3.put_object(Bucket=bucket, Key=key, Body=b"written elsewhere\n")
    editor.get_by_label("Content").fill("my edit\n")
    editor.get_by_role("button", name="Save").click()
    expect(editor.locator(".form-error")).to_contain_text("CONFLICT")
    expect(card.locator("#ws-status")).to_contain_text("Your text is kept")
    expect(editor.get_by_label("Content")).to_have_value("my edit\n")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"written elsewhere\n"
    audit(page, "Storage with a workspace write refused over a newer version")
    # Read back: the list is drawn afresh, the file opened shows the current version; saving over it now works.
    card.get_by_role("button", name="List files").click()
    card.locator('#ws-files tr[data-path="walk/ui.txt"]').get_by_role("button", name="Open walk/ui.txt").click()
    expect(editor.get_by_label("Content")).to_have_value("written elsewhere\n")
    expect(editor.locator(".form-error")).to_have_count(0)
    editor.get_by_label("Content").fill("merged\n")
    editor.get_by_role("button", name="Save").click()
    expect(card.locator("#ws-status")).to_contain_text("Saved walk/ui.txt")
    assert s3.get_object(Bucket=bucket, Key=key)["Body"].read() == b"merged\n"
    shot(page, "walk-storage-workspace")
    audit(page, "Storage with a workspace file open")
    tab_reaches_every_operation(page)
    # Deleted after its confirmation: gone from the list and from the bucket.
    card.locator('#ws-files tr[data-path="walk/ui.txt"]').get_by_role("button", name="Delete walk/ui.txt").click()
    page.get_by_role("button", name="Delete file").click()
    expect(card.locator('#ws-files tr[data-path="walk/ui.txt"]')).to_have_count(0)
    assert "Contents" not in s3.list_objects_v2(Bucket=bucket, Prefix=key)
    expect(card.locator('#ws-files tr[data-path="walk/notes.txt"]')).to_be_visible()
    assert not page.page_errors, page.page_errors
