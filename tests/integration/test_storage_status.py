"""Storage and verification against the twin: the S3 claim bound, bucket listing, cluster status with GPUs,
the verification stage, and status reads that cost at most one HyperPod describe per interval and no
Kubernetes call (the cluster's watches hold that state)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import urllib3
from kubernetes import client as k8s

from instantstart.aws.clients import AwsClients
from instantstart.context import AppContext
from instantstart.describe_cache import DescribeCache
from instantstart.errors import VerificationFailed
from instantstart.kube.client import KubeClients
from instantstart.operations.kinds import KINDS
from instantstart.operations.runner import Runner
from instantstart.operations.stage import StageContext
from instantstart.operations.store import OperationStore
from instantstart.services.base.params import VerificationParams
from instantstart.services.base.registry import set_active_cluster
from instantstart.services.cluster.verification import stage_verification
from instantstart.settings import Settings
from instantstart.store.db import Database
from instantstart.store.models import ClusterRow
from instantstart.twin_process import TwinProcess
from tests.support.faces import mcp_http, tool_payload
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "st1"
CACHE_SECONDS = 1.0  # the cp fixture's status_cache_seconds
IDLE_CACHE_SECONDS = 3 * CACHE_SECONDS  # the describe interval while no operation runs on the cluster


def make_cluster(client: httpx.Client, tag: str, **hyperpod: Any) -> None:
    """EKS stage, switch, and a HyperPod cluster (one ml.g6.4xlarge in us-west-2c) through the public tools."""
    ref = client.post("/api/v1/clusters/eks", json={"clusterTag": tag}).json()
    assert wait_terminal(client, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
    switch = client.post(f"/api/v1/clusters/{tag}/switch").json()
    assert wait_terminal(client, switch["operationId"], timeout=60)["status"] == "SUCCEEDED"
    hp = client.post("/api/v1/clusters/hyperpod", json={"acceleratedInstanceType": "ml.g6.4xlarge",
                                                       "acceleratedInstanceCount": 1,
                                                       "availabilityZone": "us-west-2c", **hyperpod})
    assert hp.status_code == 202, hp.text
    view = wait_terminal(client, hp.json()["operationId"], timeout=120)
    assert view["status"] == "SUCCEEDED", view


def wait_status(client: httpx.Client, predicate: Any, timeout: float = 60.0) -> dict[str, Any]:
    """Poll cluster_get_status until `predicate(status)` holds."""
    deadline = time.monotonic() + timeout
    while True:
        status: dict[str, Any] = client.get("/api/v1/clusters/status").json()
        if predicate(status) or time.monotonic() > deadline:
            return status
        time.sleep(0.2)


def mcp_call(cp: Running, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """Call one tool through an MCP client over streamable HTTP."""

    async def call() -> dict[str, Any]:
        async with mcp_http(cp) as session:
            payload: dict[str, Any] = tool_payload(await session.call_tool(tool, args))
            return payload

    return asyncio.run(call())


def app_context(cp: Running, twin: TwinProcess, tmp_path: Path) -> AppContext:
    """A second, real application context on the same database and twin (to run a stage function directly)."""
    settings = Settings(data_dir=tmp_path / "stage", database_url=cp.database_url, aws_endpoint_url=twin.endpoint_url,
                        aws_region=twin.env["AWS_REGION"], poll_seconds=0.1, status_cache_seconds=CACHE_SECONDS)
    db = Database(settings.resolved_database_url)
    aws = AwsClients(settings)
    return AppContext(settings=settings, db=db, runner=Runner(settings, OperationStore(db), KINDS), aws=aws,
                      kube=KubeClients(aws), cache=DescribeCache(CACHE_SECONDS))


def run_stage(app: AppContext, params: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Run stage_verification as the engine would, collecting its progress messages."""
    messages: list[str] = []

    async def progress(message: str) -> None:
        messages.append(message)

    stage = StageContext(operation_id="op-test", kind="cluster_create", target=f"cluster:{TAG}",
                         params=VerificationParams.model_validate(params), raw_params=params, outputs={},
                         stage="verification", attempt=1, app=app, _progress=progress)
    return asyncio.run(stage_verification(stage)), messages


