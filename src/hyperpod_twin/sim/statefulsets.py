"""The StatefulSet controller: ordinal pods and their volumeClaimTemplates' PVCs."""

from __future__ import annotations

import copy
from collections.abc import Hashable

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import OwnerController
from hyperpod_twin.sim.kinds import PODS, PVCS, STATEFULSETS, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.workloads import replicas_of


class StatefulSetController(OwnerController):
    """Pods `<name>-0..N-1` (one at a time under OrderedReady, all at once under Parallel), each with
    its volumeClaimTemplates' PVCs `<claim>-<name>-<i>`; scale-down removes the highest ordinals."""

    primary = STATEFULSETS
    owns = {PODS: "StatefulSet"}

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        sts = self.sim.get(STATEFULSETS, ns, name)
        if sts is None or sts["metadata"].get("deletionTimestamp"):
            return
        spec = sts.get("spec") or {}
        want = replicas_of(sts)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods = {p["metadata"]["name"]: p for p in self.sim.owned(PODS, sts)}
        for pod_name, pod in list(pods.items()):
            ordinal = pod_name.rsplit("-", 1)[-1]
            if pod.get("status", {}).get("phase") == "Failed" or (ordinal.isdigit() and int(ordinal) >= want):
                self.sim.delete_pod(ns, pod_name)
                del pods[pod_name]
        revision = f"{name}-{kobj.template_hash(spec.get('template') or {})}"
        for i in range(want):
            pod_name = f"{name}-{i}"
            if pod_name in pods:
                if not parallel and not kobj.pod_is_ready(pods[pod_name]):
                    break  # OrderedReady: the next ordinal waits for this one
                continue
            self._claims(sts, i)
            tmpl = copy.deepcopy(spec.get("template") or {})
            tspec = tmpl.setdefault("spec", {})
            tspec.setdefault("hostname", pod_name)
            if spec.get("serviceName"):
                tspec.setdefault("subdomain", spec["serviceName"])
            volumes = [v for v in tspec.get("volumes") or []]
            for claim in spec.get("volumeClaimTemplates") or []:
                cname = claim["metadata"]["name"]
                volumes = [v for v in volumes if v.get("name") != cname]
                volumes.append({"name": cname, "persistentVolumeClaim": {"claimName": f"{cname}-{pod_name}"}})
            if volumes:
                tspec["volumes"] = volumes
            labels = {
                "statefulset.kubernetes.io/pod-name": pod_name,
                "apps.kubernetes.io/pod-index": str(i),
                "controller-revision-hash": revision,
            }
            created = self.sim.create(PODS, kobj.pod_from_template(tmpl, sts, name=pod_name, labels=labels))
            if created is not None:
                pods[pod_name] = created
            if not parallel:
                break
        ready = sum(1 for p in pods.values() if kobj.pod_is_ready(p))
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "availableReplicas": ready,
            "currentReplicas": len(pods),
            "updatedReplicas": len(pods),
            "currentRevision": revision,
            "updateRevision": revision,
            "collisionCount": 0,
        }
        self.sim.patch_status(STATEFULSETS, sts, status)

    def _claims(self, sts: Obj, ordinal: int) -> None:
        ns, name = sts["metadata"]["namespace"], sts["metadata"]["name"]
        for claim in sts.get("spec", {}).get("volumeClaimTemplates") or []:
            cname = f"{claim['metadata']['name']}-{name}-{ordinal}"
            if self.sim.get(PVCS, ns, cname) is not None:
                continue
            body = copy.deepcopy(claim)
            body["metadata"] = {
                "name": cname,
                "namespace": ns,
                "labels": dict((sts["spec"].get("selector") or {}).get("matchLabels") or {}),
            }
            body.setdefault("spec", {})
            body.pop("status", None)
            self.sim.create(PVCS, body)
