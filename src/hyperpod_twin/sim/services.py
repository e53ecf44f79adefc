"""Endpoints and EndpointSlices for Services with selectors: ready and not-ready pod addresses."""

from __future__ import annotations

from collections.abc import Hashable, Iterable

from hyperpod_twin.kube.store import WatchEvent
from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.kinds import ENDPOINTS, ENDPOINTSLICES, PODS, SERVICES, nsname
from hyperpod_twin.sim.kobj import Obj

_SLICE_LABEL = "kubernetes.io/service-name"
_MANAGED_BY = "endpointslice.kubernetes.io/managed-by"


class EndpointsController(Controller):
    """Mirrors each selector Service's matching pods into its Endpoints (and an EndpointSlice when
    discovery.k8s.io is served), resolving named target ports per pod; also gives ClusterIPs."""

    watches = (SERVICES, PODS)

    def keys_for(self, event: WatchEvent) -> Iterable[Hashable]:
        if event.rtype.key == SERVICES:
            return super().keys_for(event)
        ns = event.object["metadata"].get("namespace", "default")
        labels = event.object["metadata"].get("labels") or {}
        return [
            (ns, svc["metadata"]["name"])
            for svc in self.sim.list(SERVICES, ns)
            if svc.get("spec", {}).get("selector") and kobj.match_map(svc["spec"]["selector"], labels)
        ]

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.sim.list(SERVICES)]

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        svc = self.sim.get(SERVICES, ns, name)
        if svc is None:
            self._remove_slices(ns, name)
            return
        self._cluster_ip(svc)
        selector = svc.get("spec", {}).get("selector")
        if not selector:
            return  # selector-less Services have hand-made Endpoints
        pods = [
            p
            for p in self.sim.list(PODS, ns)
            if kobj.match_map(selector, p["metadata"].get("labels"))
            and p.get("status", {}).get("podIP")
            and kobj.pod_is_active(p)
        ]
        ports = svc.get("spec", {}).get("ports") or []
        subsets: list[Obj] = []
        groups: dict[tuple[tuple[str, int, str], ...], tuple[list[Obj], list[Obj]]] = {}
        for pod in pods:
            resolved = tuple(
                (p.get("name", ""), kobj.target_port(pod, p.get("targetPort", p.get("port"))), p.get("protocol", "TCP"))
                for p in ports
            )
            ready, not_ready = groups.setdefault(resolved, ([], []))
            address = {
                "ip": pod["status"]["podIP"],
                "nodeName": pod["spec"].get("nodeName", ""),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": ns,
                    "name": pod["metadata"]["name"],
                    "uid": pod["metadata"]["uid"],
                },
            }
            (ready if kobj.pod_is_ready(pod) else not_ready).append(address)
        for resolved, (ready, not_ready) in sorted(groups.items()):
            subset: Obj = {"ports": [_port(n, p, proto) for n, p, proto in resolved]}
            if ready:
                subset["addresses"] = sorted(ready, key=lambda a: a["ip"])
            if not_ready:
                subset["notReadyAddresses"] = sorted(not_ready, key=lambda a: a["ip"])
            subsets.append(subset)
        self._write_endpoints(svc, subsets)
        self._write_slice(svc, pods, ports)

    def _cluster_ip(self, svc: Obj) -> None:
        spec = svc.get("spec", {})
        if spec.get("clusterIP") or spec.get("type") == "ExternalName":
            return
        digest = int.from_bytes(svc["metadata"]["uid"].encode()[:2], "big")
        ip = f"172.20.{(digest >> 8) % 255}.{max(digest % 255, 2)}"
        spec["clusterIP"] = ip
        spec["clusterIPs"] = [ip]
        svc["metadata"].pop("resourceVersion", None)
        self.sim.update(SERVICES, svc)

    def _write_endpoints(self, svc: Obj, subsets: list[Obj]) -> None:
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        current = self.sim.get(ENDPOINTS, ns, name)
        labels = dict(svc["metadata"].get("labels") or {})
        if current is None:
            self.sim.create(
                ENDPOINTS, {"metadata": {"name": name, "namespace": ns, "labels": labels}, "subsets": subsets}
            )
        elif (current.get("subsets") or []) != subsets:
            current["subsets"] = subsets
            current["metadata"].pop("resourceVersion", None)
            self.sim.update(ENDPOINTS, current)

    def _write_slice(self, svc: Obj, pods: list[Obj], ports: list[Obj]) -> None:
        if self.sim.rtype(ENDPOINTSLICES) is None:
            return
        ns, name = svc["metadata"]["namespace"], svc["metadata"]["name"]
        slice_name = f"{name}-twin"
        endpoints = [
            {
                "addresses": [p["status"]["podIP"]],
                "conditions": {
                    "ready": kobj.pod_is_ready(p),
                    "serving": kobj.pod_is_ready(p),
                    "terminating": False,
                },
                "nodeName": p["spec"].get("nodeName", ""),
                "targetRef": {
                    "kind": "Pod",
                    "namespace": ns,
                    "name": p["metadata"]["name"],
                    "uid": p["metadata"]["uid"],
                },
            }
            for p in sorted(pods, key=lambda p: p["metadata"]["name"])
        ]
        slice_ports = [
            _port(
                p.get("name", ""),
                kobj.target_port(pods[0], p.get("targetPort", p.get("port"))) if pods else 0,
                p.get("protocol", "TCP"),
            )
            for p in ports
        ]
        body: Obj = {
            "metadata": {
                "name": slice_name,
                "namespace": ns,
                "labels": {_SLICE_LABEL: name, _MANAGED_BY: "endpointslice-controller.k8s.io"},
                "ownerReferences": [kobj.owner_ref(svc)],
            },
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": slice_ports,
        }
        current = self.sim.get(ENDPOINTSLICES, ns, slice_name)
        if current is None:
            self.sim.create(ENDPOINTSLICES, body)
        elif (current.get("endpoints"), current.get("ports")) != (endpoints, slice_ports):
            current.update({"endpoints": endpoints, "ports": slice_ports})
            current["metadata"].pop("resourceVersion", None)
            self.sim.update(ENDPOINTSLICES, current)

    def _remove_slices(self, ns: str, name: str) -> None:
        self.sim.delete(ENDPOINTSLICES, ns, f"{name}-twin")
        self.sim.delete(ENDPOINTS, ns, name)


def _port(name: str, port: int, protocol: str) -> Obj:
    out: Obj = {"port": port, "protocol": protocol}
    if name:
        out["name"] = name
    return out
