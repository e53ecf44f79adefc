"""Fleet validation on the Monitoring page in a real browser against `instantstart serve --twin`: four ml.g5.12xlarge
nodes, one with a slow network and one without EFA; "Validate nodes" runs cluster_validate, follows its stages and
shows the per-node table (the straggler and the EFA-less node named, each with its fix) and the pair table.
axe-core finds no WCAG 2.0/2.1 A or AA violation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client as k8s
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.flows import make_hyperpod
from tests.support.servers import SSL_CONTEXT

pytestmark = pytest.mark.e2e

MPIJOB_CRD = Path(__file__).parents[2] / "src/hyperpod_twin/charts/hyperpod-dependencies/crds/kubeflow.org_mpijobs.yaml"


def test_validation_on_the_monitoring_page(page: Any, served: Served, tmp_path: Path) -> None:
    with served.api() as api:
        make_hyperpod(api, "webval", acceleratedInstanceType="ml.g5.12xlarge", acceleratedInstanceCount=4)
    with served.kube_api(tmp_path) as kube_api:
        nodes = sorted(n.metadata.name for n in k8s.CoreV1Api(kube_api).list_node().items)
        # The MPI operator's CRD, as the HyperPod dependencies chart installs it.
        k8s.ApiextensionsV1Api(kube_api).create_custom_resource_definition(yaml.safe_load(MPIJOB_CRD.read_text()))
    assert len(nodes) == 4
    _, slow, no_efa, _ = nodes
    for node, fault in ((slow, {"slow": True}), (no_efa, {"efa": False})):
        answer = httpx.post(f"{served.twin_url}/_twin/nodes/{node.removeprefix('hyperpod-')}/hardware", json=fault,
                            timeout=30, verify=SSL_CONTEXT)
        assert answer.status_code == 200, answer.text

    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#active-cluster")).to_have_value("webval")
    page.goto(served.url + "/#/monitoring")
    card = page.locator("#validation")
    expect(card).to_contain_text("No validation has run on this cluster yet.")
    card.get_by_role("button", name="Validate nodes").click()
    dialog = page.get_by_role("dialog", name="Validate the GPU nodes?")
    expect(dialog).to_contain_text("takes every GPU")
    audit(page, "Monitoring with the validation confirmation")
    dialog.get_by_role("button", name="Validate nodes").click()
    expect(card.locator(".progress-panel")).to_contain_text("cluster_validate")
    expect(card.locator("#validation-summary")).to_contain_text("2 of 4 nodes passed", timeout=120_000)
    expect(card.locator("tr[data-validated-node]")).to_have_count(4)
    straggler = card.locator(f'tr[data-validated-node="{slow}"]')
    expect(straggler).to_contain_text("straggler")
    expect(straggler).to_contain_text("hyperpod_node_reboot")
    missing = card.locator(f'tr[data-validated-node="{no_efa}"]')
    expect(missing).to_contain_text("missing")
    expect(missing).to_contain_text("hyperpod_node_replace")
    expect(card.locator('tr[data-verdict="passed"]')).to_have_count(2)
    expect(card.locator("tr[data-pair]")).to_have_count(5)  # four ring pairs and the all-node run
    expect(card.locator(f'tr[data-pair="{slow},{no_efa}"]')).to_contain_text("socket")
    shot(page, "35-monitoring-validation")
    audit(page, "Monitoring with a fleet validation")
    assert not page.page_errors, page.page_errors

    # A reload shows the newest validation of the cluster again.
    page.reload()
    expect(page.locator("#validation #validation-summary")).to_contain_text("2 of 4 nodes passed")
