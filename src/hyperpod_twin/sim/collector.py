"""The HyperPod observability add-on's collector, simulated for IAM: once a pod of the add-on runs, the collector
signs its Prometheus remote write to the AMP workspace of the add-on's configuration (aps:RemoteWrite) and, with
logging on, its CloudWatch Logs stream in the cluster's /aws/sagemaker/Clusters log group, as the role of its
service account's Pod Identity association; a refusal is a 403 line in the pod's log and a Warning event."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable
from typing import Any

from hyperpod_twin.role_usage import role_documents, use
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import PODS, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.s3_mounts import S3Writer

log = logging.getLogger(__name__)

ADDON = "amazon-sagemaker-hyperpod-observability"
NAMESPACE = "hyperpod-observability"
SERVICE_ACCOUNT = "hyperpod-observability-operator-otel-collector"
DENIED_REASON = "RemoteWriteDenied"


def requests(config: dict[str, Any], log_group: str | None) -> list[tuple[str, str]]:
    """(IAM action, resource) of what the collector sends: the remote write, then its log stream when logging is
    on (CreateLogStream once, then PutLogEvents)."""
    wanted = []
    workspace = str((config.get("ampWorkspace") or {}).get("arn") or "")
    if workspace:
        wanted.append(("aps:RemoteWrite", workspace))
    if (config.get("logging") or {}).get("enabled") and log_group:
        stream = f"{log_group}:log-stream:{SERVICE_ACCOUNT}"
        wanted += [("logs:CreateLogStream", stream), ("logs:PutLogEvents", stream)]
    return wanted


def refusal(factory: Callable[[str], Any], eks_cluster: str, hyperpod: str | None) -> str | None:
    """Send as the collector's role; the first refusal (None: all allowed, or nothing configured to send)."""
    eks = factory("eks")
    try:
        addon = eks.describe_addon(clusterName=eks_cluster, addonName=ADDON)["addon"]
    except Exception:  # the add-on went away meanwhile: nothing to send
        return None
    config = json.loads(addon.get("configurationValues") or "{}")
    found = eks.list_pod_identity_associations(
        clusterName=eks_cluster, namespace=NAMESPACE, serviceAccount=SERVICE_ACCOUNT
    ).get("associations") or []
    if not found:
        return f"no credentials: no Pod Identity association for {NAMESPACE}/{SERVICE_ACCOUNT}"
    association = eks.describe_pod_identity_association(clusterName=eks_cluster,
                                                        associationId=found[0]["associationId"])["association"]
    role = str(association["roleArn"])
    log_group = None
    if hyperpod:
        arn = str(factory("sagemaker").describe_cluster(ClusterName=hyperpod)["ClusterArn"])
        partition, region, account, cluster_id = arn.split(":")[1], arn.split(":")[3], arn.split(":")[4], \
            arn.rsplit("/", 1)[-1]
        log_group = f"arn:{partition}:logs:{region}:{account}:log-group:/aws/sagemaker/Clusters/{hyperpod}/{cluster_id}"
    documents = role_documents(factory("iam"), role)
    for action, resource in requests(config, log_group):
        decision = use(documents, role, action, resource)
        if decision != "Allow":
            return f"403 AccessDenied: {role} is not authorized to perform {action} on {resource} ({decision})"
    return None


class ObservabilityCollector(Controller):
    """Each running pod of the observability add-on sends once (off the sim's loop)."""

    watches = (PODS,)

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.sender = S3Writer(sim)
        self._done: set[str] = set()

    def stop(self) -> None:
        """Stop the sending thread."""
        self.sender.stop()

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        if ns != NAMESPACE:
            return
        pod = self.sim.get(PODS, ns, name)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running" or pod["metadata"]["uid"] in self._done:
            return
        self._done.add(pod["metadata"]["uid"])
        eks_cluster, hyperpod = self.sim.runtime.name, self.sim.extra.get("hyperpod_cluster_name")
        self.sender.submit(lambda _s3: self._send(pod, eks_cluster, hyperpod))

    def _send(self, pod: Obj, eks_cluster: str, hyperpod: str | None) -> None:
        problem = refusal(self.sim.extra["boto3_client"], eks_cluster, hyperpod)
        if problem is None:
            return
        md = pod["metadata"]
        container = str(((pod.get("spec") or {}).get("containers") or [{}])[0].get("name", ""))
        message = f"exporter failed to send: {problem}"
        self.sim.runtime.logs.append(md["namespace"], md["name"], container, message)
        self.sim.after(0, lambda: self.sim.event(pod, DENIED_REASON, message, "Warning", "otel-collector"))
