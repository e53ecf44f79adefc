"""inference_list_services tells model servers from the SGLang routers in front of them by the labels the
manifests give each (kind_of, on the objects and on their watched projection), and lists nothing else: not a
model pool's Service, not a Deployment it did not make."""

from __future__ import annotations

from instantstart.manifests import inference as mi
from instantstart.manifests import router as router_manifests
from instantstart.services.base.watch.projections import deployment_view
from instantstart.services.inference.services import kind_of


def test_servers_and_routers_by_their_labels_nothing_else() -> None:
    spec = mi.ServerSpec(name="llm", namespace="default", engine="vllm", command=["vllm", "serve", "org/m"],
                         image="vllm/vllm-openai:v0.11.0", gpu_count=1, replicas=1, instance_types=["ml.g6.4xlarge"],
                         port=8000, service_type="ClusterIP", model="org/m", token_secret=None, s3_claim=None)
    assert kind_of(mi.deployment(spec)["metadata"]["labels"]) == "server"
    router = router_manifests.RouterSpec(name="llm-router", namespace="default", workers="llm", worker_port=8000,
                                         policy="cache_aware", image=router_manifests.ROUTER_IMAGE, model="org/m")
    [deployment] = [o for o in router_manifests.objects(router) if o["kind"] == "Deployment"]
    assert kind_of(deployment["metadata"]["labels"]) == "router"
    # The watched projection keeps what kind_of reads (the answer is served from the watches).
    assert kind_of(deployment_view(deployment)["labels"]) == "router"
    assert kind_of(deployment_view(mi.deployment(spec))["labels"]) == "server"
    # Labelled by this control plane but neither (a model pool's Service), or not labelled by it at all.
    pool = {mi.LABEL_APP: "pool", mi.LABEL_MANAGED: mi.MANAGED_BY, mi.LABEL_COMPONENT: mi.POOL_SERVICE}
    assert kind_of(pool) is None
    assert kind_of({mi.LABEL_ENGINE: "vllm"}) is None
    assert kind_of({mi.LABEL_COMPONENT: router_manifests.COMPONENT}) is None
