"""The web UI in a real browser against `instantstart serve --twin`: sign-in, the create form with the API's
field errors, six stages live, reload without a second operation, GPU totals, operations, advanced features as an
explicit diff, sign-out; every page passes axe-core's WCAG 2.0/2.1 A and AA rules."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import CLOCK_SCALE, Served, audit, shot

pytestmark = pytest.mark.e2e

STAGES = ["eks", "activate", "dependencies", "hyperpod", "storage", "verification"]
AZ = "us-west-2c"
TYPE = "ml.g6.4xlarge"


def fill_create_form(page: Any, tag: str, cidr: str = "") -> None:
    form = page.locator("#create form")
    form.locator("[name=clusterTag]").fill(tag)
    form.locator("[name=availabilityZone]").select_option(AZ)
    form.locator("[name=instanceType]").select_option(TYPE)
    form.locator("[name=instanceCount]").fill("1")
    form.locator("[name=vpcCidr]").fill(cidr)
    expect(form.locator(".preflight")).to_contain_text("Preflight")


def test_sign_in_keeps_the_token_out_of_the_browser(page: Any, served: Served) -> None:
    page.goto(served.url + "/")
    expect(page.get_by_label("API token")).to_be_visible()
    shot(page, "01-sign-in")
    audit(page, "sign-in")
    page.get_by_label("API token").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#token-error")).to_have_text("That is not the API token of this server.")
    audit(page, "sign-in with an error")
    # Keyboard only: the token field has the focus, Enter submits.
    expect(page.get_by_label("API token")).to_be_focused()
    page.keyboard.type(served.token)
    page.keyboard.press("Enter")
    expect(page.get_by_role("link", name="Cluster Management")).to_be_visible()
    expect(page.locator("#live")).to_have_text("live")
    cookies = page.context.cookies()
    assert [(c["name"], c["httpOnly"], c["sameSite"], c["path"]) for c in cookies] == [
        ("instantstart_session", True, "Strict", "/")
    ]
    assert served.token not in cookies[0]["value"]
    assert served.token not in page.url
    stored = page.evaluate("() => JSON.stringify([{...localStorage}, {...sessionStorage}, document.cookie])")
    assert served.token not in stored and "instantstart_session" not in stored
    # A state-changing call with the cookie but without the CSRF header is refused.
    status = page.evaluate(
        """async () => (await fetch('/api/v1/clusters/plan', {method: 'POST', headers: {'Content-Type':
        'application/json'}, body: JSON.stringify({instanceType: 'ml.g6.4xlarge', instanceCount: 1,
        availabilityZone: 'us-west-2c'})})).status"""
    )
    assert status == 401


def test_bad_cidr_shows_the_api_message_beside_the_field(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    fill_create_form(page, "webui", cidr="10.0.0.0/33")
    page.get_by_role("button", name="Create cluster").click()
    with served.api() as api:
        expected = api.post(
            "/api/v1/clusters",
            json={"clusterTag": "webui", "instanceType": TYPE, "instanceCount": 1, "availabilityZone": AZ,
                  "vpcCidr": "10.0.0.0/33"},
        ).json()["error"]
        field_message = next(f["message"] for f in expected["details"]["fields"] if f["field"] == "vpcCidr")
        error = page.locator('.field-error[data-for="vpcCidr"]')
        expect(error).to_have_text(field_message)
        cidr = page.locator("#create [name=vpcCidr]")
        expect(cidr).to_have_attribute("aria-invalid", "true")
        # Beside the field: in the same field box, right under the input.
        assert cidr.evaluate("(el, err) => el.closest('.field').contains(err)", error.element_handle())
        expect(page.locator("#create .form-error")).to_contain_text(expected["message"])
        assert api.get("/api/v1/operations").json()["total"] == 0
    shot(page, "02-bad-cidr")
    audit(page, "Cluster Management with field errors")
    # The import form shows the API's message beside its field too.
    page.get_by_text("Import an existing cluster").click()
    page.get_by_label("EKS cluster name").fill("not a name!")
    page.get_by_role("button", name="Import").click()
    with served.api() as api:
        refused = api.post("/api/v1/clusters/import", json={"eksClusterName": "not a name!"}).json()["error"]
    expect(page.locator('.field-error[data-for="eksClusterName"]')).to_have_text(
        refused["details"]["fields"][0]["message"]
    )
    audit(page, "Cluster Management with the import form's error")
    page.goto(served.url + "/#/monitoring")
    expect(page.locator("#summary")).to_contain_text("No cluster is active")
    audit(page, "Monitoring without a cluster")


def twin_clock(served: Served, scale: float) -> None:
    httpx.post(served.twin_url + "/_twin/clock", json={"scale": scale}, timeout=10).raise_for_status()


def test_create_cluster_through_the_form_and_reload_midway(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    fill_create_form(page, "webui")
    expect(page.locator("#create .preflight")).to_contain_text("No blockers")
    twin_clock(served, 10)  # EKS takes a minute of real time now: the reload surely lands mid-operation
    page.get_by_role("button", name="Create cluster").click()
    page.wait_for_url(re.compile(r"#/clusters/op-[0-9a-f]+$"))
    op_id = page.url.rsplit("/", 1)[1]
    panel = page.locator(f'#progress .progress-panel[data-operation="{op_id}"]')
    expect(panel.locator("li[data-stage]")).to_have_count(6)
    expect(panel.locator('li[data-stage="eks"]')).to_have_attribute("data-status", re.compile("RUNNING|SUCCEEDED"))
    shot(page, "03-cluster-progress")
    # Reload while the operation runs: the page shows the same operation; nothing was submitted again.
    page.reload()
    panel = page.locator(f'#progress .progress-panel[data-operation="{op_id}"]')
    expect(panel).to_be_visible()
    with served.api() as api:
        listing = api.get("/api/v1/operations", params={"kind": "cluster_create"}).json()
        assert listing["total"] == 1 and listing["operations"][0]["operationId"] == op_id
        assert listing["operations"][0]["status"] in ("PENDING", "RUNNING")
    twin_clock(served, CLOCK_SCALE)
    for stage in STAGES:
        expect(panel.locator(f'li[data-stage="{stage}"]')).to_have_attribute(
            "data-status", "SUCCEEDED", timeout=240_000
        )
    expect(panel).to_have_attribute("data-status", "SUCCEEDED")
    row = page.locator('#clusters tr[data-cluster="webui"]')
    expect(row).to_contain_text("active")
    expect(page.locator("#active-cluster")).to_have_value("webui")
    expect(page.locator("#capacity tr[data-group]")).to_have_count(1)
    with served.api() as api:
        assert api.get("/api/v1/operations", params={"kind": "cluster_create"}).json()["total"] == 1
    shot(page, "04-cluster")
    audit(page, "Cluster Management with a cluster (Capacity, Advanced features)")


def wait_capacity_op(page: Any, served: Served, kind_hint: str, previous: str = "none") -> dict[str, Any]:
    """The capacity card's panel of a new operation (not `previous`) reaches SUCCEEDED; returns the operation
    as the API reports it."""
    panel = page.locator(f'#capacity .progress-panel:not([data-operation="{previous}"])')
    expect(panel).to_be_visible()
    op_id = panel.get_attribute("data-operation")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=180_000)
    with served.api() as api:
        op = api.get(f"/api/v1/operations/{op_id}").json()
    assert op["status"] == "SUCCEEDED" and kind_hint in op["kind"], op
    return op


def test_capacity_add_a_spot_group_scale_it_and_reboot_a_node(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    page.get_by_role("button", name="Add instance group…").click()
    form = page.locator("#add-group")
    form.get_by_label("Name", exact=True).fill("spot-a")
    form.get_by_label("Availability Zone").select_option(AZ)
    form.get_by_label("Instance type").select_option(TYPE)
    form.get_by_label("Count", exact=True).fill("1")
    form.get_by_label("Capacity type").select_option("Spot")
    expect(form.get_by_label("EFA-only network interfaces")).to_be_hidden()  # ml.g6.4xlarge is not eligible
    expect(page.locator("#ig-subnet-note")).to_contain_text(AZ)
    shot(page, "08-add-instance-group")
    audit(page, "Capacity with the add-group form")
    form.get_by_role("button", name="Add group").click()
    added = wait_capacity_op(page, served, "instance_group")
    # Only what the user set was sent: the defaults (EBS size, subnet choice) were left to the API.
    assert added["params"]["group"]["capacityType"] == "Spot"
    assert added["params"]["group"]["ebsGb"] == 500 and added["params"]["group"]["subnetId"] is None
    row = page.locator('#capacity tr[data-group="spot-a"]')
    expect(row).to_contain_text("Spot")
    expect(row.locator(".count")).to_have_text("1 / 1")
    row.get_by_label("Target count of spot-a").fill("2")
    row.get_by_role("button", name="Scale").click()
    scaled = wait_capacity_op(page, served, "scale", previous=added["operationId"])
    expect(row.locator(".count")).to_have_text("2 / 2", timeout=30_000)
    expect(page.locator("#capacity tr[data-node]")).to_have_count(3, timeout=30_000)
    node = page.locator("#capacity tr[data-node]").first
    node_name = node.get_attribute("data-node")
    node.get_by_role("button", name="Reboot").click()
    rebooted = wait_capacity_op(page, served, "reboot", previous=scaled["operationId"])
    assert rebooted["params"]["nodeId"] == node_name.removeprefix("hyperpod-")
    shot(page, "09-capacity")
    audit(page, "Capacity with an operation")


def test_a_failed_stage_shows_the_error_and_retry_resumes_the_same_operation(page: Any, served: Served) -> None:
    fault = {
        "kind": "error",
        "service": "sagemaker",
        "operation": "UpdateCluster",
        "code": "ValidationException",
        "message": "Injected by the web UI test",
        "status": 400,
        "count": 1,
    }
    httpx.post(served.twin_url + "/_twin/faults", json=fault, timeout=10).raise_for_status()
    previous = page.locator("#capacity .progress-panel").get_attribute("data-operation")
    page.get_by_role("button", name="Add instance group…").click()
    form = page.locator("#add-group")
    form.get_by_label("Name", exact=True).fill("retry-b")
    form.get_by_label("Availability Zone").select_option(AZ)
    form.get_by_label("Instance type").select_option(TYPE)
    form.get_by_label("Count", exact=True).fill("0")
    form.get_by_role("button", name="Add group").click()
    panel = page.locator(f'#capacity .progress-panel:not([data-operation="{previous}"])')
    expect(panel).to_have_attribute("data-status", "FAILED", timeout=120_000)
    op_id = panel.get_attribute("data-operation")
    expect(panel.locator(".form-error")).to_contain_text("Injected by the web UI test")
    failed = panel.locator('li[data-status="FAILED"]')
    expect(failed).to_have_count(1)
    shot(page, "09b-failed-stage")
    failed.get_by_role("button", name="Retry").click()
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=120_000)
    assert panel.get_attribute("data-operation") == op_id
    with served.api() as api:
        ops = api.get("/api/v1/operations", params={"kind": "instance_group_add"}).json()
    assert [o["operationId"] for o in ops["operations"] if o["params"]["group"]["name"] == "retry-b"] == [op_id]
    expect(page.locator('#capacity tr[data-group="retry-b"]')).to_be_visible()


FEATURES = ["karpenter", "certManager", "fsxCsiDriver", "trainingOperator", "inferenceOperator", "tieredStorage",
            "kuberayOperator", "observability", "keda", "taskGovernance"]
ADVANCED = "/api/v1/capacity/advanced-features"


def test_advanced_features_send_only_the_touched_keys_and_show_each_result(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    card = page.locator("#features")
    expect(card.locator("tr[data-feature]")).to_have_count(len(FEATURES))
    with served.api() as api:
        before = api.get(ADVANCED).json()
    # Every control starts at the state read from the cluster (hyperpod_get_advanced_features).
    for key in FEATURES:
        expect(card.locator(f'tr[data-feature="{key}"]')).to_have_attribute("data-state", before[key]["state"])
        expect(page.locator(f"#feat-{key}")).to_be_checked(checked=before[key]["enabled"])
    assert not before["certManager"]["enabled"] and not before["fsxCsiDriver"]["enabled"], before
    apply = card.get_by_role("button", name="Apply changes")
    expect(apply).to_be_disabled()
    card.get_by_label("cert-manager", exact=True).check()
    card.get_by_label("FSx for Lustre CSI driver", exact=True).check()
    # A control changed and changed back is not part of the diff.
    ray = card.get_by_label("KubeRay operator", exact=True)
    ray.check()
    ray.uncheck()
    expect(card).to_contain_text("2 changes: certManager, fsxCsiDriver")
    shot(page, "09c-advanced-features")
    with page.expect_request(lambda r: r.method == "POST" and r.url.endswith(ADVANCED)) as captured:
        apply.click()
    assert captured.value.post_data_json == {"certManager": {"enabled": True}, "fsxCsiDriver": {"enabled": True}}
    panel = card.locator(".progress-panel")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=120_000)
    op_id = panel.get_attribute("data-operation")
    with served.api() as api:
        op = api.get(f"/api/v1/operations/{op_id}").json()
    assert op["kind"] == "advanced_features_update" and op["params"]["features"] == captured.value.post_data_json
    outcome = {f["key"]: f for f in op["result"]["features"]}
    assert set(outcome) == {"certManager", "fsxCsiDriver"}
    # Per-feature results, as the operation's result has them.
    expect(card.locator("tr[data-result]")).to_have_count(2)
    for key, result in outcome.items():
        row = card.locator(f'tr[data-result="{key}"]')
        expect(row).to_have_attribute("data-status", result["status"])
        expect(row).to_contain_text(result["action"])
        assert result["status"] == "SUCCEEDED" and result["action"] == "enabled", result
    # Then the controls show the new actual state, and nothing is left to apply.
    for key in ("certManager", "fsxCsiDriver"):
        expect(card.locator(f'tr[data-feature="{key}"]')).to_have_attribute("data-state", "ENABLED", timeout=30_000)
        expect(page.locator(f"#feat-{key}")).to_be_checked()
    expect(card).to_contain_text("no changes")
    shot(page, "09d-advanced-features-results")
    audit(page, "Advanced features with results")


def test_monitoring_shows_gpu_totals_and_workloads(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/monitoring")
    total = page.locator(f'#gpus .total[data-instance-type="{TYPE}"]')
    # 1 GPU after cluster_create, 3 once the Spot group has 2 nodes.
    expect(total.locator(".gpu-total")).to_have_text("3")
    with served.api() as api:
        status = api.get("/api/v1/clusters/status").json()
    accel = next(a for a in status["accelerators"] if a["instanceType"] == TYPE)
    expect(total.locator(".gpu-allocated")).to_have_text(str(accel["gpuAllocated"]))
    expect(total.locator(".gpu-available")).to_have_text(str(accel["gpuAvailable"]))
    expect(page.locator("#nodes tbody tr")).to_have_count(status["nodeCount"])
    expect(page.locator("#workloads")).to_contain_text("Pods (")
    expect(page.locator("#workloads")).to_contain_text("kube-system")
    shot(page, "05-monitoring")
    audit(page, "Monitoring")


def test_monitoring_shows_a_pod_appearing_live_without_a_refresh(page: Any, served: Served, tmp_path: Any) -> None:
    from kubernetes import client as k8s

    page.goto(served.url + "/#/monitoring")
    expect(page.locator("#workloads")).to_contain_text("Pods (")
    expect(page.locator("#timeline")).to_contain_text("Timeline")
    with served.kube_api(tmp_path) as api_client:
        core = k8s.CoreV1Api(api_client)
        core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "live-probe"},
                                               "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    # No reload, no navigation: the watch sees the pod and the WebSocket pushes the new state.
    expect(page.locator("#workloads")).to_contain_text("live-probe", timeout=15_000)
    shot(page, "05b-monitoring-live-pod")


def test_training_page_submits_a_recipe_and_follows_a_job_log_live(page: Any, served: Served) -> None:
    from tests.support.waits import until, wait_terminal

    with served.api() as api:
        ref = api.post("/api/v1/capacity/advanced-features", json={"trainingOperator": {"enabled": True}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=180)["status"] == "SUCCEEDED"
    page.goto(served.url + "/#/training")
    form = page.locator("#recipe-form")
    form.locator("[name=recipe]").select_option("pytorch")
    expect(form.locator("[name='fields.epochs']")).to_have_value("1")
    form.locator("[name=jobName]").fill("Bad_Name")
    form.locator("[name=instanceType]").select_option(TYPE)
    form.locator("button[type=submit]").click()
    expect(form.locator(".field-error")).to_contain_text("is not a DNS label")
    audit(page, "Training with a field error")
    form.locator("[name=jobName]").fill("ui-ddp")
    form.locator("[name='fields.epochs']").fill("2")
    form.locator("button[type=submit]").click()
    expect(page.locator("#banner")).to_contain_text("Submitted ui-ddp", timeout=60_000)
    # The list is served from the cluster's watch: the new job is in it once the watch delivered its ADDED event,
    # at the latest on the page's next 5 s refresh (a full suite's load made that longer than expect's 5 s).
    expect(page.locator("#jobs tr[data-job=ui-ddp]")).to_contain_text("HyperPodPyTorchJob", timeout=20_000)
    shot(page, "06-training")
    audit(page, "Training")

    # A job that writes a line every second or so: its page shows lines arriving, then pausing and following
    # again resumes where it stopped: every line once, in order, until the container ends.
    written = [f"step {i}/16 loss={1.0 / i:.3f}" for i in range(1, 17)]
    with served.api() as api:
        ref = api.post("/api/v1/training/jobs", json={
            "jobName": "ui-live", "image": "example/train:1", "command": "train.py", "instanceType": TYPE,
            "podAnnotations": {"twin.instantstart.io/run-seconds": str(int(16 * CLOCK_SCALE)),
                               "twin.instantstart.io/log-lines": "\n".join(written)}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
    page.goto(served.url + "/#/training/ui-live")
    lines = page.locator("#job-logs .log-line")
    expect(lines.filter(has_text="step 2/16")).to_have_count(1, timeout=60_000)
    expect(lines.filter(has_text="step 4/16")).to_have_count(1, timeout=30_000)  # arrived without a reload
    page.locator("#log-follow").click()
    expect(page.locator("#log-state")).to_have_text("paused")
    expect(page.locator("#log-follow")).to_have_text("Follow")
    shown = len([t for t in lines.all_inner_texts() if t.startswith("step ")])
    with served.api() as api:  # lines written while paused: they must come after resuming, once
        until(lambda: len([t for t in api.get("/api/v1/training/jobs/logs", params={"jobName": "ui-live", "tail": 50})
                           .json().get("lines", []) if t.startswith("step ")]) > shown, timeout=60, what="a new line")
    page.locator("#log-follow").click()
    expect(page.locator("#log-state")).to_have_text("the container has ended", timeout=60_000)
    texts = [t for t in lines.all_inner_texts() if not t.startswith("[twin]")]
    assert texts == written, texts
    expect(page.locator("#job-budget")).to_contain_text("of 5 allowed")
    expect(page.locator("#job-network")).to_have_text("single node: no network between nodes")  # job_get_status
    expect(page.locator("#job-network-warning")).to_have_count(0)
    shot(page, "06b-training-job-logs")
    audit(page, "Training job with live logs")


def test_training_job_page_charts_its_mlflow_run(page: Any, served: Served) -> None:
    """After mlflow_configure, a job with `mlflow` logs a run to the twin's real mlflow server; its page draws the
    loss per step as an SVG chart with a title and a text alternative, and passes the audit."""
    from tests.support.waits import until, wait_terminal

    with served.api() as api:
        ref = api.post("/api/v1/training/mlflow", json={}).json()
        assert wait_terminal(api, ref["operationId"], timeout=400)["status"] == "SUCCEEDED"
        ref = api.post("/api/v1/training/jobs", json={
            "jobName": "ui-mlflow", "image": "example/train:1", "command": "train.py", "instanceType": TYPE,
            "mlflow": {"experiment": "ui"}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
        until(lambda: [r for r in api.get("/api/v1/training/history", params={"jobName": "ui-mlflow"}).json().get(
            "runs", []) if r["status"] == "FINISHED"], timeout=120, what="the job's MLflow run")
    page.goto(served.url + "/#/training/ui-mlflow")
    chart = page.locator("#job-metrics svg.chart[data-metric=loss]")
    expect(chart).to_have_count(1, timeout=30_000)
    expect(chart.locator("title")).to_have_text("loss per step (run ui-mlflow)")
    expect(page.locator("#job-metrics figcaption")).to_contain_text("5 point(s) from step 1 to 5")
    expect(page.locator("#job-metrics figcaption")).to_contain_text("last 0.5")
    assert chart.locator("circle").count() == 5
    shot(page, "06c-training-mlflow-chart")
    audit(page, "Training job with MLflow metrics")


def test_operations_list_filter_and_detail(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/operations")
    rows = page.locator("#view tbody tr")
    expect(rows.first).to_be_visible()
    expect(page.locator("#view table")).to_contain_text("cluster_create")
    page.get_by_label("Status").select_option("FAILED")
    expect(page.locator("#view")).to_contain_text("No operation matches.")
    page.get_by_label("Status").select_option("SUCCEEDED")
    page.get_by_label("Kind").fill("cluster_create")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_count(1)
    shot(page, "06-operations")
    audit(page, "Operations")
    rows.first.get_by_role("link").click()
    expect(page.locator(".progress-panel li[data-stage]")).to_have_count(6)
    expect(page.locator("#view")).to_contain_text("Parameters")
    shot(page, "07-operation-detail")
    audit(page, "Operation detail")
    assert page.page_errors == []


def test_delete_shows_the_deletion_plan_and_needs_the_tag_typed(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    page.locator('#clusters tr[data-cluster="webui"]').get_by_role("button", name="Delete…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Plan digest")
    with served.api() as api:
        plan = api.get("/api/v1/clusters/webui/deletion-plan").json()
    expect(dialog.locator("code", has_text=plan["planDigest"])).to_be_visible()
    expect(dialog.locator("tbody tr").first).to_be_visible()
    expect(dialog.locator("tbody").first.locator("tr")).to_have_count(len(plan["resources"]))
    delete = dialog.get_by_role("button", name="Delete", exact=True)
    expect(delete).to_be_disabled()
    dialog.get_by_label("Type webui to confirm").fill("webu")
    expect(delete).to_be_disabled()
    dialog.get_by_label("Type webui to confirm").fill("webui")
    expect(delete).to_be_enabled()
    page.screenshot(path=str(shot(page, "10-delete-plan")))  # the viewport: the modal as the user sees it
    audit(page, "the delete dialog")
    delete.click()
    page.wait_for_url(re.compile(r"#/clusters/op-[0-9a-f]+$"))
    op_id = page.url.rsplit("/", 1)[1]
    panel = page.locator(f'#progress .progress-panel[data-operation="{op_id}"]')
    expect(panel).to_contain_text("cluster_delete")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=180_000)
    expect(page.locator("#clusters")).to_contain_text("No clusters yet.")
    with served.api() as api:
        op = api.get(f"/api/v1/operations/{op_id}").json()
    # The server accepts the delete only with the digest of the current plan: the one the dialog showed.
    assert (op["kind"], op["status"]) == ("cluster_delete", "SUCCEEDED")
    shot(page, "11-deleted")


def test_a_failed_pipeline_stage_shows_failed_in_the_cluster_list(page: Any, served: Served) -> None:
    """Regression (issue 10): the engine mirrors a failed stage onto the cluster row, so the list's badge
    says FAILED (it used to keep RUNNING)."""
    fault = {"kind": "eks_failure", "cluster": "eks-cluster-uifail"}
    httpx.post(served.twin_url + "/_twin/faults", json=fault, timeout=10).raise_for_status()
    page.goto(served.url + "/#/clusters")
    with served.api() as api:
        ref = api.post("/api/v1/clusters/eks", json={"clusterTag": "uifail"}).json()
        row = page.locator('tr[data-cluster="uifail"]')
        expect(row.locator('[title="eks: FAILED"]')).to_be_visible(timeout=120_000)
        view = api.get(f"/api/v1/operations/{ref['operationId']}").json()
        assert view["status"] == "FAILED", view
        listed = next(c for c in api.get("/api/v1/clusters").json()["clusters"] if c["clusterTag"] == "uifail")
        assert listed["stages"]["eks"] == "FAILED"
    httpx.delete(served.twin_url + "/_twin/faults", timeout=10).raise_for_status()
    shot(page, "10-failed-stage-in-list")


def test_sign_out_ends_the_session(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/clusters")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API token")).to_be_visible()
    assert page.context.cookies() == []
    status = page.evaluate("async () => (await fetch('/api/v1/clusters')).status")
    assert status == 401
