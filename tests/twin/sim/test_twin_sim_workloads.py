"""Controller-level scenarios: HyperPod nodes, GPU scheduling, Deployments, Jobs, Services."""

from __future__ import annotations

from collections import Counter

from hyperpod_twin.kube.store import WatchEvent
from tests.support.sim import SimCluster, pod_spec


def _deployment(name: str, replicas: int, gpus: int) -> dict[str, object]:
    labels = {"app": name}
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": pod_spec(gpus)},
        },
    }


def test_hyperpod_instances_become_ready_gpu_nodes(cluster: SimCluster) -> None:
    cluster.add_node("i-0aaaaaaaaaaaaaaa1")
    cluster.add_node("i-0aaaaaaaaaaaaaaa2")
    nodes = cluster.list("", "nodes")
    assert [n["metadata"]["name"] for n in nodes] == ["hyperpod-i-0aaaaaaaaaaaaaaa1", "hyperpod-i-0aaaaaaaaaaaaaaa2"]
    for node in nodes:
        labels = node["metadata"]["labels"]
        assert labels["node.kubernetes.io/instance-type"] == "ml.g5.12xlarge"
        assert labels["sagemaker.amazonaws.com/instance-group-name"] == "gpu"
        assert labels["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
        assert labels["sagemaker.amazonaws.com/compute-type"] == "hyperpod"
        assert labels["topology.kubernetes.io/zone"] == "us-west-2a"
        assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
        assert node["status"]["capacity"]["vpc.amazonaws.com/efa"] == "1"
        assert node["status"]["capacity"]["cpu"] == "48"
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] == "True"


def test_deployment_schedules_what_fits_and_explains_the_rest(cluster: SimCluster) -> None:
    cluster.add_node("i-0bbbbbbbbbbbbbbb1", "ml.g5.8xlarge")  # 1 GPU: too small for any replica
    cluster.add_node("i-0bbbbbbbbbbbbbbb2")  # 4 GPUs: two replicas of 2
    cluster.create("apps", "deployments", _deployment("gpu-app", 3, 2))
    cluster.advance(5)
    pods = cluster.list("", "pods", "default")
    assert len(pods) == 3
    running = [p for p in pods if p["status"]["phase"] == "Running"]
    pending = [p for p in pods if p["status"]["phase"] == "Pending"]
    assert len(running) == 2 and len(pending) == 1
    assert {p["spec"]["nodeName"] for p in running} == {"hyperpod-i-0bbbbbbbbbbbbbbb2"}
    cond = next(c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled")
    assert cond["status"] == "False" and cond["reason"] == "Unschedulable"
    assert cond["message"] == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    events = [e for e in cluster.list("", "events", "default") if e["reason"] == "FailedScheduling"]
    assert events and events[0]["involvedObject"]["name"] == pending[0]["metadata"]["name"]
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "ReplicaSet" for p in pods)
    dep = cluster.get("apps", "deployments", "gpu-app")
    assert dep["status"]["readyReplicas"] == 2 and dep["status"]["replicas"] == 3
    available = next(c for c in dep["status"]["conditions"] if c["type"] == "Available")
    assert available["status"] == "False"
    # A new node with room: the pending replica is scheduled there and the Deployment becomes Available.
    cluster.add_node("i-0bbbbbbbbbbbbbbb3")
    cluster.advance(5)
    dep = cluster.get("apps", "deployments", "gpu-app")
    assert dep["status"]["availableReplicas"] == 3
    assert next(c for c in dep["status"]["conditions"] if c["type"] == "Available")["status"] == "True"


def test_taints_selectors_and_affinity(cluster: SimCluster) -> None:
    cluster.add_node("i-0ccccccccccccccc1", "ml.m5.xlarge", group="cpu")
    cluster.add_node(
        "i-0ccccccccccccccc2",
        KubernetesConfig={"Labels": {"team": "a"}, "Taints": [{"Key": "gpu", "Value": "true", "Effect": "NoSchedule"}]},
    )
    # No toleration: only the CPU node is possible, and a selector for team=a excludes it.
    cluster.create(
        "",
        "pods",
        {"metadata": {"name": "picky"}, "spec": pod_spec(0, nodeSelector={"team": "a"})},
    )
    cluster.advance(1)
    picky = cluster.get("", "pods", "picky")
    message = next(c for c in picky["status"]["conditions"] if c["type"] == "PodScheduled")["message"]
    assert message == (
        "0/2 nodes are available: 1 node(s) didn't match Pod's node affinity/selector, "
        "1 node(s) had untolerated taint {gpu: true}."
    )
    tolerant = pod_spec(
        1,
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "node.kubernetes.io/instance-type",
                                    "operator": "In",
                                    "values": ["ml.g5.12xlarge"],
                                }
                            ]
                        }
                    ]
                }
            }
        },
    )
    cluster.create("", "pods", {"metadata": {"name": "tolerant"}, "spec": tolerant})
    cluster.advance(4)
    pod = cluster.get("", "pods", "tolerant")
    assert pod["spec"]["nodeName"] == "hyperpod-i-0ccccccccccccccc2"
    assert pod["status"]["phase"] == "Running"
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"


