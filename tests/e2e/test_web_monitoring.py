"""The Monitoring page and the object pages in a real browser against `instantstart serve --twin`: filters over
nodes, pods, jobs and endpoints; training jobs and inference endpoints with their state; the observability
card (AMP and Grafana workspace links, the GPU-utilisation chart and its text alternative, busy once a job holds
the GPU); the persistent timeline, paginated, on the cluster, node, job and endpoint pages. axe-core finds no
WCAG 2.0/2.1 A or AA violation on any of them."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import CLOCK_SCALE, Served, audit, shot
from tests.support.flows import make_hyperpod
from tests.support.waits import wait_terminal

pytestmark = pytest.mark.e2e

TYPE = "ml.g6.4xlarge"
JOB = "mon-job"
SERVER = "mon-llm"


def test_setup_a_cluster_with_observability_a_job_and_a_model(page: Any, served: Served) -> None:
    with served.api() as api:
        make_hyperpod(api, "webmon", acceleratedInstanceCount=2)  # two nodes of 1 GPU each
        ref = api.post("/api/v1/capacity/advanced-features",
                       json={"trainingOperator": {"enabled": True},
                             "observability": {"enabled": True, "grafana": True}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
        job = api.post("/api/v1/training/jobs", json={
            "jobName": JOB, "image": "example/train:1", "command": "train.py", "instanceType": TYPE,
            "podAnnotations": {"twin.instantstart.io/run-seconds": str(int(3600 * CLOCK_SCALE))}}).json()
        assert wait_terminal(api, job["operationId"], timeout=120)["status"] == "SUCCEEDED"
        model = api.post("/api/v1/inference/deployments", json={
            "deploymentCommand": "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280", "gpuCount": 1,
            "deploymentName": SERVER})
        assert model.status_code == 202, model.text
        assert wait_terminal(api, model.json()["operationId"], timeout=180)["status"] == "SUCCEEDED"
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#active-cluster")).to_have_value("webmon")


def test_monitoring_shows_jobs_endpoints_and_gpu_utilisation_from_the_workspace(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/monitoring")
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_contain_text("HyperPodPyTorchJob")
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_contain_text("Running", timeout=60_000)
    endpoint = page.locator(f"#endpoints tr[data-endpoint={SERVER}]")
    expect(endpoint).to_contain_text("self-managed")
    expect(endpoint).to_contain_text("ready")
    with served.api() as api:
        links = api.get("/api/v1/monitoring/gpu-utilization").json()["observability"]
    workspace = links["workspaceId"]
    card = page.locator("#observability")
    expect(card.locator("#amp-link")).to_have_attribute("href", re.compile(f"/prometheus/home.*{workspace}$"))
    # The Grafana workspace the feature created: its own sign-in URL, not the console.
    grafana = re.compile(r"^https://g-[0-9a-f]{10}\.grafana-workspace\.[a-z0-9-]+\.amazonaws\.com$")
    assert grafana.match(links["grafanaWorkspaceUrl"] or ""), links
    expect(card.locator("#grafana-link")).to_have_attribute("href", links["grafanaWorkspaceUrl"])
    expect(card.locator("#grafana-link")).to_contain_text(links["grafanaWorkspaceId"])
    # Both GPUs are held (the job's worker and the model server): the mean is busy, said in words beside the chart.
    expect(card.locator("#gpu-summary")).to_contain_text("over 2 GPUs", timeout=60_000)
    expect(card.locator("#gpu-summary")).to_contain_text(re.compile(r"now: (8[5-9]|9\d)(\.\d)?%"), timeout=60_000)
    expect(card.locator("svg.chart[role=img] path.series")).to_have_count(1)
    expect(card.locator("svg.chart")).to_have_attribute("aria-describedby", "gpu-summary")
    expect(card.locator("tr[data-gpu-node]")).to_have_count(2)
    expect(card.locator(f'tr[data-type="{TYPE}"]')).to_contain_text("2")
    shot(page, "30-monitoring-observability")
    audit(page, "Monitoring with jobs, endpoints and GPU utilisation")


def test_monitoring_filters_narrow_every_table(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/monitoring")
    expect(page.locator("#nodes-count")).to_have_text("2 of 2")
    page.locator("#filter-type").select_option(TYPE)
    expect(page.locator("#nodes-count")).to_have_text("2 of 2")
    page.locator("#filter-health").select_option("attention")
    expect(page.locator("#nodes-count")).to_have_text("0 of 0")
    expect(page.locator("#nodes")).to_contain_text("No nodes.")
    page.locator("#filter-health").select_option("")
    first = page.locator("#nodes tbody tr").first.get_attribute("data-node")
    assert first is not None
    page.locator("#filter-text").fill(first[-6:])
    expect(page.locator("#nodes-count")).to_have_text("1 of 1")
    expect(page.locator("#jobs")).to_contain_text("No job matches the filters.")
    page.locator("#filter-text").fill("mon-")
    expect(page.locator("#nodes-count")).to_have_text("0 of 0")
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_have_count(1)
    expect(page.locator(f"#endpoints tr[data-endpoint={SERVER}]")).to_have_count(1)
    expect(page.locator("#workloads tr[data-pod]").first).to_contain_text("mon-")
    page.locator("#filter-text").fill("")
    page.locator("#filter-namespace").select_option("kube-system")
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_have_count(0)
    expect(page.locator("#endpoints")).to_contain_text("No inference endpoints match.")
    pods = page.locator("#workloads tr[data-pod]")
    expect(pods.first).to_be_visible()
    assert all(t.startswith("kube-system") for t in pods.all_inner_texts())
    shot(page, "31-monitoring-filtered")
    audit(page, "Monitoring filtered")
    page.locator("#filter-namespace").select_option("")
    page.locator("#filter-type").select_option("")


def test_job_page_shows_its_timeline(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/monitoring")
    page.locator(f"#jobs tr[data-job={JOB}] a").click()
    expect(page).to_have_url(re.compile(f"#/training/{JOB}$"))
    card = page.locator("#job-timeline")
    expect(card.locator("tbody tr").first).to_be_visible(timeout=30_000)
    objects = card.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert objects and all(re.search(f"/{JOB}(-|$)", o) for o in objects), objects
    expect(card.locator("tr[data-reason=Scheduled]").first).to_be_visible()
    card.get_by_label("Warnings only").check()
    expect(card).to_contain_text("Nothing recorded yet.")
    card.get_by_label("Warnings only").uncheck()
    expect(card.locator("tbody tr").first).to_be_visible()
    shot(page, "32-job-timeline")
    audit(page, "Training job with its timeline")


def test_node_page_shows_the_node_and_its_timeline(page: Any, served: Served) -> None:
    page.goto(served.url + "/#/monitoring")
    link = page.locator("#nodes tbody tr a").first
    name = link.inner_text()
    link.click()
    expect(page).to_have_url(re.compile(f"#/monitoring/{name}$"))
    expect(page.locator("#node h1")).to_have_text(name)
    expect(page.locator("#node")).to_contain_text(TYPE)
    expect(page.locator("#node-pods tbody tr").first).to_be_visible()
    card = page.locator("#node-timeline")
    expect(card.locator("tbody tr").first).to_be_visible(timeout=30_000)
    instance = name.removeprefix("hyperpod-")
    objects = card.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert objects and all(o.endswith(f"/{instance}") or o.endswith(f"/{name}") for o in objects), objects
    expect(card.locator("td", has_text="hyperpod")).not_to_have_count(0)
    shot(page, "33-node-page")
    audit(page, "Node page with its timeline")


def test_endpoint_page_and_the_cluster_timeline_page_by_page(page: Any, served: Served) -> None:
    page.goto(served.url + f"/#/inference/{SERVER}")
    expect(page.locator("#endpoint h1")).to_have_text(SERVER)
    expect(page.locator("#endpoint-replicas")).to_have_text("1/1")
    card = page.locator("#endpoint-timeline")
    expect(card.locator("tbody tr").first).to_be_visible(timeout=30_000)
    objects = card.locator("tbody tr td:nth-child(3)").all_inner_texts()
    assert all(re.search(f"/{SERVER}(-|$)", o) for o in objects), objects
    audit(page, "Inference endpoint with its timeline")

    page.goto(served.url + "/#/clusters")
    timeline = page.locator("#cluster-timeline")
    expect(timeline.locator("tbody tr")).to_have_count(20, timeout=30_000)  # more than a page was recorded
    first_page = timeline.locator("tbody tr").evaluate_all("rows => rows.map((r) => r.dataset.entry)")
    timeline.get_by_role("button", name="Older").click()
    expect(timeline).to_contain_text("page 2")
    second_page = timeline.locator("tbody tr").evaluate_all("rows => rows.map((r) => r.dataset.entry)")
    assert second_page and not set(first_page) & set(second_page)
    assert max(map(int, second_page)) < min(map(int, first_page))  # older entries, newest first
    timeline.get_by_role("button", name="Newest").click()
    expect(timeline).to_contain_text("page 1")
    shot(page, "34-cluster-timeline")
    audit(page, "Cluster page with its timeline")
    assert not page.page_errors, page.page_errors


def test_a_training_job_appears_and_goes_live_without_a_reload_or_a_poll(page: Any, served: Served,
                                                                         tmp_path: Any) -> None:
    from kubernetes import client as k8s

    from instantstart.manifests import training as training_manifests
    from tests.support.watches import pytorch_job

    page.goto(served.url + "/#/monitoring")
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_have_count(1)
    expect(page.locator("#live")).to_have_text("live")
    table_reads: list[str] = []  # HTTP reads of the job and endpoint tables from now on (there must be none)
    page.on("request", lambda r: table_reads.append(r.url) if re.search(
        r"/api/v1/(training/jobs|inference/(services|managed))(\?|$)", r.url) else None)
    with served.kube_api(tmp_path) as api_client:
        objects = k8s.CustomObjectsApi(api_client)
        objects.create_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            pytorch_job("live-job", TYPE),
        )
        # No reload, no navigation, no poll: the job's watch sees it and the WebSocket pushes the new state.
        row = page.locator("#jobs tr[data-job=live-job]")
        expect(row).to_contain_text("HyperPodPyTorchJob", timeout=15_000)
        expect(row).to_contain_text(TYPE)
        shot(page, "35-monitoring-live-job")
        audit(page, "Monitoring with a job pushed live")
        objects.delete_namespaced_custom_object(
            training_manifests.GROUP, training_manifests.VERSION, "default", training_manifests.PLURAL, "live-job"
        )
    expect(row).to_have_count(0, timeout=15_000)
    expect(page.locator(f"#jobs tr[data-job={JOB}]")).to_have_count(1)
    assert table_reads == [], table_reads
    assert not page.page_errors, page.page_errors


def test_the_header_bell_counts_open_alerts_and_lists_them(page: Any, served: Served, tmp_path: Any) -> None:
    from kubernetes import client as k8s

    with served.api() as api:  # the crash-loop rule opens at once (its default waits an hour)
        ref = api.post("/api/v1/alerts/rules", json={"rules": {"pod_crash_looping": {"minutes": 0}}}).json()
        assert wait_terminal(api, ref["operationId"])["status"] == "SUCCEEDED"
    with served.kube_api(tmp_path) as api_client:
        k8s.CoreV1Api(api_client).create_namespaced_pod("default", {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "crasher", "annotations": {"twin.instantstart.io/fail": "true"}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}})
    page.goto(served.url + "/#/monitoring")
    bell = page.locator("#alerts-bell")
    expect(bell).to_have_accessible_name(re.compile(r"\d+\s+open alerts"))
    expect(page.locator("#alerts-count")).not_to_have_text("0", timeout=40_000)  # the bell polls every 15 s
    bell.click()
    expect(bell).to_have_attribute("aria-expanded", "true")
    panel = page.get_by_role("region", name="Open alerts")
    expect(panel).to_contain_text("pod_crash_looping")
    expect(panel).to_contain_text("pod default/crasher is crash-looping")
    shot(page, "36-alerts-bell")
    audit(page, "the alerts bell opened")
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    expect(bell).to_be_focused()
    assert not page.page_errors, page.page_errors
