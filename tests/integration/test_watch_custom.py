"""Watch-fed custom resources against the twin: an informer on a CRD that is not installed waits ("absent") and
starts by itself once the CRD appears; a cut watch and a 410 resume without missing or duplicating a change;
training_job_list, inference_managed_list and job_get_status answer from the watches and, during a watch outage
(the API server reachable or not), serve the last watched state marked stale with its age, in the status tools'
sentence (job_get_status's outage is in test_watch_status_reads)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from kubernetes import client as k8s

from instantstart.kube.informers import Informer, InformerOptions
from instantstart.manifests import inference_endpoint as iec
from instantstart.manifests import labels
from instantstart.manifests import training as training_manifests
from instantstart.services.base.watch.custom import CUSTOM_KINDS
from instantstart.services.base.watch.state import Freshness
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
    found = objects.list_cluster_custom_object(
        training_manifests.GROUP, training_manifests.VERSION, training_manifests.PLURAL
    )
    return {f"{o['metadata']['namespace']}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
            for o in found["items"]}


def all_down(answer: dict[str, Any]) -> bool:
    """Whether every watch behind a watch-fed answer is disconnected (a CRD found absent has no watch to lose)."""
    return not any(w["connected"] for w in answer["watch"]["watches"])


def stale_age(answer: dict[str, Any]) -> float:
    """The age of a stale answer's data, checked against its watches and its note (the shared stale sentence)."""
    age: float = answer["watch"]["dataAgeSeconds"]
    assert age is not None and age >= 0, answer
    assert age == max(w["dataAgeSeconds"] for w in answer["watch"]["watches"]), answer
    sentence = Freshness(synced=True, stale=True, age_seconds=age).stale_note(f"eks-cluster-{OTHER}")
    assert answer["note"] == sentence and f"{age:.0f}s ago" in answer["note"], answer["note"]
    return age


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
            objects.create_namespaced_custom_object(
                training_manifests.GROUP,
                training_manifests.VERSION,
                "default",
                training_manifests.PLURAL,
                pytorch_job(name),
            )
        until(in_sync, "the three jobs")
        view_j1 = informer.snapshot()[1]["default/j1"]
        assert view_j1["spec"]["replicaSpecs"][0]["template"]["spec"]["nodeSelector"] == {
            labels.INSTANCE_TYPE_LABEL: "ml.g6.4xlarge"}
        assert "env" not in view_j1["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]  # pruned
        # 1. The connection drops: the changes made meanwhile arrive once the watch resumes from its version.
        twin_kube(twin, "watches/cut")
        objects.create_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            pytorch_job("j4"),
        )
        objects.patch_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            "j1",
            {"metadata": {"labels": {"v": "2"}}},
        )
        objects.delete_namespaced_custom_object(
            training_manifests.GROUP, training_manifests.VERSION, "default", training_manifests.PLURAL, "j2"
        )
        until(lambda: informer.health.reconnects >= 1 and in_sync(), "the resumed watch")
        assert informer.health.relists == 0
        # 2. An outage long enough for the history to be compacted: 410, then a relist reporting the difference.
        twin_kube(twin, "watches/block", {"blocked": True})
        until(lambda: not informer.health.connected, "the outage to be noticed")
        assert not informer.current()
        objects.create_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            pytorch_job("j5"),
        )
        objects.patch_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            "j4",
            {"metadata": {"labels": {"v": "2"}}},
        )
        objects.delete_namespaced_custom_object(
            training_manifests.GROUP, training_manifests.VERSION, "default", training_manifests.PLURAL, "j3"
        )
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


def test_job_and_endpoint_reads_come_from_the_watches_and_serve_the_last_state_stale_while_down(
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
        objects.create_namespaced_custom_object(
            training_manifests.GROUP,
            training_manifests.VERSION,
            "default",
            training_manifests.PLURAL,
            pytorch_job("watched-1"),
        )
        # Each informer that saw no CRD checks again by itself (backoff at most absent_retry_max apart).
        until(lambda: (found := job_list())["source"] == "watch" and found["count"] == 1
              and {w["state"] for w in found["watch"]["watches"]} == {"synced"}, "the job from the synced watches")
        listed = job_list()
        job = listed["jobs"][0]
        assert (job["name"], job["kind"], job["nodes"], job["instanceType"], job["recipe"]) == (
            "watched-1", training_manifests.KIND, 2, "ml.g6.4xlarge", "demo")
        assert listed["watch"]["synced"] and not listed["watch"]["stale"] and listed["note"] is None
        # job_get_status also needs the pods watch, which its first read starts and waits for a bounded time
        # (then reads directly): wait for the watched answer rather than bet on that bound under load.
        status: dict[str, Any] = {}

        def watched_status() -> bool:
            status.update(client.get("/api/v1/training/jobs/status", params={**params, "jobName": "watched-1"}).json())
            return status.get("source") == "watch"

        until(watched_status, "job_get_status from the watches")
        assert status["job"]["name"] == "watched-1", status
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

        # A watch outage: both lists are the last watched state, marked stale with its age, in the status tools'
        # sentence (no direct read, as job_get_status and inference_list_services). Each kind's watch notices
        # the outage by itself, so wait until every watch in each answer is down before asserting on it.
        twin_kube(twin, "watches/block", {"blocked": True}, OTHER)
        try:
            until(lambda: all_down(job_list()), "every job watch to notice the outage")
            objects.create_namespaced_custom_object(
                training_manifests.GROUP,
                training_manifests.VERSION,
                "default",
                training_manifests.PLURAL,
                pytorch_job("during-outage"),
            )
            began = time.time()
            stale = job_list()
            ended = time.time()
            assert stale["source"] == "watch" and stale["watch"]["synced"] and stale["watch"]["stale"], stale
            # The state the watches held when they dropped: not the job made since (a direct read would show it).
            assert [j["name"] for j in stale["jobs"]] == ["watched-1"] and stale["count"] == 1, stale
            age = stale_age(stale)
            until(lambda: all_down(endpoints()), "every endpoint watch to notice the outage")
            held = endpoints()
            assert held["source"] == "watch" and held["watch"]["stale"] and held["count"] == 1, held
            assert held["endpoints"][0]["name"] == "js-1"
            stale_age(held)
            # The whole API server unreachable too: still the last watched state, no error, and older now: its
            # age grew by the time that passed between the two reads (it is the age of the data, not of the read).
            twin_kube(twin, "api/block", {"blocked": True}, OTHER)
            later_began = time.time()
            later = job_list()
            later_ended = time.time()
            assert later["source"] == "watch" and later["watch"]["stale"], later
            assert [j["name"] for j in later["jobs"]] == ["watched-1"], later
            grew = stale_age(later) - age
            assert later_began - ended - 0.1 <= grew <= later_ended - began + 0.1, (age, grew)
            assert endpoints()["watch"]["stale"]
        finally:
            twin_kube(twin, "api/block", {"blocked": False}, OTHER)
            twin_kube(twin, "watches/block", {"blocked": False}, OTHER)
        until(lambda: (found := job_list())["source"] == "watch" and found["count"] == 2
              and not found["watch"]["stale"] and found["note"] is None, "the recovered watch")