def test_job_runs_logs_and_succeeds_or_fails_with_backoff(cluster: SimCluster) -> None:
    cluster.add_node("i-0ddddddddddddddd1")
    template = {
        "metadata": {
            "annotations": {"twin.instantstart.io/run-seconds": "10", "twin.instantstart.io/log-lines": "hello\nworld"}
        },
        "spec": pod_spec(1, restartPolicy="Never"),
    }
    cluster.create("batch", "jobs", {"metadata": {"name": "ok"}, "spec": {"template": template}})
    cluster.advance(5)
    job = cluster.get("batch", "jobs", "ok")
    assert job["status"]["active"] == 1 and "succeeded" not in job["status"]
    cluster.advance(10)
    job = cluster.get("batch", "jobs", "ok")
    assert job["status"]["succeeded"] == 1
    assert {c["type"] for c in job["status"]["conditions"] if c["status"] == "True"} == {
        "SuccessCriteriaMet",
        "Complete",
    }
    pod = next(p for p in cluster.list("", "pods", "default") if p["metadata"]["labels"].get("job-name") == "ok")
    lines = [ln.text for ln in cluster.sim.runtime.logs.read("default", pod["metadata"]["name"], "main")]
    assert "hello" in lines and "world" in lines and lines[-1] == "[twin] exited with code 0"
    assert cluster.sim.runtime.logs.is_closed("default", pod["metadata"]["name"], "main")

    failing = {
        "metadata": {"annotations": {"twin.instantstart.io/fail": "true", "twin.instantstart.io/run-seconds": "1"}},
        "spec": pod_spec(0, restartPolicy="Never"),
    }
    cluster.create("batch", "jobs", {"metadata": {"name": "bad"}, "spec": {"template": failing, "backoffLimit": 1}})
    cluster.advance(20)
    job = cluster.get("batch", "jobs", "bad")
    assert job["status"]["failed"] == 2
    failed = next(c for c in job["status"]["conditions"] if c["type"] == "Failed")
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded"


