"""The issue's scenarios end to end: boto3 against the twin's AWS side, the kubernetes client over HTTPS
against the twin's API server, the simulator playing kubelets and operators in between."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from hyperpod_twin.twin import Twin, TwinConfig
from tests.support.eks_token import eks_token
from tests.support.twin_aws import ROLE, Net, build_eks, build_network, control, ensure_execution_role, group

EKS = "sim-eks"
HP = "sim-hp"
GPU_GROUP = "gpu"


@dataclass
class Env:
    """The running twin, its one EKS + HyperPod cluster, and typed clients for the cluster."""

    twin: Twin
    net: Net
    core: k8s.CoreV1Api
    apps: k8s.AppsV1Api
    custom: k8s.CustomObjectsApi
    api: k8s.ApiClient

    def advance(self, seconds: float, step: float = 1.0) -> None:
        """Move twin time in steps so chained progressions (start → ready → exit) all fire."""
        remaining = seconds
        while remaining > 0:
            self.twin.clock.advance(min(step, remaining))
            remaining -= step

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
        """Poll `check` until truthy: reactions run on server and clock threads, not in the test."""
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")
            time.sleep(0.05)

    def gpu_nodes(self) -> list[Any]:
        return [
            n
            for n in self.core.list_node().items
            if n.metadata.labels.get("sagemaker.amazonaws.com/instance-group-name") == GPU_GROUP
        ]


def _ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    twin = Twin(TwinConfig(clock_scale=0.001)).start()
    try:
        net = build_network(twin, "10.60")
        ensure_execution_role(twin)
        build_eks(twin, net, EKS)
        eks = twin.boto3_client("eks").describe_cluster(name=EKS)["cluster"]
        ca = tmp_path_factory.mktemp("ca") / "ca.crt"
        ca.write_bytes(base64.b64decode(eks["certificateAuthority"]["data"]))
        config = k8s.Configuration()
        config.host = eks["endpoint"]
        config.ssl_ca_cert = str(Path(ca))
        token = eks_token(
            EKS, access_key=twin.access_key_id, secret_key=twin.secret_access_key, endpoint_url=twin.endpoint_url
        )
        config.api_key = {"authorization": f"Bearer {token}"}
        api = k8s.ApiClient(config)
        yield Env(twin, net, k8s.CoreV1Api(api), k8s.AppsV1Api(api), k8s.CustomObjectsApi(api), api)
    finally:
        twin.stop()


def test_hyperpod_group_yields_ready_gpu_nodes(env: Env) -> None:
    sm = env.twin.boto3_client("sagemaker")
    subnets = {"Subnets": [env.net.compute["us-west-2a"]], "SecurityGroupIds": [env.net.sg]}
    sm.create_cluster(
        ClusterName=HP,
        Orchestrator={"Eks": {"ClusterArn": env.twin.boto3_client("eks").describe_cluster(name=EKS)["cluster"]["arn"]}},
        InstanceGroups=[group(GPU_GROUP, "ml.g5.12xlarge", 2, OverrideVpcConfig=subnets)],
        VpcConfig=subnets,
        NodeRecovery="Automatic",
    )
    env.advance(600, step=10)
    nodes = env.wait(
        "two Ready GPU nodes", lambda: len([n for n in env.gpu_nodes() if _ready(n)]) == 2 and env.gpu_nodes()
    )
    for node in nodes:
        assert node.metadata.name.startswith("hyperpod-i-")
        assert node.status.capacity["nvidia.com/gpu"] == "4"
        assert node.status.allocatable["nvidia.com/gpu"] == "4"
        assert node.metadata.labels["node.kubernetes.io/instance-type"] == "ml.g5.12xlarge"
        assert node.metadata.labels["sagemaker.amazonaws.com/node-health-status"] == "Schedulable"
        assert node.metadata.labels["topology.kubernetes.io/zone"] == "us-west-2a"


def _gpu_deployment(
    name: str, replicas: int, gpus: int, image: str = "busybox:1.36", **container: Any
) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [
                        {
                            "name": "main",
                            "image": image,
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                            **container,
                        }
                    ]
                },
            },
        },
    }


def test_gpu_deployment_leaves_one_replica_pending_with_a_reason(env: Env) -> None:
    # Scale the group to one node (4 GPUs) through the real SageMaker API first.
    sm = env.twin.boto3_client("sagemaker")
    details = next(
        g for g in sm.describe_cluster(ClusterName=HP)["InstanceGroups"] if g["InstanceGroupName"] == GPU_GROUP
    )
    spec = {k: details[k] for k in ("InstanceGroupName", "InstanceType", "ExecutionRole", "OverrideVpcConfig")}
    sm.update_cluster(ClusterName=HP, InstanceGroups=[{**spec, "InstanceCount": 1}])
    env.advance(300, step=10)
    env.wait("one GPU node", lambda: len(env.gpu_nodes()) == 1)
    env.apps.create_namespaced_deployment("default", _gpu_deployment("gpu-app", 3, 2))
    env.advance(10)
    pods = env.wait(
        "2 running + 1 pending",
        lambda: (
            p := env.core.list_namespaced_pod("default", label_selector="app=gpu-app").items,
            sorted(x.status.phase for x in p) == ["Pending", "Running", "Running"] and p,
        )[1],
    )
    pending = next(p for p in pods if p.status.phase == "Pending")
    scheduled = next(c for c in pending.status.conditions if c.type == "PodScheduled")
    assert scheduled.status == "False" and scheduled.reason == "Unschedulable"
    assert scheduled.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    events = env.core.list_namespaced_event(
        "default", field_selector=f"involvedObject.name={pending.metadata.name}"
    ).items
    assert any(e.reason == "FailedScheduling" and "Insufficient nvidia.com/gpu" in e.message for e in events)
    dep = env.apps.read_namespaced_deployment_status("gpu-app", "default")
    assert dep.status.ready_replicas == 2 and dep.status.replicas == 3
    # A node appears (scale back to 2): the pending replica is scheduled and the Deployment is Available.
    sm.update_cluster(ClusterName=HP, InstanceGroups=[{**spec, "InstanceCount": 2}])
    env.advance(600, step=10)
    env.wait(
        "deployment available",
        lambda: (env.apps.read_namespaced_deployment_status("gpu-app", "default").status.available_replicas or 0) == 3,
    )
    env.apps.delete_namespaced_deployment("gpu-app", "default")
    env.advance(32)  # the garbage collector deletes the pods with their 30 s grace period
    env.wait(
        "gpu-app pods gone", lambda: not env.core.list_namespaced_pod("default", label_selector="app=gpu-app").items
    )


def test_hyperpod_pytorch_job_runs_logs_and_succeeds(env: Env) -> None:
    eks = env.twin.boto3_client("eks")
    eks.create_addon(clusterName=EKS, addonName="cert-manager")
    eks.create_addon(clusterName=EKS, addonName="amazon-sagemaker-hyperpod-training-operator")
    env.advance(300, step=10)
    env.wait(
        "the HyperPodPyTorchJob CRD",
        lambda: (
            any(
                r.name == "hyperpodpytorchjobs"
                for r in k8s.CustomObjectsApi(env.api).get_api_resources("sagemaker.amazonaws.com", "v1").resources
            )
            if _has_group(env, "sagemaker.amazonaws.com")
            else False
        ),
    )
    job = {
        "apiVersion": "sagemaker.amazonaws.com/v1",
        "kind": "HyperPodPyTorchJob",
        "metadata": {"name": "llama-ft", "namespace": "default"},
        "spec": {
            "nprocPerNode": "4",
            "replicaSpecs": [
                {
                    "name": "pod",
                    "replicas": 2,
                    "template": {
                        "metadata": {"annotations": {"twin.instantstart.io/run-seconds": "30"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch-job-container",
                                    "image": "111122223333.dkr.ecr.us-west-2.amazonaws.com/train:1",
                                    "command": ["hyperpodrun", "--nnodes=2", "--nproc-per-node=4", "train.py"],
                                    "resources": {"limits": {"nvidia.com/gpu": 4, "vpc.amazonaws.com/efa": 1}},
                                }
                            ]
                        },
                    },
                }
            ],
            "runPolicy": {"cleanPodPolicy": "None", "jobMaxRetryCount": 2},
        },
    }
    env.custom.create_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", job)
    env.advance(5)

    def conditions() -> set[str]:
        obj = env.custom.get_namespaced_custom_object(
            "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", "llama-ft"
        )
        return {c["type"] for c in (obj.get("status") or {}).get("conditions", []) if c["status"] == "True"}

    env.wait("job Running", lambda: "Running" in conditions())
    pods = env.core.list_namespaced_pod("default", label_selector="HPJob=llama-ft").items
    assert sorted(p.metadata.name for p in pods) == ["llama-ft-pod-0", "llama-ft-pod-1"]
    env_vars = {e.name: e.value for e in pods[0].spec.containers[0].env}
    assert env_vars["NNODES"] == "2" and env_vars["NPROC_PER_NODE"] == "4" and env_vars["WORLD_SIZE"] == "8"
    env.advance(35)
    env.wait("job Completed", lambda: "Completed" in conditions())
    log = env.core.read_namespaced_pod_log("llama-ft-pod-1", "default")
    assert "[twin] rank 1: world size 8, nnodes 2" in log and "training complete" in log


def _has_group(env: Env, group_name: str) -> bool:
    return any(g.name == group_name for g in k8s.ApisApi(env.api).get_api_versions().groups)


def _proxy(env: Env, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A raw request through the kubernetes client (auth, TLS) to a proxy subresource path."""
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    m, url, hdrs, data, _ = env.api.param_serialize(
        method, path, header_params=headers, body=body, auth_settings=["BearerToken"]
    )
    response = env.api.call_api(m, url, header_params=hdrs, body=data)
    response.read()
    return response.status, json.loads(response.data)


