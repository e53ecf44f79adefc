"""The simulator plugin on a bus: clusters start and stop, HyperPod events replay, add-ons bring CRDs,
a hand-set health label is reported back; plus rollouts and the SGLang router at controller level."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.store import ObjectStore
from hyperpod_twin.kube.types import bootstrap, builtin, core
from hyperpod_twin.sim.plugin import SimPlugin
from tests.support.sim import ARN, SimCluster, pod_spec


@pytest.fixture
def bus_env() -> Iterator[tuple[SimPlugin, EventBus, TwinClock, ClusterRuntime]]:
    bus = EventBus()
    clock = TwinClock(scale=0.0)
    plugin = SimPlugin(clock, bus)
    plugin.subscribe()
    store = ObjectStore()
    bootstrap(store)
    control = ControlPlane(store)
    runtime = ClusterRuntime("sim-test", ARN, store)
    yield plugin, bus, clock, runtime
    bus.publish("twin.reset")
    control.close()


def _node(instance_id: str, status: str = "Running") -> dict[str, Any]:
    return {
        "InstanceId": instance_id,
        "InstanceGroupName": "gpu",
        "InstanceType": "ml.p5.48xlarge",
        "InstanceStatus": {"Status": status},
        "Placement": {"AvailabilityZone": "us-west-2b"},
        "PrivatePrimaryIp": "10.1.2.3",
    }


def test_events_before_the_api_server_are_replayed_and_addons_bring_crds(
    bus_env: tuple[SimPlugin, EventBus, TwinClock, ClusterRuntime],
) -> None:
    plugin, bus, _, runtime = bus_env
    group = {"KubernetesConfig": {"Labels": {"team": "a"}}, "OnStartDeepHealthChecks": ["InstanceStress"]}
    bus.publish(
        "hyperpod.node.changed",
        cluster_name="hp",
        cluster_arn="arn:hp",
        eks_cluster_arn=ARN,
        node=_node("i-0abc"),
        instance_group=group,
    )
    bus.publish(
        "eks.addon.active",
        cluster_name="sim-test",
        cluster_arn=ARN,
        arn=ARN,
        addon_name="amazon-sagemaker-hyperpod-training-operator",
    )
    assert plugin.sim_for(ARN) is None
    bus.publish("kube.cluster.started", runtime=runtime)
    assert plugin.sim_for(ARN) is not None
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0abc")
    labels = node["metadata"]["labels"]
    assert labels["team"] == "a" and labels["sagemaker.amazonaws.com/deep-health-check-status"] == "Passed"
    assert (
        node["status"]["capacity"]["nvidia.com/gpu"] == "8"
        and node["status"]["capacity"]["vpc.amazonaws.com/efa"] == "32"
    )
    assert node["status"]["addresses"][0]["address"] == "10.1.2.3"
    assert runtime.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs") is not None
    bus.publish(
        "eks.addon.deleted",
        cluster_name="sim-test",
        cluster_arn=ARN,
        addon_name="amazon-sagemaker-hyperpod-training-operator",
        preserve=False,
    )
    assert runtime.store.find_type("sagemaker.amazonaws.com", "hyperpodpytorchjobs") is None
    bus.publish(
        "hyperpod.node.removed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN, instance_id="i-0abc"
    )
    assert runtime.store.list(core("nodes"))[0] == []
    bus.publish("kube.cluster.stopped", name="sim-test")
    assert plugin.sim_for(ARN) is None


def test_health_events_and_hand_set_labels(bus_env: tuple[SimPlugin, EventBus, TwinClock, ClusterRuntime]) -> None:
    _, bus, clock, runtime = bus_env
    reported: list[dict[str, Any]] = []
    bus.subscribe("kube.node.health_label", lambda **kw: reported.append(kw))
    bus.publish("kube.cluster.started", runtime=runtime)
    bus.publish(
        "hyperpod.node.changed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN, node=_node("i-0abc")
    )
    bus.publish(
        "hyperpod.node.health",
        cluster_name="hp",
        cluster_arn="arn:hp",
        eks_cluster_arn=ARN,
        instance_id="i-0abc",
        health_status="UnschedulablePendingReboot",
        reason="XID 48",
    )
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0abc")
    assert node["metadata"]["labels"]["sagemaker.amazonaws.com/fault-reasons"] == "XID_48"
    details = json.loads(node["metadata"]["annotations"]["sagemaker.amazonaws.com/fault-details"])
    assert details[-1]["faultReason"] == "XID 48"
    assert {
        "key": "sagemaker.amazonaws.com/node-health-status",
        "value": "Unschedulable",
        "effect": "NoSchedule",
    } in node["spec"]["taints"]
    assert reported == []  # the AWS side's own finding is not echoed back
    bus.publish(
        "hyperpod.node.health",
        cluster_name="hp",
        cluster_arn="arn:hp",
        eks_cluster_arn=ARN,
        instance_id="i-0abc",
        health_status="Schedulable",
    )
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0abc")
    assert not any(t["key"] == "sagemaker.amazonaws.com/node-health-status" for t in node["spec"]["taints"])
    # An operator labels the node by hand (kubectl label): taint, and the AWS side is told.
    node["metadata"]["labels"]["sagemaker.amazonaws.com/node-health-status"] = "UnschedulablePendingReplacement"
    runtime.store.update(core("nodes"), node)
    clock.run_due()
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0abc")
    assert any(t["key"] == "sagemaker.amazonaws.com/node-health-status" for t in node["spec"]["taints"])
    assert reported == [{"eks_cluster_arn": ARN, "instance_id": "i-0abc", "status": "UnschedulablePendingReplacement"}]


def test_rolling_update_replaces_the_replica_set(cluster: SimCluster) -> None:
    cluster.add_node("i-0aaaaaaaaaaaaaaa9", "ml.m5.4xlarge", group="cpu")
    labels = {"app": "web"}
    dep = {
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec()},
        },
    }
    cluster.create("apps", "deployments", dep)
    cluster.advance(4)
    first = {rs["metadata"]["name"] for rs in cluster.list("apps", "replicasets", "default")}
    current = cluster.get("apps", "deployments", "web")
    current["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:1.37"
    cluster.store.update(builtin("apps", "deployments"), current)
    cluster.advance(4)
    sets = {rs["metadata"]["name"]: rs for rs in cluster.list("apps", "replicasets", "default")}
    (new,) = set(sets) - first
    assert sets[new]["spec"]["replicas"] == 2 and all(sets[n]["spec"]["replicas"] == 0 for n in first)
    assert sets[new]["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
    pods = cluster.list("", "pods", "default")
    # The old ReplicaSet's pods are deleted with their grace period (30 s): Terminating, then gone.
    going = [p for p in pods if p["metadata"].get("deletionTimestamp")]
    assert len(going) == 2 and all(p["metadata"]["deletionGracePeriodSeconds"] == 30 for p in going)
    cluster.advance(31)
    pods = cluster.list("", "pods", "default")
    assert len(pods) == 2 and all(p["spec"]["containers"][0]["image"] == "busybox:1.37" for p in pods)
    status = cluster.get("apps", "deployments", "web")["status"]
    assert status["updatedReplicas"] == 2 and status["availableReplicas"] == 2


def test_sglang_router_forwards_to_discovered_workers(cluster: SimCluster) -> None:
    cluster.add_node("i-0aaaaaaaaaaaaaab1", "ml.g5.48xlarge")
    worker = {"app": "sglang-worker"}
    cluster.create(
        "apps",
        "deployments",
        {
            "metadata": {"name": "workers"},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": worker},
                "template": {
                    "metadata": {"labels": worker},
                    "spec": {
                        "containers": [
                            {
                                "name": "sglang",
                                "image": "lmsysorg/sglang:v0.5.0",
                                "command": [
                                    "python",
                                    "-m",
                                    "sglang.launch_server",
                                    "--model-path",
                                    "meta-llama/Llama-3.1-8B-Instruct",
                                    "--port",
                                    "30000",
                                ],
                            }
                        ]
                    },
                },
            },
        },
    )
    router_cmd = [
        "python",
        "-m",
        "sglang_router.launch_router",
        "--service-discovery",
        "--selector",
        "app=sglang-worker",
        "--service-discovery-port",
        "30000",
        "--policy",
        "round_robin",
    ]
    cluster.create(
        "",
        "pods",
        {
            "metadata": {"name": "router"},
            "spec": {
                "containers": [
                    {
                        "name": "router",
                        "image": "lmsysorg/sglang-router:v0.1.9",
                        "command": router_cmd,
                        "ports": [{"containerPort": 30000}],
                    }
                ]
            },
        },
    )
    cluster.advance(4)
    router = cluster.sim.runtime.pod_http.lookup("default", "router", 30000)
    assert router is not None
    assert router("GET", "/health", "", {}, b"").status == 200
    body = json.dumps({"messages": [{"role": "user", "content": "route me"}]}).encode()
    answer = json.loads(router("POST", "/v1/chat/completions", "", {}, body).body)
    assert (
        answer["model"] == "meta-llama/Llama-3.1-8B-Instruct"
        and "route me" in answer["choices"][0]["message"]["content"]
    )
    workers = json.loads(router("GET", "/workers", "", {}, b"").body)["urls"]
    assert len(workers) == 2


def test_deep_health_check_and_group_label_updates_follow_the_instance(
    bus_env: tuple[SimPlugin, EventBus, TwinClock, ClusterRuntime],
) -> None:
    _, bus, _, runtime = bus_env
    bus.publish("kube.cluster.started", runtime=runtime)
    group = {
        "KubernetesConfig": {
            "Labels": {"team": "a"},
            "Taints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}],
        }
    }
    publish = {"cluster_name": "hp", "cluster_arn": "arn:hp", "eks_cluster_arn": ARN}
    bus.publish(
        "hyperpod.node.changed", **publish, node=_node("i-0dhc", "DeepHealthCheckInProgress"), instance_group=group
    )
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0dhc")
    labels = node["metadata"]["labels"]
    assert labels["sagemaker.amazonaws.com/deep-health-check-status"] == "InProgress"
    assert labels["sagemaker.amazonaws.com/node-health-status"] == "Unschedulable"
    assert {t["key"] for t in node["spec"]["taints"]} == {"gpu", "sagemaker.amazonaws.com/node-health-status"}
    group = {"KubernetesConfig": {"Labels": {"team": "b"}, "Taints": []}}
    bus.publish("hyperpod.node.changed", **publish, node=_node("i-0dhc"), instance_group=group)
    node = runtime.store.get(core("nodes"), "", "hyperpod-i-0dhc")
    labels = node["metadata"]["labels"]
    assert labels["sagemaker.amazonaws.com/deep-health-check-status"] == "Passed"
    assert labels["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
    assert labels["team"] == "b" and node["spec"]["taints"] == []
    # A later status event without the group's configuration keeps the labels applied so far.
    bus.publish("hyperpod.node.changed", **publish, node=_node("i-0dhc"))
    assert runtime.store.get(core("nodes"), "", "hyperpod-i-0dhc")["metadata"]["labels"]["team"] == "b"


def test_addon_workloads_and_csi_drivers_come_and_go(
    bus_env: tuple[SimPlugin, EventBus, TwinClock, ClusterRuntime],
) -> None:
    _, bus, clock, runtime = bus_env
    payload = {"cluster_name": "sim-test", "cluster_arn": ARN, "arn": ARN, "addon_version": "v1.7.0-eksbuild.1"}
    bus.publish("eks.addon.active", **payload, addon_name="aws-fsx-csi-driver", namespace="kube-system")
    bus.publish("kube.cluster.started", runtime=runtime)
    bus.publish(
        "hyperpod.node.changed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN, node=_node("i-0fsx")
    )
    assert runtime.store.get(builtin("storage.k8s.io", "csidrivers"), "", "fsx.csi.aws.com")
    controller = runtime.store.get(builtin("apps", "deployments"), "kube-system", "fsx-csi-controller")
    assert controller["spec"]["template"]["spec"]["containers"][0]["image"].endswith(
        "/eks/fsx-csi-controller:v1.7.0-eksbuild.1"
    )
    for _ in range(8):
        clock.advance(0.5)
    ds = runtime.store.get(builtin("apps", "daemonsets"), "kube-system", "fsx-csi-node")
    assert ds["status"]["numberReady"] == 1
    bus.publish(
        "eks.addon.active",
        **payload,
        addon_name="amazon-sagemaker-hyperpod-training-operator",
        namespace="aws-hyperpod",
    )
    assert runtime.store.get(core("namespaces"), "", "aws-hyperpod")
    assert runtime.store.get(builtin("apps", "deployments"), "aws-hyperpod", "hp-training-operator-controller-manager")
    bus.publish(
        "eks.addon.deleted", cluster_name="sim-test", cluster_arn=ARN, addon_name="aws-fsx-csi-driver", preserve=False
    )
    assert runtime.store.list(builtin("storage.k8s.io", "csidrivers"))[0] == []
    assert not [
        d for d in runtime.store.list(builtin("apps", "daemonsets"))[0] if d["metadata"]["name"] == "fsx-csi-node"
    ]
    bus.publish("eks.addon.active", **payload, addon_name="metrics-server", namespace="kube-system")
    node_type = runtime.store.find_type("metrics.k8s.io", "nodes")
    assert node_type is not None
    assert runtime.store.get(node_type, "", "hyperpod-i-0fsx")["usage"]["cpu"].endswith("n")
    bus.publish("eks.addon.deleted", cluster_name="sim-test", cluster_arn=ARN, addon_name="metrics-server")
    assert runtime.store.find_type("metrics.k8s.io", "nodes") is None