def test_service_endpoints_follow_ready_pods(cluster: SimCluster) -> None:
    cluster.add_node("i-0eeeeeeeeeeeeee1")
    cluster.create("apps", "deployments", _deployment("web", 2, 0))
    cluster.create(
        "",
        "services",
        {
            "metadata": {"name": "web"},
            "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        },
    )
    cluster.advance(1)
    assert cluster.get("", "endpoints", "web")["subsets"] == []  # pods not started yet
    cluster.advance(1.5)
    ep = cluster.get("", "endpoints", "web")
    assert "addresses" not in ep["subsets"][0] and len(ep["subsets"][0]["notReadyAddresses"]) == 2
    cluster.advance(2)
    ep = cluster.get("", "endpoints", "web")
    assert len(ep["subsets"][0]["addresses"]) == 2
    assert ep["subsets"][0]["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    slices = cluster.list("discovery.k8s.io", "endpointslices", "default")
    assert slices and all(e["conditions"]["ready"] for e in slices[0]["endpoints"])


def test_node_reboot_and_removal(cluster: SimCluster) -> None:
    cluster.add_node("i-0fffffffffffffff1")
    cluster.create("apps", "deployments", _deployment("svc", 1, 0))
    cluster.advance(4)
    cluster.add_node("i-0fffffffffffffff1", status="Pending")  # rebooting
    node = cluster.get("", "nodes", "hyperpod-i-0fffffffffffffff1", "")
    assert next(c for c in node["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    pod = cluster.list("", "pods", "default")[0]
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "False"
    cluster.add_node("i-0fffffffffffffff1")  # back
    cluster.advance(4)
    pod = cluster.list("", "pods", "default")[0]
    assert next(c for c in pod["status"]["conditions"] if c["type"] == "Ready")["status"] == "True"
    assert pod["status"]["containerStatuses"][0]["restartCount"] == 1
    # Removal: the node goes, its pod is deleted and the replacement waits for a node.
    controller_name = pod["metadata"]["name"]
    from hyperpod_twin.sim.nodes import NodeController

    nodes: NodeController = cluster.sim.controller(NodeController)
    cluster.sim.run(lambda: nodes.instance_removed("i-0fffffffffffffff1"))
    assert cluster.list("", "nodes") == []
    pods = cluster.list("", "pods", "default")
    assert len(pods) == 1 and pods[0]["metadata"]["name"] != controller_name
    assert pods[0]["status"]["phase"] == "Pending"


def test_on_failure_job_restarts_its_container_and_counts_restarts(cluster: SimCluster) -> None:
    cluster.add_node("i-0ddddddddddddddd9")
    flaky = {
        "metadata": {
            "annotations": {"twin.instantstart.io/fail-attempts": "1", "twin.instantstart.io/run-seconds": "2"}
        },
        "spec": pod_spec(0, restartPolicy="OnFailure", initContainers=[{"name": "init", "image": "busybox:1.36"}]),
    }
    cluster.create("batch", "jobs", {"metadata": {"name": "flaky"}, "spec": {"template": flaky}})
    cluster.advance(30)
    job = cluster.get("batch", "jobs", "flaky")
    assert job["status"]["succeeded"] == 1 and "failed" not in job["status"]
    (pod,) = [p for p in cluster.list("", "pods", "default") if p["metadata"]["labels"].get("job-name") == "flaky"]
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert any(e["reason"] == "BackOff" for e in cluster.list("", "events", "default"))

    broken = {
        "metadata": {"annotations": {"twin.instantstart.io/fail": "true", "twin.instantstart.io/run-seconds": "1"}},
        "spec": pod_spec(0, restartPolicy="OnFailure"),
    }
    cluster.create("batch", "jobs", {"metadata": {"name": "broken"}, "spec": {"template": broken, "backoffLimit": 1}})
    cluster.advance(60)
    job = cluster.get("batch", "jobs", "broken")
    assert next(c for c in job["status"]["conditions"] if c["type"] == "Failed")["reason"] == "BackoffLimitExceeded"
    assert not [p for p in cluster.list("", "pods", "default") if p["metadata"]["labels"].get("job-name") == "broken"]


def test_events_repeat_into_a_count_and_expire_after_an_hour(cluster: SimCluster) -> None:
    pod = cluster.create("", "pods", {"metadata": {"name": "lonely"}, "spec": pod_spec()})
    for _ in range(2):
        cluster.sim.run(lambda: cluster.sim.event(pod, "Custom", "same message", "Warning"))
    (event,) = [e for e in cluster.list("", "events", "default") if e["reason"] == "Custom"]
    assert (
        event["count"] == 2 and event["type"] == "Warning" and event["involvedObject"]["uid"] == pod["metadata"]["uid"]
    )
    cluster.clock.advance(3601)
    assert not [e for e in cluster.list("", "events", "default") if e["reason"] == "Custom"]


def test_stuck_rollout_exceeds_its_progress_deadline(cluster: SimCluster) -> None:
    cluster.add_node("i-0eeeeeeeeeeeeef1", "ml.m5.xlarge", group="cpu")
    dep = _deployment("stuck", 1, 1)
    dep["spec"]["progressDeadlineSeconds"] = 60
    cluster.create("apps", "deployments", dep)
    cluster.advance(30)
    progressing = next(
        c for c in cluster.get("apps", "deployments", "stuck")["status"]["conditions"] if c["type"] == "Progressing"
    )
    assert progressing["status"] == "True" and progressing["reason"] == "ReplicaSetUpdated"
    cluster.advance(31)
    progressing = next(
        c for c in cluster.get("apps", "deployments", "stuck")["status"]["conditions"] if c["type"] == "Progressing"
    )
    assert progressing["status"] == "False" and progressing["reason"] == "ProgressDeadlineExceeded"


def test_bound_pod_waits_in_container_creating(cluster: SimCluster) -> None:
    cluster.add_node("i-0eeeeeeeeeeeeef2")
    cluster.create(
        "",
        "pods",
        {"metadata": {"name": "slow", "annotations": {"twin.instantstart.io/start-seconds": "30"}}, "spec": pod_spec()},
    )
    cluster.advance(1)
    pod = cluster.get("", "pods", "slow")
    assert pod["status"]["phase"] == "Pending" and pod["spec"]["nodeName"]
    assert pod["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "ContainerCreating"
    cluster.advance(30)
    assert cluster.get("", "pods", "slow")["status"]["phase"] == "Running"


def test_required_pod_anti_affinity_spreads_and_affinity_packs(cluster: SimCluster) -> None:
    cluster.add_node("i-0aaaaaaaaaaaaab1", "ml.m5.4xlarge", group="cpu")
    cluster.add_node("i-0aaaaaaaaaaaaab2", "ml.m5.4xlarge", group="cpu")
    spread = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "spread"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    dep = _deployment("spread", 3, 0)
    dep["spec"]["template"]["spec"]["affinity"] = {"podAntiAffinity": spread}
    cluster.create("apps", "deployments", dep)
    cluster.advance(4)
    pods = cluster.list("", "pods", "default")
    assert len({p["spec"].get("nodeName") for p in pods if p["spec"].get("nodeName")}) == 2
    pending = [p for p in pods if not p["spec"].get("nodeName")]
    assert len(pending) == 1
    message = next(c for c in pending[0]["status"]["conditions"] if c["type"] == "PodScheduled")["message"]
    assert message == "0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules."
    together = {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "pack"}}, "topologyKey": "kubernetes.io/hostname"}
        ]
    }
    packed = _deployment("pack", 3, 0)
    packed["spec"]["template"]["spec"]["affinity"] = {"podAffinity": together}
    cluster.create("apps", "deployments", packed)
    cluster.advance(4)
    nodes = {
        p["spec"].get("nodeName")
        for p in cluster.list("", "pods", "default")
        if p["metadata"]["labels"].get("app") == "pack"
    }
    assert len(nodes) == 1 and None not in nodes


def test_a_large_deployment_settles_in_a_few_coalesced_reconciles(cluster: SimCluster) -> None:
    """256 GPU replicas on 32 p5 nodes: reconciles coalesce per clock tick, so the ReplicaSet's and the
    Deployment's statuses are written about once per tick, not once per pod start (258 writes each when every
    pod start reconciled its ReplicaSet on its own, which took ~45 s; the wall time is bench/'s business)."""
    for i in range(32):
        cluster.add_node(f"i-0scale{i:011d}", "ml.p5.48xlarge")
    writes: Counter[str] = Counter()

    def count(event: WatchEvent) -> None:
        if event.type == "MODIFIED" and event.rtype.plural in ("replicasets", "deployments"):
            writes[event.rtype.plural] += 1

    cluster.store.add_listener(count)
    cluster.create("apps", "deployments", _deployment("big", 256, 1))
    cluster.advance(4)  # 8 ticks of 0.5 twin seconds
    cluster.store.remove_listener(count)
    assert cluster.get("apps", "deployments", "big")["status"]["readyReplicas"] == 256
    assert 1 <= writes["replicasets"] <= 8 and 1 <= writes["deployments"] <= 8, writes


def test_scale_in_removes_pods_with_the_lowest_deletion_cost_first(cluster: SimCluster) -> None:
    cluster.add_node("i-0ccccccccccccccc1")  # 4 GPUs
    cluster.create("apps", "deployments", _deployment("pool", 3, 1))
    cluster.advance(5)
    pods = cluster.list("", "pods", "default")
    assert len(pods) == 3
    keep = pods[0]  # without a cost the controller would remove it (same age, first in line)
    keep["metadata"].setdefault("annotations", {})["controller.kubernetes.io/pod-deletion-cost"] = "1000"
    rtype = cluster.store.find_type("", "pods")
    assert rtype is not None
    cluster.store.update(rtype, keep)
    dep = cluster.get("apps", "deployments", "pool")
    dep["spec"]["replicas"] = 1
    deployments = cluster.store.find_type("apps", "deployments")
    assert deployments is not None
    cluster.store.update(deployments, dep)
    cluster.advance(5)
    live = [p for p in cluster.list("", "pods", "default") if not p["metadata"].get("deletionTimestamp")]
    assert [p["metadata"]["uid"] for p in live] == [keep["metadata"]["uid"]]