def test_simulated_vllm_answers_through_the_service_proxy(env: Env) -> None:
    args = ["serve", "Qwen/Qwen3-8B", "--served-model-name", "qwen3-8b", "--port", "8000"]
    dep = _gpu_deployment(
        "vllm", 1, 1, image="vllm/vllm-openai:v0.9.0", args=args, ports=[{"containerPort": 8000, "name": "http"}]
    )
    env.apps.create_namespaced_deployment("default", dep)
    env.core.create_namespaced_service(
        "default",
        {
            "metadata": {"name": "vllm"},
            "spec": {"selector": {"app": "vllm"}, "ports": [{"name": "http", "port": 8000, "targetPort": "http"}]},
        },
    )
    env.advance(5)
    env.wait(
        "vllm ready",
        lambda: (env.apps.read_namespaced_deployment_status("vllm", "default").status.ready_replicas or 0) == 1,
    )
    body = {"model": "qwen3-8b", "messages": [{"role": "user", "content": "What is HyperPod?"}], "max_tokens": 64}
    status, answer = _proxy(
        env, "POST", "/api/v1/namespaces/default/services/vllm:8000/proxy/v1/chat/completions", body
    )
    assert status == 200
    assert answer["object"] == "chat.completion" and answer["model"] == "qwen3-8b"
    content = answer["choices"][0]["message"]["content"]
    assert content.startswith("[twin simulated response]") and "What is HyperPod?" in content
    status, models = _proxy(env, "GET", "/api/v1/namespaces/default/services/vllm:8000/proxy/v1/models")
    assert status == 200 and models["data"][0]["id"] == "qwen3-8b"
    pod = env.core.list_namespaced_pod("default", label_selector="app=vllm").items[0]
    log = env.core.read_namespaced_pod_log(pod.metadata.name, "default")
    assert "simulated vllm server: model qwen3-8b" in log and '"POST /v1/chat/completions HTTP/1.1" 200 OK' in log
    env.apps.delete_namespaced_deployment("vllm", "default")


