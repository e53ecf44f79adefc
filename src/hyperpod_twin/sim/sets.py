"""DaemonSet (a pod per eligible node) and StatefulSet (ordered, stably named pods with claims) controllers."""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterable

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.core import DAEMONSETS, NODES, PODS, PVCS, STATEFULSETS, OwnerController, nsname
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.workloads import replicas_of

# Tolerations the DaemonSet controller adds to every daemon pod (as kube does).
_DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


class DaemonSetController(OwnerController):
    """One pod per node that the template's selector, affinity and tolerations admit; the pod is
    pinned with a matchFields node affinity (as the real controller does) and scheduled normally."""

    primary = DAEMONSETS
    owns = {PODS: "DaemonSet"}
    watches = (DAEMONSETS, PODS, NODES)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == NODES:
            return self.resync_keys()
        return super().keys_for(event)

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        ds = self.sim.get(DAEMONSETS, ns, name)
        if ds is None or ds["metadata"].get("deletionTimestamp"):
            return
        template = ds.get("spec", {}).get("template") or {}
        tspec = template.get("spec") or {}
        tolerations = [*(tspec.get("tolerations") or []), *_DAEMON_TOLERATIONS]
        # Read-only views (no copies): this runs on every Node change, on thousands of nodes and pods.
        eligible = [n for n in self.sim.view(NODES) if self._eligible(n, tspec, tolerations)]
        pods = self.sim.view_owned(PODS, ds)
        by_node: dict[str, Obj] = {}
        eligible_names = {n["metadata"]["name"] for n in eligible}
        for pod in pods:
            pinned = _pinned_node(pod)
            failed = pod.get("status", {}).get("phase") == "Failed"
            if failed or pinned not in eligible_names or pinned in by_node:
                self.sim.delete_pod(ns, pod["metadata"]["name"])
            else:
                by_node[pinned] = pod
        tmpl_hash = kobj.template_hash(template)
        for node in eligible:
            node_name = node["metadata"]["name"]
            if node_name in by_node:
                continue
            tmpl = copy.deepcopy(template)
            spec = tmpl.setdefault("spec", {})
            spec["tolerations"] = tolerations
            spec["affinity"] = {
                **(spec.get("affinity") or {}),
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                        ]
                    }
                },
            }
            created = self.sim.create(
                PODS,
                kobj.pod_from_template(
                    tmpl,
                    ds,
                    labels={
                        "controller-revision-hash": tmpl_hash,
                        "pod-template-generation": str(ds["metadata"].get("generation", 1)),
                    },
                ),
            )
            if created is not None:
                by_node[node_name] = created
        ready = sum(1 for p in by_node.values() if kobj.pod_is_ready(p))
        status = {
            "currentNumberScheduled": len(by_node),
            "desiredNumberScheduled": len(eligible),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "numberAvailable": ready,
            "numberUnavailable": len(eligible) - ready,
            "updatedNumberScheduled": len(by_node),
            "observedGeneration": ds["metadata"].get("generation", 1),
        }
        self.sim.patch_status(DAEMONSETS, ds, status)

    @staticmethod
    def _eligible(node: Obj, tspec: Obj, tolerations: list[Obj]) -> bool:
        if not kobj.match_map(tspec.get("nodeSelector"), node["metadata"].get("labels")):
            return False
        terms = (
            ((tspec.get("affinity") or {}).get("nodeAffinity") or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            )
            or {}
        ).get("nodeSelectorTerms")
        if terms and not any(kobj.node_selector_term_matches(t, node) for t in terms):
            return False
        for taint in node.get("spec", {}).get("taints") or []:
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not kobj.tolerates(tolerations, taint):
                return False
        return True


def _pinned_node(pod: Obj) -> str:
    if pod.get("spec", {}).get("nodeName"):
        return str(pod["spec"]["nodeName"])
    terms = (
        ((pod.get("spec", {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
            "requiredDuringSchedulingIgnoredDuringExecution"
        )
        or {}
    ).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name" and field.get("values"):
                return str(field["values"][0])
    return ""


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
