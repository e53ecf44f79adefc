"""HyperPod node events that reach the simulator out of order: a stale state never overrides a newer one.

The AWS side emits node events under its state lock but publishes them after releasing it, so two threads
(a CreateCluster request publishing every new node's Pending, the clock publishing their Running) can
deliver them in the opposite order. Under CPU starvation the request thread lagged so far behind the clock
that every node of a 2,000-node bench cluster ended NotReady ("instance is Pending") although each instance
was Running. Here the request thread is held deterministically after the first node's Pending while the
clock boots both nodes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from hyperpod_twin.aws.hyperpod_timings import NODE_BOOT
from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.kube.controllers import ControlPlane
from hyperpod_twin.kube.runtime import ClusterRuntime
from hyperpod_twin.kube.store import ObjectStore
from hyperpod_twin.kube.types import bootstrap
from hyperpod_twin.sim.plugin import SimPlugin
from hyperpod_twin.twin import Twin, TwinConfig
from tests.support.sim import ARN
from tests.support.twin_aws import Net, build_eks, build_network, group

EKS = "order-eks"


@pytest.fixture(scope="module")
def env() -> Iterator[tuple[Twin, Net, str]]:
    twin = Twin(TwinConfig(clock_scale=0.0)).start()  # frozen: only advance() moves twin time
    try:
        net = build_network(twin, "10.70")
        yield twin, net, build_eks(twin, net, EKS)
    finally:
        twin.stop()


def _nodes(twin: Twin) -> list[dict[str, Any]]:
    store: Any = twin.kube_runtimes[EKS].store  # type: ignore[attr-defined]
    nodes, _ = store.list(store.find_type("", "nodes"), None, None)
    return list(nodes)


def _ready(node: dict[str, Any]) -> str:
    return next(c["status"] for c in node["status"]["conditions"] if c["type"] == "Ready")


def test_pending_published_after_running_leaves_the_node_ready(env: tuple[Twin, Net, str]) -> None:
    twin, net, eks_arn = env
    held, release = threading.Event(), threading.Event()
    seen: list[str] = []

    def hold_request_thread(node: dict[str, Any], **_: Any) -> None:
        # Runs after the simulator's and the add-on view's handlers of the same event: the first node's
        # Pending is delivered, the second one's waits until the clock has booted both nodes.
        seen.append(node["InstanceStatus"]["Status"])
        if node["InstanceStatus"]["Status"] == "Pending" and not held.is_set():
            held.set()
            release.wait(30)

    twin.bus.subscribe("hyperpod.node.changed", hold_request_thread)
    sm: Any = twin.boto3_client("sagemaker")
    subnets = {"Subnets": [net.compute["us-west-2a"]], "SecurityGroupIds": [net.sg]}
    errors: list[BaseException] = []

    def create() -> None:
        try:
            sm.create_cluster(ClusterName="order-hp", Orchestrator={"Eks": {"ClusterArn": eks_arn}},
                              InstanceGroups=[group("gpu", "ml.g5.12xlarge", 2)], VpcConfig=subnets)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    request = threading.Thread(target=create)
    request.start()
    try:
        assert held.wait(60), "CreateCluster never published a Pending node event"
        twin.clock.advance(NODE_BOOT + 1)  # the clock boots both nodes in this thread: Running overtakes Pending
        assert seen.count("Running") == 2
        assert sorted(_ready(n) for n in _nodes(twin)) == ["True", "True"]
    finally:
        release.set()
        request.join(30)
    assert not errors and not request.is_alive()
    assert seen.count("Pending") == 2  # the stale Pending of the second node was delivered after its Running
    statuses = {s["InstanceId"]: s["InstanceStatus"]["Status"]
                for s in sm.list_cluster_nodes(ClusterName="order-hp")["ClusterNodeSummaries"]}
    assert sorted(statuses.values()) == ["Running", "Running"]
    nodes = {n["metadata"]["name"]: n for n in _nodes(twin)}
    assert sorted(nodes) == sorted(f"hyperpod-{i}" for i in statuses)
    for name, node in nodes.items():
        assert _ready(node) == "True", f"{name} went NotReady on a stale event: {node['status']['conditions']}"
        taints = {t["key"] for t in node["spec"].get("taints") or []}
        assert "node.kubernetes.io/not-ready" not in taints
    # The EKS add-on view counts both instances as running too (its "no nodes" health follows the same events).
    running: set[str] = twin.aws.addons.nodes[eks_arn]
    assert running == set(statuses)


@pytest.fixture
def bus_env() -> Iterator[tuple[SimPlugin, EventBus, ClusterRuntime]]:
    bus = EventBus()
    plugin = SimPlugin(TwinClock(scale=0.0), bus)
    plugin.subscribe()
    store = ObjectStore()
    bootstrap(store)
    control = ControlPlane(store)
    yield plugin, bus, ClusterRuntime("sim-test", ARN, store)
    bus.publish("twin.reset")
    control.close()


def _changed(bus: EventBus, instance_id: str, status: str, sequence: int) -> None:
    node = {"InstanceId": instance_id, "InstanceGroupName": "gpu", "InstanceType": "ml.g5.12xlarge",
            "InstanceStatus": {"Status": status}, "Placement": {"AvailabilityZone": "us-west-2a"}}
    bus.publish("hyperpod.node.changed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN, node=node,
                sequence=sequence)


def test_stale_node_events_are_dropped_before_and_after_the_api_server_starts(
    bus_env: tuple[SimPlugin, EventBus, ClusterRuntime],
) -> None:
    plugin, bus, runtime = bus_env
    # Before the API server is up the plugin keeps the newest event per instance (a late Pending does not win).
    _changed(bus, "i-0early", "Running", 2)
    _changed(bus, "i-0early", "Pending", 1)
    bus.publish("kube.cluster.started", runtime=runtime)
    nodes = runtime.store.find_type("", "nodes")
    assert _ready(runtime.store.get(nodes, "", "hyperpod-i-0early")) == "True"
    # Running (3) delivered before Pending (2): still Ready. A newer Pending (4, a reboot) is applied.
    _changed(bus, "i-0late", "Running", 3)
    _changed(bus, "i-0late", "Pending", 2)
    assert _ready(runtime.store.get(nodes, "", "hyperpod-i-0late")) == "True"
    _changed(bus, "i-0late", "Pending", 4)
    assert _ready(runtime.store.get(nodes, "", "hyperpod-i-0late")) == "False"
    # Removed (6), then a Running (5) delivered late: the Node does not come back.
    bus.publish("hyperpod.node.removed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN,
                instance_id="i-0late", sequence=6)
    _changed(bus, "i-0late", "Running", 5)
    assert [n["metadata"]["name"] for n in runtime.store.list(nodes)[0]] == ["hyperpod-i-0early"]
    assert plugin.sim_for(ARN) is not None


def test_a_stale_cluster_view_does_not_replace_a_newer_one(bus_env: tuple[SimPlugin, EventBus, ClusterRuntime]) -> None:
    plugin, bus, runtime = bus_env

    def view(target: int, sequence: int) -> None:
        cluster = {"ClusterName": "hp", "InstanceGroups": [{"InstanceGroupName": "auto", "TargetCount": target}]}
        bus.publish("hyperpod.cluster.changed", cluster_name="hp", cluster_arn="arn:hp", eks_cluster_arn=ARN,
                    cluster=cluster, sequence=sequence)

    def target() -> int:
        sim = plugin.sim_for(ARN)
        assert sim is not None
        return int(sim.extra["hyperpod_cluster"]["InstanceGroups"][0]["TargetCount"])

    view(2, 8)
    view(1, 7)  # older, delivered late: kept for the simulator's start only if newer
    bus.publish("kube.cluster.started", runtime=runtime)
    assert target() == 2
    view(3, 10)
    view(0, 9)
    assert target() == 3
