"""The Inference page in a real browser against `instantstart serve --twin`: the free GPUs beside the GPU count,
the API's refusal beside the field, deploy from the form until Ready, the model listed, test the model and see
the answer, the managed form's lint live; axe-core finds no WCAG 2.0/2.1 A or AA violation on the page."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.flows import make_hyperpod

pytestmark = pytest.mark.e2e


def test_deploy_from_the_form_then_test_the_model(page: Any, served: Served) -> None:
    with served.api() as api:
        make_hyperpod(api, "webinf")  # one ml.g6.4xlarge node: 1 GPU
    page.goto(served.url + "/")
    page.get_by_label("API token").fill(served.token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("link", name="Inference").click()
    expect(page.locator("#free-gpus")).to_have_text("Free GPUs: ml.g6.4xlarge: 1 of 1")
    expect(page.locator("#services")).to_contain_text("No model servers yet")
    audit(page, "Inference, nothing deployed")

    # The GPU count is asked, never inferred: TP 2 on 1 GPU is the API's refusal, shown beside the field.
    form = page.locator("#deploy form")
    command = "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280 --tensor-parallel-size 2"
    form.locator("[name=deploymentCommand]").fill(command)
    form.locator("[name=gpuCount]").fill("1")
    form.locator("[name=deploymentName]").fill("qwen-web")
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator('.field-error[data-for="gpuCount"]')).to_contain_text("tensor parallel 2")
    expect(form.locator("[name=gpuCount]")).to_have_attribute("aria-invalid", "true")
    audit(page, "Inference deploy form with an error")

    form.locator("[name=engine]").select_option("vllm")  # back to the template: TP 1
    # A load balancer without source ranges is refused, beside the field that asks for them.
    form.locator("[name=serviceType]").select_option("external")
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator('.field-error[data-for="sourceRanges"]')).to_contain_text("required with serviceType external")
    form.locator("[name=serviceType]").select_option("clusterip")
    form.locator("[name=deploymentName]").fill("qwen-web")
    page.get_by_role("button", name="Deploy", exact=True).click()
    expect(page.locator("#deploy-progress")).to_contain_text("qwen-web is ready", timeout=120_000)
    row = page.locator('#services tr[data-service="qwen-web"]')
    expect(row.locator(".ready")).to_have_text("1/1")
    expect(row).to_contain_text("Qwen/Qwen3-0.6B")
    with served.api() as api:
        listed = api.get("/api/v1/inference/services").json()
    assert [s["name"] for s in listed["services"]] == ["qwen-web"]

    call = page.locator("#call form")
    expect(call.locator("[name=service_name]")).to_have_value("qwen-web")
    call.locator("[name=prompt]").fill("Say hello from the browser")
    page.get_by_role("button", name="Send").click()
    expect(page.locator("#answer .answer")).to_contain_text("Say hello from the browser")
    expect(page.locator("#answer")).to_contain_text("via service-proxy")
    shot(page, "20-inference-answer")
    audit(page, "Inference with a model and its answer")

    # The managed form lints as it changes: a port the engine does not listen on is IEC001, with its fix.
    managed = page.locator("#managed form")
    expect(page.locator("#managed-lint")).to_contain_text("Every rule passes.")
    managed.locator("[name=invocationPort]").fill("8080")
    finding = page.locator('#managed-lint tr[data-code="IEC001"]')
    expect(finding).to_contain_text("vllm listens on 8000, but invocationPort is 8080")
    managed.locator("[name=l2Backend]").select_option("redis")
    expect(page.locator('#managed-lint tr[data-code="IEC005"]')).to_contain_text("redis://")
    shot(page, "21-inference-managed-lint")
    audit(page, "Inference managed form with lint findings")
    assert not page.page_errors