def test_inference_endpoint_config_serves_through_the_service_proxy(env: Env) -> None:
    env.twin.boto3_client("eks").create_addon(clusterName=EKS, addonName="amazon-sagemaker-hyperpod-inference")
    env.advance(300, step=10)
    group_version = ("inference.sagemaker.aws.amazon.com", "v1")
    env.wait("the InferenceEndpointConfig CRD", lambda: _has_group(env, group_version[0]))
    iec = {
        "apiVersion": "inference.sagemaker.aws.amazon.com/v1",
        "kind": "InferenceEndpointConfig",
        "metadata": {"name": "qwen", "namespace": "default"},
        "spec": {
            "modelName": "qwen",
            "instanceType": "ml.g5.12xlarge",
            "invocationEndpoint": "v1/chat/completions",
            "modelSourceConfig": {
                "modelSourceType": "s3",
                "s3Storage": {"bucketName": "models", "region": "us-west-2"},
            },
            "worker": {
                "image": "vllm/vllm-openai:v0.9.0",
                "args": ["--model", "/opt/ml/model", "--served-model-name", "qwen", "--port", "8000"],
                "modelInvocationPort": {"containerPort": 8000},
                "modelVolumeMount": {"name": "model-weights"},
                "resources": {"limits": {"nvidia.com/gpu": 1}},
            },
        },
    }
    env.custom.create_namespaced_custom_object(*group_version, "default", "inferenceendpointconfigs", iec)
    env.advance(5)

    def state() -> str:
        obj = env.custom.get_namespaced_custom_object(*group_version, "default", "inferenceendpointconfigs", "qwen")
        return str((obj.get("status") or {}).get("state", ""))

    env.wait("DeploymentComplete", lambda: state() == "DeploymentComplete")
    status, answer = _proxy(
        env,
        "POST",
        "/api/v1/namespaces/default/services/qwen:8000/proxy/v1/chat/completions",
        {"messages": [{"role": "user", "content": "ping"}]},
    )
    assert status == 200 and answer["model"] == "qwen"
    env.custom.delete_namespaced_custom_object(*group_version, "default", "inferenceendpointconfigs", "qwen")
    env.wait(
        "worker Deployment collected",
        lambda: not env.apps.list_namespaced_deployment("default", label_selector="app=qwen").items,
    )


