"""The Inference page's actions in a real browser against `instantstart serve --twin`: a model server scaled, an
SGLang router put in front of it (listed with its kind, picked, scaled), KEDA autoscaling refused until KEDA is on,
a JumpStart model refused for a GPU type it does not support then deployed, that managed endpoint deleted, the
server undeployed (its router with it), warm pool workers bound to a service and released; MLflow configured from
the Training page; a viewer offered none of it. Every form is reached with Tab; axe-core finds no WCAG 2.0/2.1 A
or AA violation."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.support.browser import Served, audit, shot
from tests.support.flows import make_hyperpod
from tests.support.keyboard import tab_reaches_every_operation
from tests.support.waits import wait_terminal
from tests.support.web_session import sign_in, signed_in_as

pytestmark = pytest.mark.e2e

SERVER = "chatw"
ROUTER = f"{SERVER}-router"
LONG = 120_000  # an operation followed to its end in the browser


@pytest.fixture(scope="module")
def deployed(served: Served) -> Iterator[None]:
    """Two 1-GPU nodes, a vLLM model server on one of them, the inference operator (KEDA stays off)."""
    with served.api() as api:
        make_hyperpod(api, "webmg", acceleratedInstanceCount=2)
        ref = api.post("/api/v1/inference/deployments", json={
            "deploymentCommand": "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280", "gpuCount": 1,
            "deploymentName": SERVER}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
        ref = api.post("/api/v1/capacity/advanced-features", json={"inferenceOperator": {"enabled": True}}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"  # for JumpStart
    yield


def services(served: Served) -> dict[str, dict[str, Any]]:
    with served.api() as api:
        return {s["name"]: s for s in api.get("/api/v1/inference/services").json()["services"]}


def test_scale_route_and_autoscale_a_model_server(page: Any, served: Served, deployed: None) -> None:
    sign_in(page, served.url, served.token)
    page.get_by_role("link", name="Inference").click()
    expect(page.locator(f'#services tr[data-service="{SERVER}"]')).to_be_visible()
    manage = page.locator("#manage")
    manage.get_by_label("Model server").select_option(SERVER)
    expect(page.locator("#public-services")).to_contain_text("No model server is reachable from outside the cluster")
    audit(page, "Inference with the manage, JumpStart and public-services cards")
    tab_reaches_every_operation(page)

    # Replicas to 0: the server stays, its GPU is free.
    page.locator("#scale-form").get_by_label("Replicas").fill("0")
    page.locator("#scale-form").get_by_role("button", name="Scale").click()
    expect(page.locator("#scale-form-status")).to_contain_text("Done", timeout=LONG)
    assert services(served)[SERVER]["replicasDesired"] == 0

    # An SGLang router in front of it.
    page.locator("#router-form").get_by_label("Policy").select_option("round_robin")
    page.locator("#router-form").get_by_role("button", name="Deploy router").click()
    expect(page.locator("#router-form-status")).to_contain_text("Done", timeout=LONG)
    with served.api() as api:
        [routed] = api.get("/api/v1/operations", params={"kind": "inference_router_deploy"}).json()["operations"]
    assert routed["status"] == "SUCCEEDED" and routed["params"]["policy"] == "round_robin"
    assert routed["result"]["router"]["service"] == f"{SERVER}-router-service"

    # The router is listed with its kind and picked in the card: only what acts on a router is offered there,
    # and its replicas are scaled like a server's.
    listed = services(served)
    assert listed[ROUTER]["kind"] == "router" and listed[ROUTER]["engine"] == "sglang-router", listed[ROUTER]
    assert listed[SERVER]["kind"] == "server"
    manage.get_by_label("Model server").select_option(ROUTER)
    expect(manage.get_by_label("Model server").locator("option:checked")).to_have_text(f"{ROUTER} (router)")
    for hidden in ["#autoscale-form", "#router-form", "#pool-form"]:
        expect(page.locator(hidden)).to_be_hidden()
    page.locator("#scale-form").get_by_label("Replicas").fill("2")
    page.locator("#scale-form").get_by_role("button", name="Scale").click()
    expect(page.locator("#scale-form-status")).to_contain_text("Working")
    expect(page.locator("#scale-form-status")).to_contain_text("Done", timeout=LONG)
    assert services(served)[ROUTER]["replicasDesired"] == 2
    audit(page, "Inference with a router picked")
    manage.get_by_label("Model server").select_option(SERVER)
    expect(page.locator("#autoscale-form")).to_be_visible()

    # Autoscaling needs KEDA: the refusal names the feature to turn on, and the form keeps what was typed.
    autoscale = page.locator("#autoscale-form")
    autoscale.get_by_label("Prometheus URL").fill("http://prometheus.monitoring:9090")
    autoscale.get_by_label("Threshold").fill("7")
    autoscale.get_by_role("button", name="Apply autoscaling").click()
    expect(autoscale.locator(".form-error")).to_contain_text("KEDA")
    expect(autoscale.get_by_label("Threshold")).to_have_value("7")
    shot(page, "52-inference-manage")
    audit(page, "Inference with the autoscaling refusal")
    assert not page.page_errors, page.page_errors


def test_jumpstart_deploy_then_delete_the_managed_endpoint(page: Any, served: Served, deployed: None) -> None:
    form = page.locator("#jumpstart-form")
    form.get_by_label("JumpStart model id").fill("huggingface-llm-qwen2-5-7b-instruct")
    form.get_by_label("Instance type").fill("ml.g6.4xlarge")
    form.get_by_role("button", name="Deploy from JumpStart").click()
    expect(form.locator('.field-error[data-for="instanceType"]')).to_have_text("not supported by the model")
    expect(form.get_by_label("Instance type")).to_have_attribute("aria-invalid", "true")
    audit(page, "Inference with a JumpStart refusal")

    form.get_by_label("JumpStart model id").fill("deepseek-llm-r1-distill-qwen-1-5b")
    form.get_by_label("Name", exact=True).fill("ds-js")
    form.get_by_label("SageMaker endpoint name").fill("ds-js")
    form.get_by_role("button", name="Deploy from JumpStart").click()
    expect(page.locator("#jumpstart-form-status")).to_contain_text("Done", timeout=LONG)
    with served.api() as api:
        listed = {e["name"]: e for e in api.get("/api/v1/inference/managed").json()["endpoints"]}
    assert listed["ds-js"]["kind"] == "JumpStartModel"

    remove = page.locator("#managed-delete-form")
    expect(remove.get_by_label("Managed endpoint")).to_have_value("ds-js")
    remove.get_by_role("button", name="Delete…").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete endpoint").click()
    expect(page.locator("#managed-delete-form-status")).to_contain_text("Done", timeout=LONG)
    with served.api() as api:
        assert api.get("/api/v1/inference/managed").json()["count"] == 0
    assert not page.page_errors, page.page_errors


def test_undeploy_the_server(page: Any, served: Served, deployed: None) -> None:
    page.locator("#manage").get_by_label("Model server").select_option(SERVER)
    page.locator("#undeploy-form").get_by_role("button", name="Undeploy…").click()
    page.get_by_role("dialog").get_by_role("button", name="Undeploy").click()
    expect(page.locator("#undeploy-form-status")).to_contain_text("Done", timeout=LONG)
    assert not {SERVER, ROUTER} & set(services(served))  # its router went with it
    expect(page.locator(f'#services tr[data-service="{SERVER}"]')).to_have_count(0)
    assert not page.page_errors, page.page_errors


def test_bind_warm_pool_workers_to_a_service_and_release_them(page: Any, served: Served, deployed: None) -> None:
    with served.api() as api:
        ref = api.post("/api/v1/inference/deployments", json={
            "deploymentCommand": "vllm serve Qwen/Qwen3-0.6B --max-model-len 1280", "gpuCount": 1,
            "serviceType": "modelpool", "deploymentName": "pool"}).json()
        assert wait_terminal(api, ref["operationId"], timeout=240)["status"] == "SUCCEEDED"
    page.get_by_role("button", name="↻ Refresh").click()
    page.locator("#manage").get_by_label("Model server").select_option("pool")
    form = page.locator("#pool-form")
    form.get_by_label("Service", exact=True).fill("chat")
    form.get_by_label("Workers").fill("2")  # one warm worker only: refused, with the count it has
    form.get_by_role("button", name="Assign workers").click()
    expect(form.locator(".form-error")).to_contain_text("1 warm unassigned")
    form.get_by_label("Workers").fill("1")
    form.get_by_role("button", name="Assign workers").click()
    expect(page.locator("#pool-form-status")).to_contain_text("Done", timeout=LONG)
    with served.api() as api:
        [assigned] = api.get("/api/v1/operations", params={"kind": "inference_pool_assign"}).json()["operations"]
        assert assigned["status"] == "SUCCEEDED" and assigned["result"]["assign"]["moved"][0]["service"] == "chat"
    form.get_by_role("button", name="Release").click()
    expect(page.locator("#pool-form-status")).to_contain_text("Done", timeout=LONG)
    with served.api() as api:
        [released] = api.get("/api/v1/operations", params={"kind": "inference_pool_release"}).json()["operations"]
    assert released["status"] == "SUCCEEDED" and released["params"]["service"] == "chat"
    audit(page, "Inference after binding and releasing pool workers")
    assert not page.page_errors, page.page_errors


def test_mlflow_configured_from_the_training_page(page: Any, served: Served, deployed: None) -> None:
    page.get_by_role("link", name="Training").click()
    form = page.locator("#mlflow-form")
    form.get_by_label("Server name", exact=True).fill("not a name!")
    form.get_by_role("button", name="Set up MLflow").click()
    expect(form.locator('.field-error[data-for="trackingServerName"]')).to_be_visible()
    audit(page, "Training with the MLflow form's error")
    form.get_by_label("Server name", exact=True).fill("")
    form.get_by_role("button", name="Set up MLflow").click()
    expect(page.locator("#banner")).to_contain_text("mlflow_configure succeeded", timeout=LONG)
    with served.api() as api:
        found = api.get("/api/v1/operations", params={"kind": "mlflow_configure"}).json()["operations"]
    kinds = [o["kind"] for o in found]
    assert kinds == ["mlflow_configure"] and found[0]["status"] == "SUCCEEDED"
    shot(page, "53-training-mlflow")
    audit(page, "Training with MLflow configured")
    tab_reaches_every_operation(page)
    assert not page.page_errors, page.page_errors


def test_a_viewer_is_offered_no_inference_action(browser: Any, served: Served, deployed: None) -> None:
    with signed_in_as(browser, served, "iris", "viewer") as viewer:
        viewer.get_by_role("link", name="Inference").click()
        expect(viewer.locator("#public-services")).to_be_visible()  # reads are shown
        for form in ["#scale-form", "#autoscale-form", "#router-form", "#pool-form", "#undeploy-form",
                     "#managed-delete-form", "#jumpstart"]:
            expect(viewer.locator(form)).to_be_hidden()
        audit(viewer, "Inference as a viewer")
