"""KEDA on the router's metric, at controller level: the SGLang router counts the requests it has in flight
(sgl_router_running_requests, as the real router exports it), KEDA's prometheus trigger is evaluated over the
pods' /metrics, and the workers (never the router) scale up when the load rises and back down once it has
fallen and the HPA's stabilization window has passed, all on the twin clock."""

from __future__ import annotations

import json
from typing import Any

from hyperpod_twin.sim.plugin import install_crds
from instantstart.manifests import inference as inference_manifests
from instantstart.manifests import router as router_manifests
from tests.support.sim import SimCluster

WORKERS = "chat"
ROUTER = "chat-router"


def _objects() -> list[dict[str, Any]]:
    """What inference_deploy_container and inference_router_deploy apply (the control plane's own builders)."""
    words = inference_manifests.tokens("python3 -m sglang.launch_server --model-path Qwen/Qwen3-0.6B")
    engine = inference_manifests.engine_of(words)
    spec = inference_manifests.ServerSpec.model_validate(
        dict(
            name=WORKERS,
            namespace="default",
            engine=engine.name,
            command=inference_manifests.with_port(words, engine, 30000),
            image=engine.image,
            gpu_count=1,
            replicas=2,
            instance_types=["ml.g5.12xlarge"],
            port=30000,
            service_type="clusterip",
            model="Qwen/Qwen3-0.6B",
            token_secret=None,
            s3_claim=None,
        )
    )
    router = router_manifests.RouterSpec(name=ROUTER, namespace="default", workers=WORKERS, worker_port=30000,
                          policy="cache_aware", image=router_manifests.ROUTER_IMAGE, model="Qwen/Qwen3-0.6B")
    routed = [o for o in router_manifests.objects(router) if o["kind"] in ("Deployment", "Service")]
    return [
        inference_manifests.deployment(spec),
        inference_manifests.service(spec, load_balancer_controller=False),
        *routed,
    ]


def _scaled_object(threshold: int, window: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{WORKERS}-scaler", "namespace": "default"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": WORKERS},
            "minReplicaCount": 2, "maxReplicaCount": 4, "pollingInterval": 5, "cooldownPeriod": 30,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {
                "scaleDown": {"stabilizationWindowSeconds": window}}}},
            "triggers": [{"type": "prometheus", "metadata": {
                "serverAddress": "http://prometheus.monitoring:9090",
                "query": router_manifests.load_query(ROUTER, "default"), "threshold": str(threshold)}}],
        },
    }


def test_keda_scales_the_workers_on_the_routers_running_requests_and_back(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "keda")
    cluster.add_node("i-0aaaaaaaaaaaaaaa1", "ml.g5.12xlarge")  # 4 GPUs
    cluster.add_node("i-0aaaaaaaaaaaaaaa2", "ml.m5.4xlarge", group="cpu")
    for obj in _objects():
        cluster.create("apps" if obj["kind"] == "Deployment" else "", f"{obj['kind'].lower()}s", obj)
    cluster.advance(10)
    [router_pod] = [
        p for p in cluster.list("", "pods") if p["metadata"]["labels"][inference_manifests.LABEL_APP] == ROUTER
    ]
    router = cluster.sim.runtime.pod_http.lookup(
        "default", router_pod["metadata"]["name"], router_manifests.ROUTER_PORT
    )
    metrics_port = cluster.sim.runtime.pod_http.lookup(
        "default", router_pod["metadata"]["name"], router_manifests.METRICS_PORT
    )
    assert router is not None and metrics_port is router
    cluster.sim.config.decode_seconds_per_token = 1.0  # a slow model: each answer is in flight for ~20 twin s

    cluster.create("keda.sh", "scaledobjects", _scaled_object(threshold=2, window=60))
    cluster.advance(6)
    assert cluster.get("apps", "deployments", WORKERS)["spec"]["replicas"] == 2  # no load: min
    assert cluster.get("apps", "deployments", ROUTER)["spec"]["replicas"] == 1

    body = json.dumps({"messages": [{"role": "user", "content": "tell me a story"}], "max_tokens": 64}).encode()
    for _ in range(7):
        assert router("POST", "/v1/chat/completions", "", {}, body).status == 200
    exposed = router("GET", "/metrics", "", {}, b"").body.decode()
    running = [line for line in exposed.splitlines() if line.startswith("sgl_router_running_requests{")]
    assert len(running) == 2 and sum(float(line.split()[-1]) for line in running) == 7  # both workers got some
    cluster.advance(6)  # KEDA's next poll: ceil(7 / 2) = 4, the maximum
    assert cluster.get("apps", "deployments", WORKERS)["spec"]["replicas"] == 4
    so = cluster.get("keda.sh", "scaledobjects", f"{WORKERS}-scaler")
    assert {c["type"]: c["status"] for c in so["status"]["conditions"]}["Active"] == "True"
    assert cluster.get("apps", "deployments", ROUTER)["spec"]["replicas"] == 1  # the router never scales

    cluster.advance(30)  # the answers are done: the metric is 0, but the stabilization window holds 4
    assert "sgl_router_running_requests" in router("GET", "/metrics", "", {}, b"").body.decode()
    assert cluster.get("apps", "deployments", WORKERS)["spec"]["replicas"] == 4
    cluster.advance(40)  # the window has passed since the last high recommendation
    assert cluster.get("apps", "deployments", WORKERS)["spec"]["replicas"] == 2
    events = [e["reason"] for e in cluster.list("", "events") if e["involvedObject"]["kind"] == "ScaledObject"]
    assert "KEDAScaleTargetActivated" in events


def test_keda_reports_a_query_outside_the_twins_promql(cluster: SimCluster) -> None:
    install_crds(cluster.sim, "keda")
    cluster.add_node("i-0aaaaaaaaaaaaaaa3", "ml.g5.12xlarge")
    for obj in _objects():
        cluster.create("apps" if obj["kind"] == "Deployment" else "", f"{obj['kind'].lower()}s", obj)
    cluster.advance(10)
    so = _scaled_object(threshold=2, window=60)
    so["spec"]["triggers"][0]["metadata"]["query"] = "rate(sgl_router_processed_requests_total[1m])"
    cluster.create("keda.sh", "scaledobjects", so)
    cluster.advance(6)
    assert cluster.get("apps", "deployments", WORKERS)["spec"]["replicas"] == 2
    failed = [e for e in cluster.list("", "events") if e["reason"] == "KEDAScalerFailed"]
    assert failed and "sum/avg/max/min/count" in failed[0]["message"]
