"""Mountpoint for S3 CSI mounts: files a running pod writes under a mount of an S3 CSI claim become objects. Each
request Mountpoint makes for it (the lookup of the name, then the upload) is allowed or denied by the IAM policies
of the role the driver runs as (its Pod Identity association, else the node's HyperPod execution role), as on a
real node, and recorded as that role's use (hyperpod_twin.role_usage)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_twin.role_usage import role_documents, use
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import NODES, PODS, PVCS, PVS, nsname
from hyperpod_twin.sim.kobj import Obj

log = logging.getLogger(__name__)

S3_CSI = "s3.csi.aws.com"
# JSON object {"/mount/path/file": "content", ...}: files the pod's first container writes once Running.
WRITE_FILES = "twin.instantstart.io/write-files"
# The Mountpoint for S3 CSI driver's service account (the EKS add-on's): its Pod Identity role signs the writes.
CSI_NAMESPACE, CSI_SERVICE_ACCOUNT = "kube-system", "s3-csi-driver-sa"
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
DENIED_REASON = "S3WriteDenied"


def mount_option(pv: Obj, name: str) -> str | None:
    """The value of a Mountpoint option ("region us-west-2", "prefix a/") of a PV."""
    for option in (pv.get("spec") or {}).get("mountOptions") or []:
        head, _, value = str(option).partition(" ")
        if head == name and value:
            return value.strip()
    return None


class S3Target:
    """Where a path inside a pod lands in S3: bucket, key, Region (None when not on an S3 CSI mount)."""

    def __init__(self, bucket: str, key: str, region: str | None) -> None:
        self.bucket, self.key, self.region = bucket, key, region


def resolve(sim: Any, pod: Obj, container: Obj, path: str) -> S3Target | None:
    """Map `path` in `container` of `pod` to its S3 object through volumeMount → claim → S3 CSI PV."""
    found = kobj.covering_mount(pod, container, path)
    if found is None:
        return None
    _, volume, inside = found
    claim_name = (volume.get("persistentVolumeClaim") or {}).get("claimName")
    pvc = sim.get(PVCS, pod["metadata"]["namespace"], claim_name) if claim_name else None
    pv = sim.get(PVS, "", (pvc or {}).get("spec", {}).get("volumeName") or "") if pvc else None
    csi = ((pv or {}).get("spec") or {}).get("csi") or {}
    if pv is None or csi.get("driver") != S3_CSI:
        return None
    bucket = (csi.get("volumeAttributes") or {}).get("bucketName")
    prefix = mount_option(pv, "prefix") or ""
    key = "/".join(part for part in (prefix.rstrip("/"), inside) if part)
    return S3Target(str(bucket), key, mount_option(pv, "region"))


class S3Writer:
    """Uploads on one background thread (a mount's writes are network calls, never on the sim's loop)."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self._executor: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[[Any], None]) -> bool:
        """Run fn(s3 client) off the loop; False when the twin gave the simulator no AWS client."""
        factory = self.sim.extra.get("boto3_client")
        if factory is None:
            return False
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="twin-s3-mounts")

        def run() -> None:
            try:
                fn(factory("s3"))
            except Exception as exc:  # a failed upload is a log line, as on a node
                log.warning("s3 mount write failed: %s", exc)

        self._executor.submit(run)
        return True

    def stop(self) -> None:
        """Finish queued uploads and stop the thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None


def node_role(factory: Callable[[str], Any], hyperpod: str | None, group: str | None) -> str | None:
    """The execution role of the node's instance group (its instance profile); None when unknown."""
    if not hyperpod:
        return None
    groups = factory("sagemaker").describe_cluster(ClusterName=hyperpod).get("InstanceGroups") or []
    roles = [g.get("ExecutionRole") for g in groups if group is None or g.get("InstanceGroupName") == group]
    return str(roles[0]) if roles and roles[0] else None


def driver_role(factory: Callable[[str], Any], eks_cluster: str, hyperpod: str | None, group: str | None) -> str | None:
    """The role ARN Mountpoint's requests are signed with: the CSI service account's Pod Identity association,
    else the execution role of the node's instance group (the node's instance profile); None when neither.
    Pod Identity credentials come from the node's EKS Pod Identity Agent, which calls
    eks-auth:AssumeRoleForPodIdentity with the node's role (recorded as that role's use)."""
    eks = factory("eks")
    found = eks.list_pod_identity_associations(
        clusterName=eks_cluster, namespace=CSI_NAMESPACE, serviceAccount=CSI_SERVICE_ACCOUNT
    ).get("associations") or []
    if found:
        answer = eks.describe_pod_identity_association(clusterName=eks_cluster, associationId=found[0]["associationId"])
        association = answer["association"]
        agent = node_role(factory, hyperpod, group)
        if agent is not None:
            cluster_arn = str(eks.describe_cluster(name=eks_cluster)["cluster"]["arn"])
            documents = role_documents(factory("iam"), agent)
            if use(documents, agent, "eks-auth:AssumeRoleForPodIdentity", cluster_arn) != "Allow":
                raise WriteDenied(f"AccessDenied: {agent} is not authorized to perform "
                                  f"eks-auth:AssumeRoleForPodIdentity on {cluster_arn} (no Pod Identity credentials)")
        return str(association["roleArn"])
    return node_role(factory, hyperpod, group)


class WriteDenied(Exception):
    """IAM refused a request Mountpoint made for a file operation."""


# What Mountpoint sends for a file operation, as (IAM action, resource kind): creating or opening a name first
# looks it up (HeadObject on the key, authorized as s3:GetObject, and ListObjectsV2 with prefix "<key>/", as
# s3:ListBucket with that s3:prefix); a written file is uploaded with PutObject (multipart parts are s3:PutObject).
LOOKUP = (("s3:GetObject", "object"), ("s3:ListBucket", "bucket"))
WRITE = (*LOOKUP, ("s3:PutObject", "object"))


