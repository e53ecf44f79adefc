"""job_get_status and inference_list_services against the twin: served from the cluster's watches (the job from its
kind's watch, its pods through the pod-label index, model servers from the deployments and services watches), and,
during a watch outage, the last watched state marked stale with its age, like cluster_get_status, also with the
whole API server unreachable and a job kind whose CRD was found absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.manifests import inference as mi
from instantstart.manifests import training as training_manifests
from instantstart.twin_process import TwinProcess
from tests.support.flows import kube, make_eks
from tests.support.servers import Running
from tests.support.waits import until
from tests.support.watches import install, pytorch_job, twin_kube

TAG = "wj1"


def server(name: str) -> mi.ServerSpec:
    """A vLLM model server as inference_deploy_container records it."""
    return mi.ServerSpec(name=name, namespace="default", engine="vllm", command=["vllm", "serve", "org/m"],
                         image="vllm/vllm-openai:v0.11.0", gpu_count=1, replicas=2, instance_types=["ml.g6.4xlarge"],
                         port=8000, service_type="ClusterIP", model="org/m", token_secret=None, s3_claim=None)


def watch_states(answer: dict[str, Any]) -> dict[str, str]:
    """{kind: state} of the watches behind a watch-fed answer (none for an error body)."""
    return {w["kind"]: w["state"] for w in (answer.get("watch") or {}).get("watches") or []}


def test_job_status_and_model_servers_come_from_the_watches_and_say_stale_during_an_outage(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
        core = kube(twin, tmp_path, TAG)
        api = core.api_client
        params = {"clusterTag": TAG}

        def status() -> dict[str, Any]:
            body: dict[str, Any] = client.get("/api/v1/training/jobs/status", params={**params, "jobName": "wj"}).json()
            return body

        def servers() -> dict[str, Any]:
            body: dict[str, Any] = client.get("/api/v1/inference/services", params=params).json()
            return body

        def job_pods_on_server() -> set[str]:
            found = core.list_namespaced_pod("default", label_selector=f"{training_manifests.POD_JOB_LABEL}=wj")
            return {p.metadata.name for p in found.items}

        # A training job: the twin's training operator makes one pod per node, labelled with the job's name.
        install(api, "training-operator")
        k8s.CustomObjectsApi(api).create_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            pytorch_job("wj"),
        )
        until(lambda: len(job_pods_on_server()) == 2, "the operator's two pods")
        until(lambda: (s := status())["source"] == "watch" and {p["name"] for p in s["pods"]} == job_pods_on_server(),
              "the job and its pods from the watches")
        watched = status()
        assert watched["job"]["name"] == "wj" and watched["job"]["nodes"] == 2 and watched["image"] == "example/train:1"
        assert watched["watch"]["synced"] and not watched["watch"]["stale"] and watched["note"] is None, watched
        states = {w["kind"]: w["state"] for w in watched["watch"]["watches"]}
        assert states == {"hyperpodpytorchjobs": "synced", "rayjobs": "absent", "pods": "synced"}, states
        # A pod that gets the job's label joins the answer, and leaves it when deleted (the index follows changes).
        extra = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "wj-extra", "labels": {training_manifests.POD_JOB_LABEL: "wj"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        }
        core.create_namespaced_pod("default", extra)
        until(lambda: "wj-extra" in {p["name"] for p in status()["pods"]}, "the labelled pod in the job's pods")
        core.delete_namespaced_pod("wj-extra", "default", grace_period_seconds=0)
        until(lambda: "wj-extra" not in {p["name"] for p in status()["pods"]}, "the deleted pod gone from the job")

        # Model servers: a managed Deployment and its Service; an unmanaged Deployment is not one of them.
        spec = server("llm")
        k8s.AppsV1Api(api).create_namespaced_deployment("default", mi.deployment(spec))
        core.create_namespaced_service("default", mi.service(spec, load_balancer_controller=False))
        k8s.AppsV1Api(api).create_namespaced_deployment("default", {
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "plain"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "plain"}},
                     "template": {"metadata": {"labels": {"app": "plain"}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})
        until(lambda: (x := servers())["source"] == "watch" and x["count"] == 1 and x["services"][0]["service"],
              "the model server from the watches")
        listed = servers()
        got = listed["services"][0]
        service = mi.service_name("llm")
        assert (got["name"], got["engine"], got["model"], got["service"], got["serviceType"], got["replicasDesired"],
                got["gpusPerReplica"], got["url"]) == (
            "llm", "vllm", "org/m", service, "ClusterIP", 2, 1, f"http://{service}.default.svc.cluster.local:8000")
        assert not listed["watch"]["stale"] and listed["note"] is None

        # A watch outage: both answers are the last watched state, marked stale with its age (no direct read).
        twin_kube(twin, TAG, "watches/block", {"blocked": True})
        try:
            until(lambda: status()["watch"]["stale"], "the job status to say stale")
            stale = status()
            assert stale["source"] == "watch" and stale["job"]["name"] == "wj", stale
            assert stale["watch"]["dataAgeSeconds"] is not None
            assert "stale" in stale["note"] and "ago" in stale["note"], stale["note"]
            assert {p["name"] for p in stale["pods"]} == job_pods_on_server()
            until(lambda: servers()["watch"]["stale"], "the model servers to say stale")
            held = servers()
            assert held["source"] == "watch" and held["count"] == 1 and "stale" in held["note"], held
            # cluster_get_status says it in the same words.
            cluster = client.get("/api/v1/clusters/status").json()
            problems = cluster.get("problems")
            assert problems is not None, cluster
            assert any(p.startswith(stale["note"].split(";")[0]) for p in problems), problems
            # The whole API server unreachable too: the rayjobs watch, which had found KubeRay's CRD absent, now
            # fails its checks. Its last state (no RayJobs) still counts: the job and the job list are still the
            # last watched state, stale, not a direct read that fails.
            twin_kube(twin, TAG, "api/block", {"blocked": True})
            until(lambda: watch_states(status()).get("rayjobs") == "reconnecting",
                  "the rayjobs watch to lose the API server")
            blocked = status()
            assert blocked["source"] == "watch" and blocked["watch"]["stale"], blocked
            assert blocked["job"]["name"] == "wj" and "stale" in blocked["note"], blocked
            jobs = client.get("/api/v1/training/jobs", params=params).json()
            assert jobs["source"] == "watch" and jobs["watch"]["stale"], jobs
            assert [j["name"] for j in jobs["jobs"]] == ["wj"] and "stale" in jobs["note"], jobs
        finally:
            twin_kube(twin, TAG, "api/block", {"blocked": False})
            twin_kube(twin, TAG, "watches/block", {"blocked": False})
        until(lambda: not status()["watch"]["stale"] and not servers()["watch"]["stale"], "the recovered watches")
        assert status()["note"] is None
