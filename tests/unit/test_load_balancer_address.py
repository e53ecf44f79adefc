"""The one place a load balancer URL is built: AWS load balancer names or IPs that are not link-local, multicast,
unspecified or reserved; a port; a path without dot segments or encoded characters. Refused before anything is sent."""

from __future__ import annotations

import pytest

from instantstart.errors import InvalidInput
from instantstart.kube.balancer import balancer_url

PATH = "v1/chat/completions"


@pytest.mark.parametrize(("address", "url"), [
    ("k8s-default-pubservi-0a1b2c3d4e-0123456789abcdef.elb.us-west-2.amazonaws.com",
     "http://k8s-default-pubservi-0a1b2c3d4e-0123456789abcdef.elb.us-west-2.amazonaws.com:8000/v1/chat/completions"),
    ("internal-a1b2c3-1234567890.us-west-2.elb.amazonaws.com",
     "http://internal-a1b2c3-1234567890.us-west-2.elb.amazonaws.com:8000/v1/chat/completions"),
    ("k8s-ns-svc-abc.elb.cn-north-1.amazonaws.com.cn",
     "http://k8s-ns-svc-abc.elb.cn-north-1.amazonaws.com.cn:8000/v1/chat/completions"),
    ("10.0.3.17", "http://10.0.3.17:8000/v1/chat/completions"),
    ("127.41.7.9", "http://127.41.7.9:8000/v1/chat/completions"),
    ("fd00::5", "http://[fd00::5]:8000/v1/chat/completions"),
])
def test_load_balancer_addresses_pass(address: str, url: str) -> None:
    assert balancer_url(address, 8000, PATH) == url


@pytest.mark.parametrize("address", [
    "169.254.169.254",  # the instance metadata service
    "fe80::1", "0.0.0.0", "224.0.0.1", "240.0.0.1",
    "attacker.example.com", "x.elb.amazonaws.com.attacker.example", "elb.amazonaws.com",
    "user@x.elb.us-west-2.amazonaws.com", "x.elb.us-west-2.amazonaws.com/path", "x.elb.us-west-2.amazonaws.com:80",
])
def test_other_addresses_are_refused(address: str) -> None:
    with pytest.raises(InvalidInput, match="not allowed for a load balancer call"):
        balancer_url(address, 8000, PATH)


@pytest.mark.parametrize(("port", "path"), [(0, PATH), (65536, PATH), (8000, "../x"), (8000, "v1/%2e%2e/x"),
                                             (8000, "v1?x=1")])
def test_ports_and_paths_are_checked(port: int, path: str) -> None:
    with pytest.raises(InvalidInput):
        balancer_url("10.0.3.17", port, path)
