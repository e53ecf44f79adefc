"""The Storage & Models page in a real browser against `instantstart serve --twin`: the cluster's claims, a second
S3 claim added through the form (half-typed input in the other forms kept across the redraw that follows), its
contents browsed folder by folder, an FSx form error shown beside its field,
a gated model downloaded with live progress (the token never kept in the page), the model in the list; every
state passes axe-core's WCAG 2.0/2.1 A and AA rules."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from playwright.sync_api import expect

from hyperpod_twin.sim.hf_hub import GATED_TOKEN, HUB
from tests.support.browser import Served, audit, shot, wait_op

pytestmark = pytest.mark.e2e

TAG = "webst"
SLOW = "twin-org/slow-llama"


def test_storage_and_models_page(page: Any, served: Served) -> None:
    with served.api() as api:
        ref = api.post("/api/v1/clusters", json={"clusterTag": TAG, "instanceType": "ml.g6.4xlarge",
                                                 "instanceCount": 1, "availabilityZone": "us-west-2c"}).json()
    assert wait_op(served, ref["operationId"])["status"] == "SUCCEEDED"

    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(f'#clusters tr[data-cluster="{TAG}"]')).to_be_visible()  # the first page has drawn
    page.get_by_role("link", name="Storage & Models").click()
    # The pipeline's claim on the project bucket.
    expect(page.locator('#claims tr[data-claim="s3-claim"]')).to_contain_text("Bound")
    hub = httpx.get(served.twin_url + "/_twin/health").json()["hub_url"]  # serve --twin uses the twin's hub
    expect(page.locator("#hub-endpoint")).to_have_text(hub)
    audit(page, "Storage & Models with the pipeline's claim")

    # Half-typed input in the other forms survives the redraw that follows an operation.
    page.locator("#add-fsx").get_by_label("Name").fill("fsx-half")
    page.locator("#add-fsx").get_by_label("Storage type").select_option("INTELLIGENT_TIERING")
    page.locator("#download").get_by_label("Model id").fill("twin-org/sl")

    # A second S3 claim with a prefix, through the form: its operation's progress, then the row.
    form = page.locator("#add-s3")
    form.get_by_label("Name").fill("team-b")
    form.get_by_label("Prefix").fill("teams/b/")
    form.get_by_role("button", name="Add S3 volume").click()
    panel = page.locator("#storage-op .progress-panel")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=60_000)
    row = page.locator('#claims tr[data-claim="team-b"]')
    expect(row).to_contain_text("teams/b/")
    expect(page.locator("#model-claim option", has_text="team-b")).to_have_count(1)  # the models card redrew too
    expect(page.locator("#add-fsx").get_by_label("Name")).to_have_value("fsx-half")
    expect(page.locator("#add-fsx").get_by_label("Storage type")).to_have_value("INTELLIGENT_TIERING")
    expect(page.locator("#download").get_by_label("Model id")).to_have_value("twin-org/sl")
    expect(form.get_by_label("Name")).to_have_value("")  # the submitted form starts afresh
    page.locator("#add-fsx").get_by_label("Storage type").select_option("SSD")
    with served.api() as api:
        op = api.get(f"/api/v1/operations/{panel.get_attribute('data-operation')}").json()
    assert op["kind"] == "s3_storage_create" and op["params"]["storage"]["prefix"] == f"clusters/{TAG}/data/teams/b/"

    # FSx: a bad throughput is refused, the API's message beside the field.
    fsx = page.locator("#add-fsx")
    fsx.get_by_label("Throughput (MB/s/TiB)").fill("300")
    fsx.get_by_role("button", name="Add FSx volume").click()
    error = page.locator('#add-fsx .field-error[data-for="perUnitStorageThroughput"]')
    expect(error).to_contain_text("125, 250, 500, 1000")
    expect(fsx.get_by_label("Throughput (MB/s/TiB)")).to_have_attribute("aria-invalid", "true")
    shot(page, "20-storage-forms")
    audit(page, "Storage & Models with an FSx field error")

    # A gated model downloaded into s3-claim with live progress; the token field is emptied at once.
    download = page.locator("#download")
    download.get_by_label("Model id").fill(SLOW)
    download.get_by_label("Hugging Face token").fill(GATED_TOKEN)
    download.get_by_role("button", name="Download").click()
    expect(download.get_by_label("Hugging Face token")).to_have_value("")
    panel = page.locator("#storage-op .progress-panel")
    expect(panel.locator(".stage-msg")).to_contain_text("files", timeout=60_000)  # "1/4 files, … bytes copied"
    shot(page, "21-model-progress")
    audit(page, "Storage & Models with a download running")
    expect(panel).to_have_attribute("data-status", "SUCCEEDED", timeout=120_000)
    files = len(HUB.repos[SLOW].revisions["main"])
    model = page.locator(f'#models tr[data-model="{SLOW}@main"]')
    expect(model).to_contain_text(str(files))
    assert GATED_TOKEN not in page.content()

    # Browse the claim: the models folder, then into it.
    page.locator('#claims tr[data-claim="s3-claim"]').get_by_role("button", name="Browse s3-claim").click()
    browser = page.locator("#browser")
    browser.get_by_role("button", name="📁 models/").click()
    expect(browser.locator('tr[data-path="models/twin-org/"]')).to_be_visible()
    browser.get_by_role("button", name="📁 models/twin-org/").click()
    browser.get_by_role("button", name="📁 models/twin-org/slow-llama/").click()
    browser.get_by_role("button", name="📁 models/twin-org/slow-llama/main/").click()
    expect(browser.locator('tr[data-path="models/twin-org/slow-llama/main/manifest.json"]')).to_be_visible()
    shot(page, "22-storage-browser")
    audit(page, "Storage & Models browsing a claim")

    # Delete the second claim (nothing mounts it).
    page.locator('#claims tr[data-claim="team-b"]').get_by_role("button", name="Delete team-b").click()
    page.get_by_role("button", name="Delete", exact=True).click()
    expect(page.locator('#claims tr[data-claim="team-b"]')).to_have_count(0)
    assert not page.page_errors, page.page_errors