class RequestCounter:
    """Counts the control plane's outgoing HTTP requests (boto3 and the Kubernetes client both use urllib3)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    @staticmethod
    def key(method: str, url: str, headers: dict[str, Any] | None) -> str:
        target = (headers or {}).get("X-Amz-Target")
        if target:
            return target.decode() if isinstance(target, bytes) else str(target)
        return f"{method} {url.split('?', 1)[0]}"

    def count(self, method: str, url: str, headers: dict[str, Any] | None) -> None:
        with self.lock:
            self.counts[self.key(method, url, headers)] += 1


@pytest.fixture
def counter(monkeypatch: pytest.MonkeyPatch) -> Iterator[RequestCounter]:
    """Wrap urllib3's connection pool (a third-party transport, not our code) with a counter."""
    found = RequestCounter()
    original = urllib3.connectionpool.HTTPConnectionPool.urlopen

    def urlopen(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        found.count(method, url, kwargs.get("headers"))
        return original(self, method, url, *args, **kwargs)

    monkeypatch.setattr(urllib3.connectionpool.HTTPConnectionPool, "urlopen", urlopen)
    yield found


def test_storage_status_and_verification(cp: Running, twin: TwinProcess, tmp_path: Path) -> None:
    s3: Any = twin_client(twin, "s3")
    with cp.client() as client:
        # Before anything exists: no active cluster is a clear precondition error.
        assert client.get("/api/v1/clusters/status").json()["error"]["code"] == "PRECONDITION_FAILED"
        make_cluster(client, TAG)
        defaults = client.get("/api/v1/storage/s3/defaults").json()
        assert defaults["name"] == "s3-claim" and defaults["namespace"] == "default"
        assert defaults["bucketExists"] is True and defaults["driver"] == "s3.csi.aws.com"
        assert defaults["region"] == "us-west-2" and "region us-west-2" in defaults["mountOptions"]
        bucket = defaults["bucketName"]
        # Before storage exists: the status says the claim is missing and the cluster is not ready.
        status = wait_status(client, lambda s: s["nodesReadySchedulable"] == 1)
        assert status["ready"] is False
        assert any("s3-claim does not exist" in p for p in status["problems"]), status["problems"]
        assert status["latestOperation"]["kind"] == "hyperpod_create" and status["latestOperation"]["terminal"]
        assert status["stages"]["eks"] == "SUCCEEDED" and "storage" not in status["stages"]

        # Bad input is refused before any operation exists.
        missing = client.post("/api/v1/storage/s3", json={"bucketName": "no-such-bucket-st1"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
        bad = client.post("/api/v1/storage/s3", json={"bucketName": "Bad_Bucket"})
        assert bad.status_code == 422 and "bucketName" in bad.json()["error"]["message"]
        wrong_region = client.post("/api/v1/storage/s3", json={"region": "eu-west-1"})
        assert wrong_region.status_code == 422 and "region" in wrong_region.json()["error"]["message"]
        bad_name = client.post("/api/v1/storage/s3", json={"name": "Not_A_Name"})
        assert bad_name.status_code == 422 and "name" in bad_name.json()["error"]["message"]
        assert client.get("/api/v1/operations", params={"kind": "s3_storage_create"}).json()["total"] == 0

        # The agent path: s3_storage_create through an MCP client.
        ref = mcp_call(cp, "s3_storage_create", {})
        assert ref["statusTool"] == "operation_get"
        view = wait_terminal(client, ref["operationId"], timeout=60)
        assert view["status"] == "SUCCEEDED", view
        assert [s["name"] for s in view["stages"]] == ["storage"]
        out = view["stages"][0]["outputs"]
        assert out["claim"] == "s3-claim" and out["persistentVolume"] == "s3-claim-pv"
        assert out["bucketName"] == bucket and out["created"] == {"persistentVolume": True, "claim": True}
        # Re-running with the same values adopts what exists.
        again = wait_terminal(client, client.post("/api/v1/storage/s3", json={}).json()["operationId"], timeout=60)
        assert again["status"] == "SUCCEEDED"
        assert again["stages"][0]["outputs"]["created"] == {"persistentVolume": False, "claim": False}
        # The same name on another bucket is a conflict, not a silent change.
        s3.create_bucket(Bucket="other-bucket-st1", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
        other = client.post("/api/v1/storage/s3", json={"bucketName": "other-bucket-st1"}).json()
        failed = wait_terminal(client, other["operationId"], timeout=60)
        assert failed["status"] == "FAILED" and failed["error"]["code"] == "CONFLICT", failed
        assert "bucket is" in failed["error"]["message"]
        assert client.get("/api/v1/clusters").json()["clusters"][0]["stages"]["storage"] == "FAILED"
        # A second storage on the other bucket, under its own name, works.
        second = client.post("/api/v1/storage/s3", json={"name": "scratch", "bucketName": "other-bucket-st1"}).json()
        assert wait_terminal(client, second["operationId"], timeout=60)["status"] == "SUCCEEDED"

        # Listing: one level at a time, paths as the pods see them.
        own = f"clusters/{TAG}/data/"  # the default claim mounts only this cluster's data prefix
        for key in ("top.txt", "data/a.txt", "data/deep/b.txt"):
            s3.put_object(Bucket=bucket, Key=own + key, Body=b"hello")
        assert cp.clock is not None
        cp.clock.advance(CACHE_SECONDS)  # the listing read before these objects existed is no longer fresh
        listing = client.get("/api/v1/storage/s3/contents").json()
        assert listing["bucketName"] == bucket and listing["storage"] == "s3-claim"
        assert [o["path"] for o in listing["objects"]] == ["top.txt"] and listing["objects"][0]["size"] == 5
        assert listing["objects"][0]["key"] == own + "top.txt"
        assert "data/" in listing["commonPrefixes"] and listing["truncated"] is False  # relative, like paths
        data = client.get("/api/v1/storage/s3/contents", params={"prefix": "data/"}).json()
        assert [o["path"] for o in data["objects"]] == ["data/a.txt"] and data["commonPrefixes"] == ["data/deep/"]
        unknown = client.get("/api/v1/storage/s3/contents", params={"storage": "nothing-here"})
        assert unknown.status_code == 404 and "s3_storage_create" in unknown.json()["error"]["hint"]

        # The status: one Ready, schedulable node with one L4 GPU; both claims bound; ready.
        status = wait_status(client, lambda s: s["ready"])
        assert status["ready"] is True, status["problems"]
        assert status["hyperpodStatus"] == "InService" and status["kubernetesReachable"] is True
        assert status["latestOperation"]["kind"] == "s3_storage_create"
        assert status["latestOperation"]["status"] == "SUCCEEDED" and status["stages"]["storage"] == "SUCCEEDED"
        assert status["nodeCount"] == 1 and status["nodesReadySchedulable"] == 1
        node = status["nodes"][0]
        assert node["instanceType"] == "ml.g6.4xlarge" and node["instanceGroup"] == f"accelerated-{TAG}"
        assert node["ready"] and node["schedulable"] and node["healthStatus"] == "Schedulable"
        assert node["gpus"] == 1 and node["zone"] == "us-west-2c"
        assert status["accelerators"] == [{"instanceType": "ml.g6.4xlarge", "nodes": 1, "nodesReady": 1,
                                           "gpuTotal": 1, "gpuAllocated": 0, "gpuAvailable": 1,
                                           "neuronTotal": 0, "neuronAllocated": 0}]
        group = status["instanceGroups"][0]
        assert (group["currentCount"], group["targetCount"], group["nodesReadySchedulable"]) == (1, 1, 1)
        claims = {c["name"]: c for c in status["storage"]}
        assert claims["s3-claim"]["bound"] and claims["s3-claim"]["volumeName"] == "s3-claim-pv"
        assert claims["s3-claim"]["managed"] and claims["scratch"]["bound"]

    # A pod that requests the GPU: allocated 1, available 0.
    app = app_context(cp, twin, tmp_path)
    api = app.kube.api_client(f"eks-cluster-{TAG}", "us-west-2")
    pod: Any = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "gpu-user"},
        "spec": {"containers": [{"name": "c", "image": "busybox",
                                 "resources": {"limits": {"nvidia.com/gpu": "1"}},
                                 "volumeMounts": [{"name": "s3", "mountPath": "/data"}]}],
                 "volumes": [{"name": "s3", "persistentVolumeClaim": {"claimName": "s3-claim"}}]},
    }
    k8s.CoreV1Api(api).create_namespaced_pod("default", pod)
    with cp.client() as client:
        status = wait_status(client, lambda s: s["accelerators"][0]["gpuAllocated"] == 1)
        assert status["accelerators"][0]["gpuAvailable"] == 0 and status["nodes"][0]["gpusAllocated"] == 1

        # Through an MCP client too: the same status the agent sees.
        agent = mcp_call(cp, "cluster_get_status", {})
        assert agent["ready"] is True and agent["accelerators"][0]["gpuTotal"] == 1

    # The verification stage (what cluster_create runs last) passes on this cluster …
    summary, messages = run_stage(app, {"clusterTag": TAG, "region": "us-west-2"})
    assert summary["nodesReadySchedulable"] == 1 and summary["storageClaim"] == "s3-claim"
    assert summary["accelerators"][0]["gpuTotal"] == 1
    assert messages[-1].startswith("verified: 1 node(s)")
    # … and, when a claim it needs is missing, waits and then fails with the problem named and a hint.
    with pytest.raises(VerificationFailed) as info:
        run_stage(app, {"clusterTag": TAG, "region": "us-west-2", "storage": {"name": "absent"},
                        "verifyWaitSeconds": 0.3})
    assert info.value.code == "VERIFICATION_FAILED" and "default/absent does not exist" in info.value.message
    assert info.value.hint and "cluster_get_status" in info.value.hint
    # A cordoned node no longer counts: the group's count does not match and the status says so.
    node_name = status["nodes"][0]["name"]
    k8s.CoreV1Api(api).patch_node(node_name, {"spec": {"unschedulable": True}})
    with cp.client() as client:
        status = wait_status(client, lambda s: not s["ready"])
        assert status["nodes"][0]["schedulable"] is False and status["accelerators"][0]["gpuAvailable"] == 0
        assert any(f"accelerated-{TAG}: 0 of 1 nodes" in p for p in status["problems"]), status["problems"]
    app.cache.invalidate()  # this context's own reads from the runs above are still fresh for a second
    with pytest.raises(VerificationFailed) as info:
        run_stage(app, {"clusterTag": TAG, "region": "us-west-2", "verifyWaitSeconds": 0.3})
    assert "0 of 1 nodes Ready and schedulable" in info.value.message
    app.informers.stop()
    app.db.dispose()


def test_status_reads_are_cached_and_coalesced(cp: Running, twin: TwinProcess, counter: RequestCounter) -> None:
    with cp.client() as client:
        make_cluster(client, TAG, onStartDeepHealthChecks=True)
        # With deep health checks the node is Ready but not schedulable until they pass.
        status = wait_status(client, lambda s: s["nodesReadySchedulable"] == 1)
        assert status["nodes"][0]["deepHealthCheck"] == "Passed", status["nodes"]
        assert status["nodes"][0]["healthStatus"] == "Schedulable"
        assert cp.clock is not None
        cp.clock.advance(IDLE_CACHE_SECONDS * 1.1)  # every cached read expires (no operation runs: the idle interval)
        counter.counts.clear()
        polls = 24
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=polls) as pool:
            results = list(pool.map(lambda _: client.get("/api/v1/clusters/status").json(), range(polls)))
        elapsed = time.monotonic() - started
    assert all(r["nodeCount"] == 1 for r in results), results[0]
    allowed = 1 + int(elapsed / CACHE_SECONDS)  # one call per resource per cache interval
    # HyperPod: one describe per cache interval. Kubernetes: nothing at all, the watches already hold it.
    assert 1 <= counter.counts["SageMaker.DescribeCluster"] <= allowed, (elapsed, dict(counter.counts))
    kube_reads = {k: n for k, n in counter.counts.items() if k.startswith("GET /api")}
    assert not kube_reads, kube_reads
    # The lifecycle script's checksum (S3 GetObject, docs/SECURITY.md): one per cache interval as well.
    scripts = {k: n for k, n in counter.counts.items() if k.startswith("GET /") and k.endswith("/on_create.sh")}
    assert sum(scripts.values()) <= allowed, scripts
    # Nothing else, and each of these at most once per cache interval too (the capacity events' ListClusterEvents
    # expires with the same injected clock).
    others = {k: n for k, n in counter.counts.items() if k not in scripts}
    assert set(others) <= {"SageMaker.DescribeCluster", "SageMaker.ListClusterEvents"}, others
    assert all(n <= allowed for n in others.values()), (elapsed, others)


def test_status_of_a_cluster_whose_eks_is_not_up_is_an_answer_not_an_error(
    cp: Running, twin: TwinProcess, counter: RequestCounter
) -> None:
    # A cluster row whose EKS control plane does not exist (as after an interrupted creation).
    db = Database(cp.database_url)
    with db.session() as session:
        session.add(ClusterRow(tag="ghost", region="us-west-2", eks_cluster_name="eks-cluster-ghost",
                               hyperpod_cluster_name="hp-cluster-ghost", stages={"eks": "RUNNING"}, details={}))
    set_active_cluster(db, "ghost")
    db.dispose()
    polls = 16
    with cp.client() as client:
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=polls) as pool:
            results = list(pool.map(lambda _: client.get("/api/v1/clusters/status").json(), range(polls)))
        elapsed = time.monotonic() - started
        missing = client.post("/api/v1/storage/s3", json={})
    status = results[0]
    assert status["ready"] is False and status["kubernetesReachable"] is False
    assert status["hyperpodStatus"] == "NOT_FOUND" and status["nodes"] == [] and status["latestOperation"] is None
    assert any("not reachable" in p for p in status["problems"]) and status["stages"] == {"eks": "RUNNING"}
    allowed = 1 + int(elapsed / CACHE_SECONDS)
    assert 1 <= counter.counts["GET /clusters/eks-cluster-ghost"] <= allowed, dict(counter.counts)  # EKS describe
    assert 1 <= counter.counts["SageMaker.DescribeCluster"] <= allowed, dict(counter.counts)
    assert sum(counter.counts.values()) <= 2 * allowed, dict(counter.counts)
    # Storage needs the EKS stage first.
    assert missing.status_code == 412 and "EKS stage" in missing.json()["error"]["message"]