def test_node_reboot_goes_not_ready_then_ready(env: Env) -> None:
    sm = env.twin.boto3_client("sagemaker")
    node = env.gpu_nodes()[0]
    instance_id = node.metadata.name.removeprefix("hyperpod-")
    assert sm.batch_reboot_cluster_nodes(ClusterName=HP, NodeIds=[instance_id])["Successful"] == [instance_id]
    env.wait("NotReady", lambda: not _ready(env.core.read_node(node.metadata.name)))
    env.advance(300, step=10)
    env.wait("Ready again", lambda: _ready(env.core.read_node(node.metadata.name)))


def test_health_finding_taints_then_node_is_replaced(env: Env) -> None:
    node = env.gpu_nodes()[0]
    instance_id = node.metadata.name.removeprefix("hyperpod-")
    control(
        env.twin, f"nodes/{instance_id}/health", {"status": "UnschedulablePendingReplacement", "reason": "GPU XID 79"}
    )

    def tainted() -> bool:
        current = env.core.read_node(node.metadata.name)
        taints = current.spec.taints or []
        return current.metadata.labels[
            "sagemaker.amazonaws.com/node-health-status"
        ] == "UnschedulablePendingReplacement" and any(
            t.key == "sagemaker.amazonaws.com/node-health-status" and t.effect == "NoSchedule" for t in taints
        )

    env.wait("health label and taint", tainted)
    env.advance(900, step=10)
    names = env.wait(
        "replacement node",
        lambda: (
            n := [x.metadata.name for x in env.gpu_nodes() if _ready(x)],
            len(n) == 2 and node.metadata.name not in n and n,
        )[1],
    )
    assert node.metadata.name not in names


