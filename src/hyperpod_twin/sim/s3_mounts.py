"""Mountpoint for S3 CSI mounts: files a running pod writes under a mount of an S3 CSI claim become objects."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.core import PODS, PVCS, PVS, Controller, nsname
from hyperpod_twin.sim.kobj import Obj

log = logging.getLogger(__name__)

S3_CSI = "s3.csi.aws.com"
# JSON object {"/mount/path/file": "content", ...}: files the pod's first container writes once Running.
WRITE_FILES = "twin.instantstart.io/write-files"


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
    ns = pod["metadata"]["namespace"]
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    mounts = sorted(container.get("volumeMounts") or [], key=lambda vm: -len(vm.get("mountPath", "")))
    for mount in mounts:
        root = str(mount.get("mountPath", "")).rstrip("/")
        if not root or not (path == root or path.startswith(root + "/")):
            continue
        claim_name = ((volumes.get(mount.get("name")) or {}).get("persistentVolumeClaim") or {}).get("claimName")
        pvc = sim.get(PVCS, ns, claim_name) if claim_name else None
        pv = sim.get(PVS, "", (pvc or {}).get("spec", {}).get("volumeName") or "") if pvc else None
        csi = ((pv or {}).get("spec") or {}).get("csi") or {}
        if pv is None or csi.get("driver") != S3_CSI:
            return None
        bucket = (csi.get("volumeAttributes") or {}).get("bucketName")
        prefix = mount_option(pv, "prefix") or ""
        relative = path[len(root) :].lstrip("/")
        sub = str(mount.get("subPath") or "").strip("/")
        key = "/".join(part for part in (prefix.rstrip("/"), sub, relative) if part)
        return S3Target(str(bucket), key, mount_option(pv, "region"))
    return None


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
        for path, content in files.items():
            target = resolve(self.sim, pod, container, path)
            if target is None:
                continue  # not on an S3 mount: the container's own filesystem
            self.writer.submit(_put(target, str(content).encode()))