def authorize(
    factory: Callable[[str], Any], where: dict[str, str | None], target: S3Target,
    requests: tuple[tuple[str, str], ...] = WRITE,
) -> None:
    """Raise WriteDenied unless the driver's role may make every request of the operation on the target."""
    role = driver_role(factory, str(where["eks"]), where.get("hyperpod"), where.get("group"))
    if role is None:
        raise WriteDenied(f"no credentials: no Pod Identity role for {CSI_NAMESPACE}/{CSI_SERVICE_ACCOUNT}")
    documents = role_documents(factory("iam"), role)
    for action, kind in requests:
        if kind == "bucket":
            resource, context = f"arn:aws:s3:::{target.bucket}", {"s3:prefix": f"{target.key}/"}
        else:
            resource, context = f"arn:aws:s3:::{target.bucket}/{target.key}", {}
        decision = use(documents, role, action, resource, context)
        if decision != "Allow":
            raise WriteDenied(f"AccessDenied: {role} is not authorized to perform {action} on {resource} ({decision})")


def mount_context(sim: Any, pod: Obj) -> dict[str, str | None]:
    """What decides the driver's role for a pod's writes: the EKS cluster, the HyperPod cluster, the node's group."""
    node = sim.get(NODES, "", pod["spec"].get("nodeName") or "") if pod["spec"].get("nodeName") else None
    return {
        "eks": sim.runtime.name,
        "hyperpod": sim.extra.get("hyperpod_cluster_name"),
        "group": ((node or {}).get("metadata", {}).get("labels") or {}).get(GROUP_LABEL),
    }


def deny(sim: Any, pod: Obj, container: str, path: str, target: S3Target, exc: WriteDenied,
         verb: str = "write") -> None:
    """What the pod sees of a refused request: an EIO line in its log and a Warning event (Mountpoint logs the
    403 and fails the file operation)."""
    md = pod["metadata"]
    message = f"{verb} {path}: Input/output error (s3://{target.bucket}/{target.key}: {exc})"
    sim.runtime.logs.append(md["namespace"], md["name"], container, message)
    sim.after(0, lambda: sim.event(pod, DENIED_REASON, message, "Warning", "mountpoint-s3"))


def guarded_exists(sim: Any, pod: Obj, container: str, where: dict[str, str | None], path: str, target: S3Target,
                   s3: Any) -> bool | None:
    """`os.path.exists` of a file on the mount: Mountpoint's lookup, after IAM allows it (on the writer
    thread); None when refused (the pod sees the EIO)."""
    try:
        authorize(sim.extra["boto3_client"], where, target, LOOKUP)
    except WriteDenied as exc:
        deny(sim, pod, container, path, target, exc, verb="stat")
        return None
    found = s3.list_objects_v2(Bucket=target.bucket, Prefix=target.key, MaxKeys=1).get("Contents") or []
    return any(item.get("Key") == target.key for item in found)


def guarded_put(sim: Any, pod: Obj, container: str, where: dict[str, str | None], path: str, target: S3Target,
                body: bytes, s3: Any) -> bool:
    """Upload one object written through the mount, after IAM allows it (on the writer thread). A denial is
    what the pod sees: an EIO line in its log and a Warning event (Mountpoint logs the 403, fails the write)."""
    try:
        authorize(sim.extra["boto3_client"], where, target)
    except WriteDenied as exc:
        deny(sim, pod, container, path, target, exc)
        return False
    _put(target, body)(s3)
    return True


def _put(target: S3Target, body: bytes) -> Callable[[Any], None]:
    def put(s3: Any) -> None:
        s3.put_object(Bucket=target.bucket, Key=target.key, Body=body)

    return put


class S3MountWriter(Controller):
    """A Running pod annotated with twin.instantstart.io/write-files writes those files once; each file on
    an S3 CSI mount becomes the object <PV prefix><subPath>/<path below the mount> of the PV's bucket."""

    watches = (PODS,)

    def __init__(self, sim: Any) -> None:
        super().__init__(sim)
        self.writer = S3Writer(sim)
        self._done: set[str] = set()

    def stop(self) -> None:
        """Stop the upload thread."""
        self.writer.stop()

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        pod = self.sim.get(PODS, ns, name)
        if pod is None or (pod.get("status") or {}).get("phase") != "Running":
            return
        uid = pod["metadata"]["uid"]
        raw = kobj.annotation(pod, WRITE_FILES)
        if not raw or uid in self._done:
            return
        self._done.add(uid)
        try:
            files: dict[str, str] = json.loads(raw)
        except ValueError:
            log.warning("pod %s/%s: %s is not a JSON object", ns, name, WRITE_FILES)
            return
        container = (pod["spec"].get("containers") or [{}])[0]
        where = mount_context(self.sim, pod)
        for path, content in files.items():
            target = resolve(self.sim, pod, container, path)
            if target is None:
                continue  # not on an S3 mount: the container's own filesystem
            self.writer.submit(self._write(pod, container, where, path, target, str(content).encode()))

    def _write(
        self, pod: Obj, container: Obj, where: dict[str, str | None], path: str, target: S3Target, body: bytes
    ) -> Callable[[Any], None]:
        """The upload, after IAM allows it; a denial is what the pod sees: an EIO line in its log and a
        Warning event on the pod (Mountpoint logs the 403 and fails the write)."""
        def write(s3: Any) -> None:
            guarded_put(self.sim, pod, str(container.get("name", "")), where, path, target, body, s3)

        return write