def test_karpenter_scales_a_group_up_for_pending_pods_and_consolidates_it(env: Env) -> None:
    sm = env.twin.boto3_client("sagemaker")
    subnets = {"Subnets": [env.net.compute["us-west-2a"]], "SecurityGroupIds": [env.net.sg]}
    sm.update_cluster(
        ClusterName=HP,
        NodeProvisioningMode="Continuous",
        ClusterRole=ROLE,
        AutoScaling={"Mode": "Enable", "AutoScalerType": "Karpenter"},
        InstanceGroups=[group("auto", "ml.g5.12xlarge", 0, OverrideVpcConfig=subnets)],
    )
    env.advance(150, step=10)
    env.wait(
        "Karpenter CRDs",
        lambda: _has_group(env, "karpenter.sh") and _has_group(env, "karpenter.sagemaker.amazonaws.com"),
    )
    env.custom.create_cluster_custom_object(
        "karpenter.sagemaker.amazonaws.com",
        "v1",
        "hyperpodnodeclasses",
        {
            "apiVersion": "karpenter.sagemaker.amazonaws.com/v1",
            "kind": "HyperpodNodeClass",
            "metadata": {"name": "gpu-class"},
            "spec": {"instanceGroups": ["auto"]},
        },
    )
    env.custom.create_cluster_custom_object(
        "karpenter.sh",
        "v1",
        "nodepools",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "gpu-pool"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {
                            "group": "karpenter.sagemaker.amazonaws.com",
                            "kind": "HyperpodNodeClass",
                            "name": "gpu-class",
                        },
                        "requirements": [
                            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["ml.g5.12xlarge"]}
                        ],
                    }
                },
                "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"},
            },
        },
    )

    def pool_ready() -> bool:
        pool = env.custom.get_cluster_custom_object("karpenter.sh", "v1", "nodepools", "gpu-pool")
        return any(
            c["type"] == "Ready" and c["status"] == "True" for c in (pool.get("status") or {}).get("conditions", [])
        )

    env.wait("NodePool Ready", pool_ready)
    pod = {
        "metadata": {"name": "burst"},
        "spec": {
            "nodeSelector": {"karpenter.sh/nodepool": "gpu-pool"},
            "containers": [{"name": "main", "image": "busybox:1.36", "resources": {"limits": {"nvidia.com/gpu": "4"}}}],
        },
    }
    env.core.create_namespaced_pod("default", pod)

    def target() -> int:
        groups = {g["InstanceGroupName"]: g for g in sm.describe_cluster(ClusterName=HP)["InstanceGroups"]}
        return int(groups["auto"].get("TargetCount", 0))

    env.wait("UpdateCluster from Karpenter", lambda: target() == 1)
    env.advance(600, step=10)
    env.wait("burst pod Running", lambda: env.core.read_namespaced_pod("burst", "default").status.phase == "Running")
    node_name = env.core.read_namespaced_pod("burst", "default").spec.node_name
    node = env.core.read_node(node_name)
    assert node.metadata.labels["sagemaker.amazonaws.com/instance-group-name"] == "auto"
    assert node.metadata.labels["karpenter.sh/nodepool"] == "gpu-pool"
    claim = env.custom.get_cluster_custom_object("karpenter.sh", "v1", "nodeclaims", node_name)
    assert {c["type"] for c in claim["status"]["conditions"] if c["status"] == "True"} >= {"Launched", "Ready"}
    env.core.delete_namespaced_pod("burst", "default")
    env.advance(60, step=5)

    def auto_nodes() -> list[str]:
        return [
            n["InstanceId"]
            for n in sm.list_cluster_nodes(ClusterName=HP)["ClusterNodeSummaries"]
            if n["InstanceGroupName"] == "auto" and n["InstanceStatus"]["Status"] != "ShuttingDown"
        ]

    env.wait("BatchDeleteClusterNodes from Karpenter", lambda: not auto_nodes())
    env.advance(300, step=10)
    env.wait("node gone", lambda: all(n.metadata.name != node_name for n in env.core.list_node().items))
    env.wait(
        "NodeClaim gone", lambda: not env.custom.list_cluster_custom_object("karpenter.sh", "v1", "nodeclaims")["items"]
    )


KUBECTL_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: hello}
spec:
  backoffLimit: 0
  template:
    metadata:
      annotations:
        twin.instantstart.io/run-seconds: "20"
        twin.instantstart.io/log-lines: "hello from the twin"
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox:1.36, command: [echo, hello]}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: main, image: nginx:1.27, resources: {requests: {cpu: 100m}}}]
"""


FOLLOW_JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: follow}
spec:
  template:
    metadata: {annotations: {twin.instantstart.io/run-seconds: "8"}}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox:1.36, command: [sh, -c, echo hi]}]
"""


