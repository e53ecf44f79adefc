"""Watch-fed custom resources against the twin: an informer on a CRD that is not installed waits ("absent") and
starts by itself once the CRD appears; a cut watch and a 410 resume without missing or duplicating a change;
training_job_list and inference_managed_list answer from the watches, read directly while a watch is down (and
say so), and serve the last watched state marked stale when the API server is unreachable; job_get_status answers
from the watches (its outage behaviour, the status tools', is in test_watch_status_reads)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.kube.informers import Informer, InformerOptions
from instantstart.manifests import inference_endpoint as iec
from instantstart.manifests import training as m
from instantstart.services.monitoring.custom import CUSTOM_KINDS
from instantstart.twin_process import TwinProcess
from tests.support.flows import changes_per_key, kube, make_eks
from tests.support.servers import Running
from tests.support.waits import until
from tests.support.watches import install, pytorch_job
from tests.support.watches import twin_kube as twin_kube_of

TAG = "wc1"
OTHER = f"{TAG}b"


def twin_kube(twin: TwinProcess, action: str, body: dict[str, Any] | None = None, tag: str = TAG) -> dict[str, Any]:
    """The twin's watch controls for this module's clusters."""
    return twin_kube_of(twin, tag, action, body)


def jobs(objects: k8s.CustomObjectsApi) -> dict[str, str]:
    """{namespace/name: resourceVersion} of the HyperPodPyTorchJobs on the server."""
    found = objects.list_cluster_custom_object(m.GROUP, m.VERSION, m.PLURAL)
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in found["items"]}


def test_a_custom_resource_watch_waits_for_its_crd_then_resumes_after_a_cut_and_a_410(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
    api = kube(twin, tmp_path, TAG).api_client
    objects = k8s.CustomObjectsApi(api)
    path, view = CUSTOM_KINDS["hyperpodpytorchjobs"]
    changes: list[tuple[str, str, str | None]] = []
    rvs: dict[str, str] = {}
    lock = threading.Lock()

    def project(obj: dict[str, Any]) -> dict[str, Any]:
        kept = view(obj)
        with lock:
            rvs[obj["metadata"]["name"]] = obj["metadata"]["resourceVersion"]
        return kept

    def record(kind: str, key: str, _old: dict[str, Any] | None, new: dict[str, Any] | None) -> None:
        with lock:
            changes.append((kind, key, None if new is None else rvs[new["metadata"]["name"]]))

    informer = Informer("hyperpodpytorchjobs", path, lambda: api, project, (record,),
                        InformerOptions(backoff_min=0.05, backoff_max=0.5, absent_retry_max=0.5)).start()

    def in_sync() -> bool:
        held = {k: rvs[v["metadata"]["name"]] for k, v in informer.snapshot()[1].items()}
        return held == jobs(objects)

    try:
        # No CRD yet: not an error, the informer says "absent", holds nothing and counts as current.
        # (current() holds for twice absent_retry_max after each check: polled, since a loaded machine may delay it)
        until(lambda: informer.health.state == "absent" and informer.current(), "the informer to find the CRD absent")
        assert not informer.items and informer.health.last_error is None
        assert informer.health.reconnects == 0
        install(api, "training-operator")
        until(lambda: informer.health.state == "synced" and informer.synced.is_set(), "the watch to start")
        for name in ("j1", "j2", "j3"):
            objects.create_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, pytorch_job(name))
        until(in_sync, "the three jobs")
        view_j1 = informer.snapshot()[1]["default/j1"]
        assert view_j1["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"] == {
            m.INSTANCE_TYPE_LABEL: "ml.g6.4xlarge"}
        assert "env" not in view_j1["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]  # pruned
        # 1. The connection drops: the changes made meanwhile arrive once the watch resumes from its version.
        twin_kube(twin, "watches/cut")
        objects.create_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, pytorch_job("j4"))
        objects.patch_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, "j1",
                                               {"metadata": {"labels": {"v": "2"}}})
        objects.delete_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, "j2")
        until(lambda: informer.health.reconnects >= 1 and in_sync(), "the resumed watch")
        assert informer.health.relists == 0
        # 2. An outage long enough for the history to be compacted: 410, then a relist reporting the difference.
        twin_kube(twin, "watches/block", {"blocked": True})
        until(lambda: not informer.health.connected, "the outage to be noticed")
        assert not informer.current()
        objects.create_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, pytorch_job("j5"))
        objects.patch_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, "j4",
                                               {"metadata": {"labels": {"v": "2"}}})
        objects.delete_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, "j3")
        twin_kube(twin, "history/compact")
        twin_kube(twin, "watches/block", {"blocked": False})
        until(lambda: informer.health.relists >= 1 and in_sync(), "the relist after 410")
        assert informer.current() and informer.health.state == "synced"
    finally:
        informer.stop()
        twin_kube(twin, "watches/block", {"blocked": False})
    with lock:
        seen = list(changes)
    assert changes_per_key(seen) == {
        "default/j1": ["ADDED", "MODIFIED"],
        "default/j2": ["ADDED", "DELETED"],
        "default/j3": ["ADDED", "DELETED"],
        "default/j4": ["ADDED", "MODIFIED"],
        "default/j5": ["ADDED"],
    }, seen


def test_job_and_endpoint_reads_come_from_the_watches_fall_back_while_down_and_say_stale(
    cp: Running, twin: TwinProcess, tmp_path: Path
) -> None:
    with cp.client() as client:
        make_eks(client, OTHER)
        api = kube(twin, tmp_path, OTHER).api_client
        objects = k8s.CustomObjectsApi(api)
        params = {"clusterTag": OTHER}

        def job_list() -> dict[str, Any]:
            body: dict[str, Any] = client.get("/api/v1/training/jobs", params=params).json()
            return body

        def endpoints() -> dict[str, Any]:
            body: dict[str, Any] = client.get("/api/v1/inference/managed", params=params).json()
            return body

        # The operators are off: no CRDs. Empty answers, and the watches say "absent" (no error).
        first = job_list()
        assert first["count"] == 0 and first["source"] in ("watch", "direct"), first
        until(lambda: job_list()["source"] == "watch", "the job list from the watches")
        assert {w["state"] for w in job_list()["watch"]["watches"]} == {"absent"}
        until(lambda: endpoints()["source"] == "watch", "the endpoint list from the watches")
        assert endpoints()["count"] == 0

        # The training operator and KubeRay arrive; a job submitted appears in the list from the watch.
        install(api, "training-operator")
        install(api, "kuberay")
        objects.create_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL, pytorch_job("watched-1"))
        # Each informer that saw no CRD checks again by itself (backoff at most absent_retry_max apart).
        until(lambda: (found := job_list())["source"] == "watch" and found["count"] == 1
              and {w["state"] for w in found["watch"]["watches"]} == {"synced"}, "the job from the synced watches")
        listed = job_list()
        job = listed["jobs"][0]
        assert (job["name"], job["kind"], job["nodes"], job["instanceType"], job["recipe"]) == (
            "watched-1", m.KIND, 2, "ml.g6.4xlarge", "demo")
        assert listed["watch"]["synced"] and not listed["watch"]["stale"] and listed["note"] is None
        status = client.get("/api/v1/training/jobs/status", params={**params, "jobName": "watched-1"}).json()
        assert status["source"] == "watch" and status["job"]["name"] == "watched-1", status
        assert status["image"] == "example/train:1" and status["runPolicy"]["jobMaxRetryCount"] >= 0
        missing = client.get("/api/v1/training/jobs/status", params={**params, "jobName": "nope"})
        assert missing.status_code == 404 and "watched-1" in missing.json()["error"]["hint"]

        # The inference operator arrives; a JumpStartModel appears in the endpoint list from the watch.
        install(api, "inference-operator")
        model = iec.jumpstart_model("js-1", "default", "huggingface-llm-qwen2-5-7b-instruct", "ml.g6.4xlarge",
                                    model_version=None, endpoint_name=None, accept_eula=True, replicas=1)
        objects.create_namespaced_custom_object(iec.GROUP, iec.VERSION, "default", iec.JUMPSTART_PLURAL, model)
        until(lambda: (found := endpoints())["source"] == "watch" and found["count"] == 1, "the endpoint")
        endpoint = endpoints()["endpoints"][0]
        assert (endpoint["name"], endpoint["kind"], endpoint["instanceType"]) == (
            "js-1", iec.JUMPSTART_KIND, "ml.g6.4xlarge")

        # A watch outage: answers come from a direct read, and say why.
        twin_kube(twin, "watches/block", {"blocked": True}, OTHER)
        try:
            until(lambda: job_list()["source"] == "direct", "the direct read during the outage")
            objects.create_namespaced_custom_object(m.GROUP, m.VERSION, "default", m.PLURAL,
                                                    pytorch_job("during-outage"))
            direct = job_list()
            assert direct["count"] == 2 and not direct["watch"]["synced"] and not direct["watch"]["stale"]
            assert "read directly" in direct["note"] and "reconnecting" in direct["note"], direct["note"]
            # The whole API server unreachable: the last watched state, marked stale with its age.
            twin_kube(twin, "api/block", {"blocked": True}, OTHER)
            stale = job_list()
            assert stale["source"] == "watch" and stale["watch"]["stale"], stale
            # The last state the informer held: its relists keep working while only watches are blocked, so it
            # may already hold the job made during the outage; it never holds anything that does not exist.
            held = {j["name"] for j in stale["jobs"]}
            assert "watched-1" in held and held <= {"watched-1", "during-outage"}, held
            assert stale["watch"]["dataAgeSeconds"] is not None
            assert "stale" in stale["note"] and "ago" in stale["note"], stale["note"]
            assert endpoints()["watch"]["stale"]
        finally:
            twin_kube(twin, "api/block", {"blocked": False}, OTHER)
            twin_kube(twin, "watches/block", {"blocked": False}, OTHER)
        until(lambda: (found := job_list())["source"] == "watch" and found["count"] == 2, "the recovered watch")
