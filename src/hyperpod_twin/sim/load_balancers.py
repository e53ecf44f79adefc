"""LoadBalancer Services get an address that answers: the part of AWS's load balancer controllers the twin plays.

AWS (the AWS Load Balancer Controller, or the in-tree cloud provider) provisions a load balancer for each
`type: LoadBalancer` Service, writes its DNS name to `status.loadBalancer.ingress[0].hostname` and turns
`spec.loadBalancerSourceRanges` into security group rules. The twin gives each such Service a loopback address of its
own (`status.loadBalancer.ingress[0].ip`: an IP, since the twin has no DNS), listens there on the Service's ports
and forwards each request to a ready endpoint, Authorization header included (a load balancer, unlike the API
server's proxy, passes it on). A connection from outside the source ranges is closed unanswered."""

from __future__ import annotations

import ipaddress
import logging
import random
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass, field

from hyperpod_twin.kube.http import Handler, HttpServer, Request, Response
from hyperpod_twin.kube.proxy import ServiceProxy
from hyperpod_twin.kube.status import ApiError
from hyperpod_twin.sim.controller_base import Controller
from hyperpod_twin.sim.core import ClusterSim
from hyperpod_twin.sim.kinds import SERVICES, nsname

log = logging.getLogger(__name__)
_ATTEMPTS = 32  # addresses tried before giving up (another twin on this machine may hold one)


@dataclass
class _Balancer:
    """One Service's listeners on its address."""

    ip: str
    ports: tuple[int, ...]
    ranges: tuple[str, ...]
    servers: list[HttpServer] = field(default_factory=list)

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def _admits(ranges: tuple[str, ...]) -> Callable[[str], bool]:
    networks = [ipaddress.ip_network(r, strict=False) for r in ranges]

    def admit(client: str) -> bool:
        return not networks or any(ipaddress.ip_address(client) in n for n in networks)

    return admit


class LoadBalancerController(Controller):
    """Gives every LoadBalancer Service an answering address and takes it away when the Service goes."""

    watches = (SERVICES,)

    def __init__(self, sim: ClusterSim) -> None:
        super().__init__(sim)
        self._balancers: dict[tuple[str, str], _Balancer] = {}
        self._random = random.Random()  # noqa: S311 - picking a loopback address, not a secret

    def resync_keys(self) -> Iterable[Hashable]:
        return [(o["metadata"]["namespace"], o["metadata"]["name"]) for o in self.sim.list(SERVICES)]

    def reconcile(self, key: Hashable) -> None:
        ns, name = nsname(key)
        svc = self.sim.get(SERVICES, ns, name)
        spec = (svc or {}).get("spec") or {}
        if svc is None or spec.get("type") != "LoadBalancer":
            self._drop((ns, name))
            if svc is not None and (svc.get("status") or {}).get("loadBalancer"):
                svc["status"].pop("loadBalancer")  # no longer a load balancer: the controller deletes it
                svc["metadata"].pop("resourceVersion", None)
                self.sim.update_status(SERVICES, svc)
            return
        ports = tuple(sorted(int(p["port"]) for p in spec.get("ports") or []))
        ranges = tuple(spec.get("loadBalancerSourceRanges") or [])
        current = self._balancers.get((ns, name))
        if current is None or (current.ports, current.ranges) != (ports, ranges):
            self._drop((ns, name))
            current = self._listen(ns, name, ports, ranges, current.ip if current else None)
            if current is None:
                return
            self._balancers[(ns, name)] = current
        ingress = [{"ip": current.ip, "ipMode": "Proxy"}]
        status = svc.get("status") or {}
        if (status.get("loadBalancer") or {}).get("ingress") != ingress:
            svc["status"] = {**status, "loadBalancer": {"ingress": ingress}}
            svc["metadata"].pop("resourceVersion", None)
            self.sim.update_status(SERVICES, svc)

    def _listen(self, ns: str, name: str, ports: tuple[int, ...], ranges: tuple[str, ...],
                ip: str | None) -> _Balancer | None:
        proxy = ServiceProxy(self.sim.runtime)
        admit = _admits(ranges)
        for attempt in range(_ATTEMPTS):
            address = ip if ip is not None and attempt == 0 else self._address()
            balancer = _Balancer(address, ports, ranges)
            try:
                for port in ports:
                    server = HttpServer(self._forward(proxy, ns, name, port), address, port,
                                        name=f"lb-{ns}-{name}-{port}", accept=admit)
                    balancer.servers.append(server)
            except OSError:
                balancer.stop()
                continue
            for server in balancer.servers:
                server.start()
            return balancer
        log.warning("no free loopback address for the load balancer of %s/%s", ns, name)
        return None

    def _address(self) -> str:
        return f"127.{self._random.randint(1, 254)}.{self._random.randint(0, 255)}.{self._random.randint(1, 254)}"

    @staticmethod
    def _forward(proxy: ServiceProxy, ns: str, name: str, port: int) -> Handler:
        def app(request: Request) -> Response:
            try:
                return proxy.service(ns, f"{name}:{port}", request.raw_path, request, forward_auth=True)
            except ApiError:  # no ready target (or the Service just went): the twin answers 503
                return Response(503, b"no healthy target", "text/plain")

        return app

    def _drop(self, key: tuple[str, str]) -> None:
        balancer = self._balancers.pop(key, None)
        if balancer is not None:
            balancer.stop()

    def stop(self) -> None:
        for key in list(self._balancers):
            self._drop(key)
