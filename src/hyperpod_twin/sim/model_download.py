"""The model download container, simulated: a Running pod whose program is the instantstart download script
fetches the repo from the hub stand-in into a real staging directory, copies each file through its S3 CSI
mount (objects in the twin's S3) or FSx CSI mount (the file system's contents) with sha256 and progress lines,
and writes manifest.json last."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

from hyperpod_twin.sim import fsx_mounts, kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.hf_hub import HUB, HubError
from hyperpod_twin.sim.kinds import NODES, PODS, SECRETS, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.kubelet import Kubelet
from hyperpod_twin.sim.s3_mounts import S3Target, S3Writer, guarded_exists, guarded_put, mount_context, resolve

log = logging.getLogger(__name__)

MARKER = "instantstart-model-download"  # the first line of the program the control plane's Job runs
MANIFEST = "manifest.json"
HOLD_SECONDS = 86400  # the kubelet's exit timer for a download container; the copy ends it much sooner


def is_download(container: Obj) -> bool:
    """Whether the container runs the download program (command, args or env carry its marker)."""
    text = " ".join([*(container.get("command") or []), *(container.get("args") or [])])
    values = " ".join(str(e.get("value") or "") for e in container.get("env") or [])
    return MARKER in text or MARKER in values


def env_of(sim: Any, ns: str, container: Obj) -> dict[str, str]:
    """The container's environment: literal values and secretKeyRef values read from the namespace's Secrets."""
    out: dict[str, str] = {}
    for item in container.get("env") or []:
        ref = (item.get("valueFrom") or {}).get("secretKeyRef")
        if ref:
            secret = sim.get(SECRETS, ns, ref.get("name", ""))
            raw = ((secret or {}).get("data") or {}).get(ref.get("key", ""))
            if raw is not None:
                out[item["name"]] = base64.b64decode(raw).decode()
        elif "value" in item:
            out[item["name"]] = str(item["value"])
    return out


class ModelDownloadContainer(Controller):
    """Runs the download program of each new download pod once (uploads off the sim's loop)."""

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
        containers = (pod or {}).get("spec", {}).get("containers") or []
        if pod is None or not containers or not is_download(containers[0]):
            return
        phase = (pod.get("status") or {}).get("phase", "Pending")
        if phase == "Pending" and not kobj.annotation(pod, kobj.RUN_SECONDS):
            # The program decides when the container exits (see _end), not the kubelet's default run time.
            kobj.meta(pod).setdefault("annotations", {})[kobj.RUN_SECONDS] = str(HOLD_SECONDS)
            self.sim.save(PODS, pod)
            return
        if phase != "Running" or pod["metadata"]["uid"] in self._done:
            return
        self._done.add(pod["metadata"]["uid"])
        container = containers[0]
        env = env_of(self.sim, ns, container)
        node = self.sim.get(NODES, "", pod["spec"].get("nodeName", "")) or {}
        itype = (node.get("metadata", {}).get("labels") or {}).get("node.kubernetes.io/instance-type", "")
        say = self._say(pod, container["name"])
        # HyperPod DLAMI nodes (ml.*) have their instance store at /opt/dlami/nvme; others use the emptyDir.
        say("staging on " + ("instance NVMe" if itype.startswith("ml.") else "emptyDir"))
        say("hub " + (env.get("HF_ENDPOINT") or "https://huggingface.co"))
        try:
            files = HUB.download(env.get("MODEL_ID", ""), env.get("REVISION", "main"), env.get("HF_TOKEN"))
        except HubError as exc:
            say(f"huggingface_hub.errors.HfHubHTTPError: {exc}")
            self._end(pod, 1)
            return
        dest = env.get("DEST_DIR", "")
        lustre = fsx_mounts.resolve(self.sim, pod, container, dest)
        if lustre is not None:
            self._to_lustre(pod, lustre, dest, files, say)
            return
        targets = {rel: resolve(self.sim, pod, container, f"{dest}/{rel}") for rel in [*sorted(files), MANIFEST]}
        if any(t is None for t in targets.values()):
            say(f"error: {dest} is not on an S3 or FSx mount")
            self._end(pod, 1)
            return
        model = {"modelId": env.get("MODEL_ID"), "revision": env.get("REVISION", "main")}
        where, cname = mount_context(self.sim, pod), str(container["name"])

        def put(s3: Any, target: S3Target, data: bytes) -> None:
            """A write through the mount: IAM decides (a denial fails the copy, as an EIO does)."""
            if not guarded_put(self.sim, pod, cname, where, target.key, target, data, s3):
                raise OSError(f"write s3://{target.bucket}/{target.key}: Input/output error")

        pace = HUB.pace(env.get("MODEL_ID", ""))

        def program(s3: Any) -> None:
            # The script first looks for dest/manifest.json (a lookup through the mount) and stops when present.
            manifest = targets[MANIFEST]
            assert manifest is not None
            present = guarded_exists(self.sim, pod, cname, where, f"{dest}/{MANIFEST}", manifest, s3)
            if present is None or present:
                say("already present" if present else f"error: stat {dest}/{MANIFEST}: Input/output error")
                self.sim.run(lambda: self._end(pod, 0 if present else 1))
                return
            if pace > 0:
                self.sim.run(lambda: self._paced(pod, files, targets, model, say, pace, put))
                return
            code = 1
            try:
                self._copy(s3, files, targets, model, say, put)
                code = 0
            except OSError as exc:
                say(f"error: {exc}")
            finally:
                self.sim.run(lambda: self._end(pod, code))

        self.writer.submit(program)

    def _to_lustre(self, pod: Obj, lustre: fsx_mounts.FsxPath, dest: str, files: dict[str, bytes], say: Any) -> None:
        """The program on an FSx for Lustre mount: plain file writes into the file system's contents (on the sim's
        loop: no network call to sign), the same lines and manifest as through an S3 mount."""
        env = env_of(self.sim, pod["metadata"]["namespace"], pod["spec"]["containers"][0])
        model = {"modelId": env.get("MODEL_ID"), "revision": env.get("REVISION", "main")}
        if f"{lustre.path}/{MANIFEST}" in lustre.files:
            say("already present")
            self._end(pod, 0)
            return
        if lustre.read_only:
            say(f"error: open {dest}/{sorted(files)[0] if files else MANIFEST}: Read-only file system")
            self._end(pod, 1)
            return
        targets: dict[str, S3Target | None] = {rel: S3Target("", f"{lustre.path}/{rel}", None)
                                               for rel in [*files, MANIFEST]}

        def write(_: Any, target: S3Target, data: bytes) -> None:
            lustre.files[target.key] = data

        self._copy(None, files, targets, model, say, write)
        self._end(pod, 0)

    def _copy(
        self, s3: Any, files: dict[str, bytes], targets: dict[str, S3Target | None], model: dict[str, Any], say: Any,
        put: Callable[[Any, S3Target, bytes], None],
    ) -> None:
        """Stage to a real directory, copy file by file with sha256 and progress, then the manifest."""
        stage = Path(tempfile.mkdtemp(prefix="twin-model-stage-"))
        try:
            for rel, body in files.items():
                (stage / rel).parent.mkdir(parents=True, exist_ok=True)
                (stage / rel).write_bytes(body)
            total, done, entries = sum(len(b) for b in files.values()), 0, []
            for i, rel in enumerate(sorted(files)):
                data = (stage / rel).read_bytes()
                target = targets[rel]
                assert target is not None
                put(s3, target, data)
                done += len(data)
                entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
                progress = {"files": i + 1, "filesTotal": len(files), "bytes": done, "bytesTotal": total}
                say("progress " + json.dumps(progress))
            manifest = targets[MANIFEST]
            assert manifest is not None
            body = json.dumps({**model, "files": entries, "totalBytes": total}).encode()
            put(s3, manifest, body)
            say(f"done {len(entries)} files")
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _paced(
        self,
        pod: Obj,
        files: dict[str, bytes],
        targets: dict[str, S3Target | None],
        model: dict[str, Any],
        say: Any,
        pace: float,
        put_through: Callable[[Any, S3Target, bytes], None],
    ) -> None:
        """The same copy, one file every `pace` twin seconds (a slow hub), staged in a real directory; it stops
        when the pod goes (its Job deleted)."""
        stage = Path(tempfile.mkdtemp(prefix="twin-model-stage-"))
        for rel, body in files.items():
            (stage / rel).parent.mkdir(parents=True, exist_ok=True)
            (stage / rel).write_bytes(body)
        names = sorted(files)
        total = sum(len(b) for b in files.values())
        done: dict[str, Any] = {"bytes": 0, "entries": [], "failed": False}
        md = pod["metadata"]

        def alive() -> bool:
            current = self.sim.get(PODS, md["namespace"], md["name"])
            return current is not None and current["metadata"]["uid"] == md["uid"] and (
                (current.get("status") or {}).get("phase") == "Running"
            )

        def upload(i: int) -> Any:
            def put(s3: Any) -> None:
                rel = names[i]
                data = (stage / rel).read_bytes()
                target = targets[rel]
                assert target is not None
                try:
                    put_through(s3, target, data)
                except Exception:
                    done["failed"] = True
                    raise
                done["bytes"] += len(data)
                done["entries"].append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
                progress = {"files": i + 1, "filesTotal": len(names), "bytes": done["bytes"], "bytesTotal": total}
                say("progress " + json.dumps(progress))

            return put

        def finish(s3: Any) -> None:
            code = 1
            try:
                if not done["failed"]:
                    manifest = targets[MANIFEST]
                    assert manifest is not None
                    body = json.dumps({**model, "files": done["entries"], "totalBytes": total}).encode()
                    put_through(s3, manifest, body)
                    say(f"done {len(done['entries'])} files")
                    code = 0
            finally:
                shutil.rmtree(stage, ignore_errors=True)
                self.sim.run(lambda: self._end(pod, code))

        def step(i: int) -> None:
            if not alive():
                shutil.rmtree(stage, ignore_errors=True)
                return
            if i < len(names):
                self.writer.submit(upload(i))
                self.sim.after(pace, lambda: step(i + 1))
            else:
                self.writer.submit(finish)

        self.sim.after(pace, lambda: step(0))

    def _say(self, pod: Obj, container: str) -> Any:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]

        def say(line: str) -> None:
            self.sim.runtime.logs.append(ns, name, container, line)

        return say

    def _end(self, pod: Obj, code: int) -> None:
        """The program exited with `code`: the kubelet terminates the container (pod Succeeded or Failed)."""
        md = pod["metadata"]
        current = self.sim.get(PODS, md["namespace"], md["name"])
        if current is None or current["metadata"]["uid"] != md["uid"]:
            return
        if (current.get("status") or {}).get("phase") == "Running":
            self.sim.controller(Kubelet)._terminate(current, code, "Completed" if code == 0 else "Error")