def test_kubectl_waits_on_simulated_workloads(env: Env, tmp_path: Path) -> None:
    import subprocess

    from tests.support.twin_kube import KUBECTL, write_kubeconfig

    eks = env.twin.boto3_client("eks").describe_cluster(name=EKS)["cluster"]
    kubeconfig = tmp_path / "kubeconfig"
    token = env.api.configuration.api_key["authorization"].removeprefix("Bearer ")
    write_kubeconfig(kubeconfig, eks["endpoint"], eks["certificateAuthority"]["data"], token)
    run_env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig), "NO_PROXY": "127.0.0.1"}

    def kubectl(*args: str, stdin: str | None = None) -> str:
        done = subprocess.run([KUBECTL, *args], env=run_env, capture_output=True, text=True, input=stdin, timeout=60)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def while_time_moves(*args: str) -> str:
        """Run a blocking kubectl command while twin time advances, as it would in a live twin."""
        proc = subprocess.Popen(
            [KUBECTL, *args], env=run_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            env.twin.clock.advance(1)
            time.sleep(0.05)
        out, err = proc.communicate(timeout=10)
        assert proc.returncode == 0, err
        return out

    assert "created" in kubectl("apply", "-f", "-", stdin=KUBECTL_JOB)
    assert "successfully rolled out" in while_time_moves("rollout", "status", "deployment/web", "--timeout=60s")
    assert "condition met" in while_time_moves("wait", "--for=condition=complete", "job/hello", "--timeout=60s")
    assert "hello from the twin" in kubectl("logs", "job/hello")
    kubectl("apply", "-f", "-", stdin=FOLLOW_JOB)

    def follow_started() -> bool:
        # As with a real kubelet, the logs of a container still in ContainerCreating are refused (400), and kubectl
        # logs -f on a Job takes its first pod whatever its phase: so follow once the container has started.
        env.twin.clock.advance(0.5)
        pods = env.core.list_namespaced_pod("default", label_selector="job-name=follow").items
        return bool(pods) and pods[0].status.phase not in (None, "Pending")

    env.wait("the follow job's container to start", follow_started)
    followed = while_time_moves("logs", "-f", "job/follow", "--pod-running-timeout=60s")
    assert followed.splitlines()[-1] == "[twin] exited with code 0" and "[twin] working (3/3)" in followed
    env.twin.boto3_client("eks").create_addon(clusterName=EKS, addonName="metrics-server")
    env.advance(300, step=10)
    top = env.wait(
        "kubectl top",
        lambda: (
            (
                r := subprocess.run(
                    [KUBECTL, "top", "pods", "-l", "app=web"], env=run_env, capture_output=True, text=True, timeout=60
                )
            ).returncode
            == 0
            and r.stdout
        ),
    )
    assert (
        top.splitlines()[0].split()[:3] == ["NAME", "CPU(cores)", "MEMORY(bytes)"] and "25m" in top
    )  # a quarter of 100m
    assert "hyperpod-i-" in kubectl("top", "nodes")
    nodes = kubectl("get", "nodes", "-L", "sagemaker.amazonaws.com/node-health-status", "--no-headers")
    assert "Ready" in nodes and "Schedulable" in nodes
    kubectl("delete", "deployment/web", "job/hello", "job/follow")


def test_training_job_survives_a_node_replacement(env: Env) -> None:
    job = {
        "apiVersion": "sagemaker.amazonaws.com/v1",
        "kind": "HyperPodPyTorchJob",
        "metadata": {"name": "resilient", "namespace": "default"},
        "spec": {
            "nprocPerNode": "auto",
            "replicaSpecs": [
                {
                    "name": "pod",
                    "replicas": 1,
                    "template": {
                        "metadata": {"annotations": {"twin.instantstart.io/run-seconds": "600"}},
                        "spec": {
                            "containers": [
                                {
                                    "name": "pytorch-job-container",
                                    "image": "train:1",
                                    "resources": {"limits": {"nvidia.com/gpu": "4"}},
                                }
                            ]
                        },
                    },
                }
            ],
            "runPolicy": {"cleanPodPolicy": "None", "jobMaxRetryCount": 1},
        },
    }
    env.custom.create_namespaced_custom_object("sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", job)
    env.advance(5)
    pod = env.wait(
        "training pod running",
        lambda: (p := env.core.read_namespaced_pod("resilient-pod-0", "default")).status.phase == "Running" and p,
    )
    first_node = pod.spec.node_name
    control(
        env.twin,
        f"nodes/{first_node.removeprefix('hyperpod-')}/health",
        {"status": "UnschedulablePendingReplacement", "reason": "NVLink error"},
    )
    env.advance(200, step=5)

    def restarted() -> Any:
        obj = env.custom.get_namespaced_custom_object(
            "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", "resilient"
        )
        current = env.core.list_namespaced_pod("default", label_selector="HPJob=resilient").items
        running = [p for p in current if p.status.phase == "Running" and p.spec.node_name != first_node]
        return obj["status"].get("restartCount") == 1 and running

    (moved,) = env.wait("job restarted on another node", restarted)
    envs = {e.name: e.value for e in moved.spec.containers[0].env}
    assert envs["JOB_RESTART_COUNT"] == "1" and envs["NPROC_PER_NODE"] == "4"
    env.custom.delete_namespaced_custom_object(
        "sagemaker.amazonaws.com", "v1", "default", "hyperpodpytorchjobs", "resilient"
    )
