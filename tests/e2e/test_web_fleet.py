"""The Fleet page and the Monitoring page's cluster switcher in a real browser against `instantstart serve --twin`
with two clusters: each cluster's health, watch state and figures; "Read now" resumes a cluster's watches; the
switcher shows another cluster. axe-core finds no WCAG 2.0/2.1 A or AA violation on either."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.flows import make_eks

pytestmark = pytest.mark.e2e

NODES = {"fleeta": 2, "fleetb": 3}


def node(tag: str, i: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"hyperpod-i-{tag}{i:04d}", "labels": {
        "node.kubernetes.io/instance-type": "ml.g6.12xlarge", "sagemaker.amazonaws.com/instance-group-name": "g6",
        "sagemaker.amazonaws.com/node-health-status": "Schedulable"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}], "allocatable": {"nvidia.com/gpu": "4"}}}


def test_setup_two_clusters_with_nodes(page: Any, served: Served) -> None:
    with served.api() as api:
        for tag, count in NODES.items():
            make_eks(api, tag)
            made = httpx.post(f"{served.twin_url}/_twin/kube/eks-cluster-{tag}/nodes/create",
                              json={"nodes": [node(tag, i) for i in range(count)]}, timeout=60)
            assert made.status_code == 200, made.text
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#active-cluster")).to_have_value("fleetb")


def test_the_fleet_page_shows_each_clusters_health_and_reads_one_on_demand(page: Any, served: Served) -> None:
    page.get_by_role("link", name="Fleet").click()
    expect(page.locator("#fleet-count")).to_contain_text("2 clusters")
    row = page.locator("#fleet tr[data-cluster=fleeta]")
    expect(row).to_contain_text("unwatched")  # nobody read fleeta's Kubernetes state yet
    row.get_by_role("button", name="Read now: fleeta").click()
    expect(page.locator("#fleet-note")).to_contain_text("fleeta: 2 nodes")
    expect(row).to_contain_text("live")
    expect(row).to_contain_text("2/2")
    expect(row.locator("td").nth(7)).to_have_text("8")  # GPUs free: 2 nodes x 4
    expect(page.locator("#fleet-totals")).to_contain_text("GPUs free")
    shot(page, "60-fleet")
    audit(page, "Fleet")


def test_the_monitoring_switcher_shows_another_cluster(page: Any, served: Served) -> None:
    page.locator("#fleet tr[data-cluster=fleetb]").get_by_role("button", name="Monitor fleetb").click()
    expect(page).to_have_url(f"{served.url}/#/monitoring")
    expect(page.locator("#summary h1")).to_contain_text("fleetb")
    switcher = page.get_by_label("Cluster shown")
    expect(switcher).to_have_value("fleetb")
    switcher.select_option("fleeta")
    expect(page.locator("#active-cluster")).to_have_value("fleeta", timeout=60_000)
    expect(page.locator("#summary h1")).to_contain_text("fleeta")
    expect(page.locator("#nodes-count")).to_have_text("2 of 2")
    shot(page, "61-monitoring-switcher")
    audit(page, "Monitoring with the cluster switcher")
    assert not page.page_errors, page.page_errors
