"""Simulated training containers that write to MLflow: rank 0 of a pod whose env names a tracking server logs one
run (the job's loss per step, as its default log lines show) through the MLflow REST API of the twin's real
`mlflow server`, resolving a SageMaker tracking server ARN as the sagemaker-mlflow plugin does. Each request is
signed as the role of the pod's service account (its Pod Identity association) and decided by that role's policies
(hyperpod_twin.role_usage): a refusal is a 403 line in the pod's log and no run."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from hyperpod_twin.role_usage import role_documents, use
from hyperpod_twin.sim.kobj import Obj

if TYPE_CHECKING:
    from hyperpod_twin.sim.core import ClusterSim

log = logging.getLogger(__name__)
STEPS = 5
RESOLVE_LIMIT = 300.0  # seconds to wait for a tracking server still being created
# The IAM action of each MLflow REST call log_run makes (the sagemaker-mlflow service's action names).
ACTIONS = {
    "experiments/get-by-name": "sagemaker-mlflow:GetExperimentByName",
    "experiments/create": "sagemaker-mlflow:CreateExperiment",
    "runs/create": "sagemaker-mlflow:CreateRun",
    "runs/log-batch": "sagemaker-mlflow:LogBatch",
    "runs/update": "sagemaker-mlflow:UpdateRun",
}


class Refused(Exception):
    """IAM refused a request the pod's MLflow client made."""


class Signer:
    """Decides each request of a pod's MLflow client as its service account's Pod Identity role (no role, no
    factory or an http:// URI: nothing to decide, as with a tracking server outside SageMaker)."""

    def __init__(self, sim: ClusterSim, pod: Obj, uri: str) -> None:
        self.arn = uri if uri.startswith("arn:") else ""
        self.role: str | None = None
        self.documents: list[dict[str, Any]] = []
        factory = sim.extra.get("boto3_client")
        if not self.arn or factory is None:
            return
        md, account = pod["metadata"], pod["spec"].get("serviceAccountName") or "default"
        eks = factory("eks")
        found = eks.list_pod_identity_associations(
            clusterName=sim.runtime.name, namespace=md["namespace"], serviceAccount=account).get("associations") or []
        if not found:
            raise Refused(f"no credentials: no Pod Identity association for {md['namespace']}/{account}")
        association = eks.describe_pod_identity_association(
            clusterName=sim.runtime.name, associationId=found[0]["associationId"])["association"]
        self.role = str(association["roleArn"])
        self.documents = role_documents(factory("iam"), self.role)

    def check(self, action: str) -> None:
        """Raise Refused unless the role may perform the action on the tracking server."""
        if self.role is None:
            return
        decision = use(self.documents, self.role, action, self.arn)
        if decision != "Allow":
            raise Refused(f"403 AccessDenied: {self.role} is not authorized to perform {action} on {self.arn} "
                          f"({decision})")


def loss(step: int) -> float:
    """The simulated loss at `step` (the same curve as the container's default log lines)."""
    return round(2.5 / step, 3)


def start(sim: ClusterSim, pod: Obj) -> None:
    """Log a run in the background when the pod's first container is rank 0 of an MLflow-tracked job."""
    containers = pod["spec"].get("containers") or []
    if not containers:
        return
    env = {e.get("name"): e.get("value") for e in containers[0].get("env") or []}
    uri, experiment = env.get("MLFLOW_TRACKING_URI"), env.get("MLFLOW_EXPERIMENT_NAME")
    md = pod["metadata"]
    if not uri or not experiment or env.get("NODE_RANK", env.get("GROUP_RANK", "0")) != "0":
        return
    if (md.get("labels") or {}).get("ray.io/node-type") == "worker":
        return  # a Ray job's driver runs on the head
    job = (md.get("labels") or {}).get("HPJob") or env.get("MLFLOW_RUN_NAME") or md["name"]
    run_name = env.get("MLFLOW_RUN_NAME") or job

    def write(line: str) -> None:
        sim.runtime.logs.append(md["namespace"], md["name"], containers[0]["name"], line)

    def run() -> None:
        try:
            signer = Signer(sim, pod, uri)
            signer.check("sagemaker:DescribeMlflowTrackingServer")  # the plugin resolves the ARN to its URL
            url = _resolve(sim, uri)
            if url is None:
                write(f"[twin] mlflow: tracking server {uri} is not reachable")
                return
            run_id = log_run(url, experiment, run_name, job, signer.check)
            write(f"[twin] mlflow: logged run {run_id} to experiment {experiment}")
        except Refused as exc:
            write(f"[twin] mlflow: {exc}")
        except (httpx.HTTPError, KeyError, ValueError) as exc:
            log.warning("mlflow run of %s failed: %s", md["name"], exc)
            write(f"[twin] mlflow: logging failed: {exc}")

    threading.Thread(target=run, name=f"mlflow-{md['name']}", daemon=True).start()


def _resolve(sim: ClusterSim, uri: str) -> str | None:
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    if sim.bus is None:
        return None
    deadline = time.monotonic() + RESOLVE_LIMIT
    while time.monotonic() < deadline:
        answers = sim.bus.publish("twin.mlflow.resolve", arn=uri)  # a URL, None (still creating) or "" (unknown)
        found = next((u for u in answers if u), None)
        if found:
            return str(found).rstrip("/")
        if None not in answers:
            return None
        threading.Event().wait(0.5)
    return None


def _call(client: httpx.Client, path: str, body: dict[str, Any], check: Callable[[str], None]) -> dict[str, Any]:
    check(ACTIONS[path])
    response = client.post(f"/api/2.0/mlflow/{path}", json=body)
    response.raise_for_status()
    answer: dict[str, Any] = response.json()
    return answer


def log_run(url: str, experiment: str, run_name: str, job: str,
            check: Callable[[str], None] = lambda action: None) -> str:
    """Create the experiment when absent, then one FINISHED run with `loss` per step; the run id. `check` decides
    each request's IAM action first (raises to refuse it)."""
    now = int(time.time() * 1000)
    with httpx.Client(base_url=url, timeout=30) as client:
        check(ACTIONS["experiments/get-by-name"])
        found = client.get("/api/2.0/mlflow/experiments/get-by-name", params={"experiment_name": experiment})
        if found.status_code == 200:
            experiment_id = str(found.json()["experiment"]["experiment_id"])
        else:
            experiment_id = str(_call(client, "experiments/create", {"name": experiment}, check)["experiment_id"])
        created = _call(client, "runs/create", {
            "experiment_id": experiment_id, "run_name": run_name, "start_time": now,
            "tags": [{"key": "instantstart.job", "value": job}]}, check)
        run_id = str(created["run"]["info"]["run_id"])
        metrics = [{"key": "loss", "value": loss(step), "timestamp": now + step, "step": step}
                   for step in range(1, STEPS + 1)]
        _call(client, "runs/log-batch", {"run_id": run_id, "metrics": metrics}, check)
        _call(client, "runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": now + STEPS + 1}, check)
    return run_id
