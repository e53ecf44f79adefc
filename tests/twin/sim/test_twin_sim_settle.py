"""Every controller settles: once the world is steady, time passing and a full resync write nothing."""

from __future__ import annotations

import pathlib
from typing import Any

import yaml

import hyperpod_twin
from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import addons
from hyperpod_twin.sim.plugin import install_crds
from tests.support.sim import SERVE_CONFIG, SimCluster, head_template, hpjob, pod_spec, pytorchjob

LONG = {"twin.instantstart.io/run-seconds": "100000"}


def _chart_crds(cluster: SimCluster, *paths: str) -> None:
    root = pathlib.Path(hyperpod_twin.__file__).parent / "charts"
    for path in paths:
        cluster.create("apiextensions.k8s.io", "customresourcedefinitions", yaml.safe_load((root / path).read_text()))


def _everything(cluster: SimCluster) -> None:
    for bundle in ("training-operator", "inference-operator", "cert-manager", "keda"):
        install_crds(cluster.sim, bundle)
    _chart_crds(
        cluster,
        "hyperpod-dependencies/crds/kubeflow.org_pytorchjobs.yaml",
        "kuberay-operator/crds/ray.io_rayclusters.yaml",
        "kuberay-operator/crds/ray.io_rayjobs.yaml",
        "kuberay-operator/crds/ray.io_rayservices.yaml",
    )
    for i in range(3):
        cluster.add_node(f"i-0settle00000000{i}", "ml.p5.48xlarge")
    labels = {"app": "web"}
    template: dict[str, Any] = {"metadata": {"labels": labels}, "spec": pod_spec()}
    cluster.create(
        "apps",
        "deployments",
        {
            "metadata": {"name": "web"},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template},
        },
    )
    cluster.create("", "services", {"metadata": {"name": "web"}, "spec": {"selector": labels, "ports": [{"port": 80}]}})
    cluster.create(
        "apps",
        "daemonsets",
        {
            "metadata": {"name": "agent"},
            "spec": {
                "selector": {"matchLabels": {"a": "b"}},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": pod_spec()},
            },
        },
    )
    cluster.create(
        "apps",
        "statefulsets",
        {
            "metadata": {"name": "db"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"s": "db"}},
                "template": {"metadata": {"labels": {"s": "db"}}, "spec": pod_spec()},
            },
        },
    )
    cluster.create(
        "batch",
        "jobs",
        {"metadata": {"name": "done"}, "spec": {"template": {"spec": pod_spec(0, restartPolicy="Never")}}},
    )
    job = hpjob("train", 1)
    job["spec"]["replicaSpecs"][0]["template"]["metadata"]["annotations"] = LONG
    cluster.create("sagemaker.amazonaws.com", "hyperpodpytorchjobs", job)
    ptj = pytorchjob("ptj", 1)
    for replica in ptj["spec"]["pytorchReplicaSpecs"].values():
        replica["template"]["metadata"]["annotations"] = LONG
    cluster.create("kubeflow.org", "pytorchjobs", ptj)
    cluster.create(
        "inference.sagemaker.aws.amazon.com",
        "inferenceendpointconfigs",
        {
            "metadata": {"name": "m"},
            "spec": {
                "modelName": "m",
                "modelSourceConfig": {"modelSourceType": "s3"},
                "worker": {
                    "image": "vllm/vllm-openai",
                    "modelInvocationPort": {"containerPort": 8000},
                    "resources": {},
                },
            },
        },
    )
    cluster.create(
        "keda.sh",
        "scaledobjects",
        {
            "metadata": {"name": "web", "annotations": {"twin.instantstart.io/metric-value": "5"}},
            "spec": {
                "scaleTargetRef": {"name": "web"},
                "minReplicaCount": 1,
                "maxReplicaCount": 3,
                "triggers": [{"type": "prometheus", "metadata": {"threshold": "10"}}],
            },
        },
    )
    cluster.create("cert-manager.io", "issuers", {"metadata": {"name": "self"}, "spec": {"selfSigned": {}}})
    cluster.create(
        "cert-manager.io",
        "certificates",
        {"metadata": {"name": "c"}, "spec": {"secretName": "c-tls", "issuerRef": {"name": "self"}}},
    )
    cluster_spec = {
        "headGroupSpec": {"rayStartParams": {}, "template": head_template()},
        "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "rayStartParams": {}, "template": head_template()}],
    }
    cluster.create("ray.io", "rayclusters", {"metadata": {"name": "rc"}, "spec": cluster_spec})
    cluster.create(
        "ray.io",
        "rayjobs",
        {
            "metadata": {"name": "rj", "annotations": LONG},
            "spec": {"entrypoint": "python x.py", "rayClusterSpec": cluster_spec},
        },
    )
    cluster.create(
        "ray.io",
        "rayservices",
        {"metadata": {"name": "rs"}, "spec": {"serveConfigV2": SERVE_CONFIG, "rayClusterConfig": cluster_spec}},
    )
    cluster.sim.run(lambda: addons.install(cluster.sim, "metrics-server"))
    install_crds(cluster.sim, "karpenter")
    group = {"InstanceGroupName": "gpu", "InstanceType": "ml.p5.48xlarge", "CurrentCount": 3, "TargetCount": 3}
    cluster.sim.extra["hyperpod_cluster"] = {"ClusterName": "hp-test", "InstanceGroups": [group]}
    cluster.create(
        "karpenter.sagemaker.amazonaws.com",
        "hyperpodnodeclasses",
        {"metadata": {"name": "nc"}, "spec": {"instanceGroups": ["gpu"]}},
    )
    ref = {"group": "karpenter.sagemaker.amazonaws.com", "kind": "HyperpodNodeClass", "name": "nc"}
    cluster.create(
        "karpenter.sh",
        "nodepools",
        {
            "metadata": {"name": "np"},
            "spec": {"template": {"spec": {"nodeClassRef": ref}}, "disruption": {"consolidateAfter": "Never"}},
        },
    )


def test_controllers_write_nothing_once_settled(cluster: SimCluster) -> None:
    _everything(cluster)
    cluster.advance(60)  # long enough for pods scaled away to finish their 30 s grace period too
    writes: list[str] = []

    def record(event: WatchEvent) -> None:
        if event.rtype.plural != "events":
            writes.append(f"{event.type} {event.rtype.plural}/{event.object['metadata']['name']}")

    cluster.store.add_listener(record)
    cluster.advance(7)  # time passes: nothing due changes anything
    for controller in cluster.sim.controllers:
        for key in controller.resync_keys():
            cluster.sim.enqueue(controller, key)
    cluster.sim.kick()
    assert writes == []
    # Sanity: the world really is busy (so "nothing written" means settled, not idle).
    phases = [p["status"]["phase"] for p in cluster.list("", "pods")]
    assert len(phases) >= 12 and set(phases) <= {"Running", "Succeeded"}
    assert all(n["metadata"]["labels"]["karpenter.sh/nodepool"] == "np" for n in cluster.list("", "nodes"))
    assert len(cluster.list("metrics.k8s.io", "nodes")) == 3 and cluster.list("metrics.k8s.io", "pods")
    claims = cluster.list("karpenter.sh", "nodeclaims")
    assert len(claims) == 3 and all(c["status"]["nodeName"] == c["metadata"]["name"] for c in claims)
