"""The twin's load balancers: a LoadBalancer Service gets an address that answers on its port, admits only its
source ranges (others are closed unanswered), and loses the address and the listener when it stops being one."""

from __future__ import annotations

import httpx
import pytest

from tests.support.sim import SimCluster


def _service(ranges: list[str]) -> dict[str, object]:
    return {"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "selector": {"app": "none"},
                                                   "loadBalancerSourceRanges": ranges,
                                                   "ports": [{"name": "http", "port": 8000, "targetPort": 8000}]}}


def _ingress(cluster: SimCluster) -> list[dict[str, str]]:
    status = cluster.get("", "services", "lb").get("status") or {}
    return list((status.get("loadBalancer") or {}).get("ingress") or [])


def test_an_address_that_answers_within_its_source_ranges(cluster: SimCluster) -> None:
    cluster.create("", "services", _service(["127.0.0.0/8"]))
    [ingress] = _ingress(cluster)
    url = f"http://{ingress['ip']}:8000/v1/models"
    assert ingress["ip"].startswith("127.") and ingress["ip"] != "127.0.0.1"
    assert httpx.get(url, timeout=10).status_code == 503  # no ready endpoint behind it

    svc = cluster.get("", "services", "lb")
    svc["spec"]["loadBalancerSourceRanges"] = ["10.0.0.0/16"]
    cluster.sim.update(("", "services"), svc)
    [moved] = _ingress(cluster)
    with pytest.raises(httpx.TransportError):  # the security group drops loopback now
        httpx.get(f"http://{moved['ip']}:8000/v1/models", timeout=10)

    svc = cluster.get("", "services", "lb")
    svc["spec"]["type"] = "ClusterIP"
    svc["spec"].pop("loadBalancerSourceRanges")
    cluster.sim.update(("", "services"), svc)
    assert _ingress(cluster) == []
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{moved['ip']}:8000/v1/models", timeout=10)
