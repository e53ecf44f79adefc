"""The Kubernetes upgrade card in a real browser against `instantstart serve --twin`: the plan of a 1.32 cluster
names kube-proxy's incompatible version and the one to move to, the upgrade is confirmed and followed to the end,
and axe-core finds no WCAG 2.0/2.1 A or AA violation with the plan shown."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot, wait_op
from tests.support.flows import make_eks

pytestmark = pytest.mark.e2e


def test_upgrade_card_plans_and_upgrades_the_active_cluster(page: Any, served: Served) -> None:
    with served.api() as api:
        make_eks(api, "webup")
    eks = served.aws("eks")
    eks.create_addon(clusterName="eks-cluster-webup", addonName="kube-proxy", addonVersion="v1.32.6-eksbuild.8")
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator("#active-cluster")).to_have_value("webup")
    card = page.locator("#upgrade")
    card.get_by_role("button", name="Plan the next version").click()
    row = card.locator("#upgrade-plan tr", has_text="kube-proxy")
    expect(row).to_contain_text("v1.32.6-eksbuild.8")
    expect(row).to_contain_text("v1.33.3-eksbuild.4")
    expect(card).to_contain_text("Nothing blocks the upgrade.")
    shot(page, "upgrade-plan")
    audit(page, "Cluster page with the upgrade plan")
    card.get_by_role("button", name="Upgrade to 1.33…").click()
    page.get_by_role("dialog").get_by_role("button", name="Upgrade").click()
    page.wait_for_url("**/#/clusters/*")
    operation_id = page.url.rsplit("/", 1)[-1]
    view = wait_op(served, operation_id)
    assert view["kind"] == "cluster_upgrade" and view["status"] == "SUCCEEDED", view
    assert eks.describe_cluster(name="eks-cluster-webup")["cluster"]["version"] == "1.33"
    assert eks.describe_addon(clusterName="eks-cluster-webup", addonName="kube-proxy")["addon"][
        "addonVersion"] == "v1.33.3-eksbuild.4"
    assert not page.page_errors, page.page_errors
