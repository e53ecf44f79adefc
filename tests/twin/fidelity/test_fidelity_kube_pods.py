"""Pods are deleted as kube-apiserver and the kubelet delete them: a grace period on the twin clock
(Terminating, then gone), and the DELETE answer is the pod itself, which the Python client parses."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
from kubernetes.client.exceptions import ApiException

from hyperpod_twin.clock import TwinClock
from hyperpod_twin.events import EventBus
from hyperpod_twin.sim.plugin import build_simulator
from tests.support.sim import SimCluster
from tests.support.twin_kube import Cluster, standalone_cluster

NS = "default"


@dataclass
class Env:
    """An API server reached with the official client, its simulator, and a frozen twin clock."""

    kube: Cluster
    sim: SimCluster
    core: kubernetes.client.CoreV1Api

    def exists(self, name: str) -> bool:
        try:
            self.core.read_namespaced_pod(name, NS)
        except ApiException as err:
            assert err.status == 404
            return False
        return True

    def running(self, name: str, **spec: Any) -> None:
        """Create a pod and advance until its kubelet runs it."""
        self.core.create_namespaced_pod(NS, {"metadata": {"name": name}, "spec": {
            "containers": [{"name": "main", "image": "busybox:1.36"}], **spec}})
        self.sim.advance(10)
        assert self.core.read_namespaced_pod(name, NS).status.phase == "Running"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    with standalone_cluster(tmp_path_factory.mktemp("fidelity-pods")) as kube:
        clock = TwinClock(scale=0.0)
        kube.runtime.store.clock = clock.wall  # as the twin's Kubernetes plugin wires it
        sim = build_simulator(kube.runtime, clock, EventBus())
        sim.start()
        cluster = SimCluster(sim, clock, EventBus())
        cluster.add_node("i-0aaaaaaaaaaaaaaa1")
        cluster.advance(30)
        try:
            yield Env(kube, cluster, kubernetes.client.CoreV1Api(kube.api))
        finally:
            sim.stop()


def test_delete_answers_the_pod_with_its_deletion_timestamp_and_it_goes_after_the_grace_period(env: Env) -> None:
    env.running("graceful")
    before = env.sim.clock.wall()
    answer = env.core.delete_namespaced_pod("graceful", NS)  # parsed as V1Pod: no workaround needed
    assert isinstance(answer, kubernetes.client.V1Pod)
    assert answer.metadata.name == "graceful" and answer.metadata.deletion_grace_period_seconds == 30
    deadline = answer.metadata.deletion_timestamp.timestamp()
    assert before + 29 <= deadline <= before + 31  # now + terminationGracePeriodSeconds (defaulted to 30)

    env.sim.advance(25)
    pod = env.core.read_namespaced_pod("graceful", NS)
    assert pod.metadata.deletion_timestamp is not None, "the pod went before its grace period ended"
    table = env.kube.kubectl("get", "pod", "graceful", "-n", NS, "--no-headers").stdout
    assert "Terminating" in table
    logs = env.core.read_namespaced_pod_log("graceful", NS)
    assert "SIGTERM" in logs
    env.sim.advance(7)
    assert not env.exists("graceful"), "the kubelet did not delete the pod once its grace period was over"


def test_termination_grace_period_of_the_spec_and_of_the_request(env: Env) -> None:
    env.running("short", terminationGracePeriodSeconds=5)
    assert env.core.delete_namespaced_pod("short", NS).metadata.deletion_grace_period_seconds == 5
    env.sim.advance(6)
    assert not env.exists("short")

    env.running("asked")
    assert env.core.delete_namespaced_pod("asked", NS, grace_period_seconds=60).metadata \
        .deletion_grace_period_seconds == 60
    # A later DELETE may shorten the period, never lengthen it.
    assert env.core.delete_namespaced_pod("asked", NS, grace_period_seconds=120).metadata \
        .deletion_grace_period_seconds == 60
    assert env.core.delete_namespaced_pod("asked", NS, grace_period_seconds=10).metadata \
        .deletion_grace_period_seconds == 10
    env.sim.advance(11)
    assert not env.exists("asked")


def test_immediate_deletes_answer_the_pod_too(env: Env) -> None:
    env.running("forced")
    answer = env.core.delete_namespaced_pod("forced", NS, grace_period_seconds=0)
    assert isinstance(answer, kubernetes.client.V1Pod) and answer.metadata.name == "forced"
    assert not env.exists("forced")
    # A pod never scheduled has nothing to stop: it goes at once whatever the period.
    env.core.create_namespaced_pod(NS, {"metadata": {"name": "unbound"}, "spec": {
        "containers": [{"name": "main", "image": "busybox:1.36"}],
        "nodeSelector": {"no-such-label": "x"}}})
    answer = env.core.delete_namespaced_pod("unbound", NS)
    assert answer.metadata.name == "unbound" and answer.metadata.deletion_timestamp is None
    assert not env.exists("unbound")


def test_namespace_deletion_waits_for_its_pods_grace_period(env: Env) -> None:
    env.core.create_namespace({"metadata": {"name": "draining"}})
    env.core.create_namespaced_pod("draining", {"metadata": {"name": "p"}, "spec": {
        "containers": [{"name": "main", "image": "busybox:1.36"}], "terminationGracePeriodSeconds": 20}})
    env.sim.advance(10)
    env.core.delete_namespace("draining")
    assert env.core.read_namespace("draining").status.phase == "Terminating"
    assert env.core.read_namespaced_pod("p", "draining").metadata.deletion_grace_period_seconds == 20
    env.sim.advance(22)
    with pytest.raises(ApiException) as gone:
        env.core.read_namespace("draining")
    assert gone.value.status == 404
