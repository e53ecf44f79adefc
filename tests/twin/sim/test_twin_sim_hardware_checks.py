"""The twin's simulated hardware-check output parses with the control plane's parsers, and its faults change it:
fi_info without EFA, DCGM with a GPU fault; the fault endpoint's body is validated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyperpod_twin.sim import nccl_tests
from instantstart.services.base.hardware_output import nccl_transport, parse_dcgm_diag, parse_fi_info

NODE = {"metadata": {"name": "hyperpod-i-0123456789abcdef0"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}}}


@pytest.fixture(autouse=True)
def clean() -> Iterator[None]:
    nccl_tests.reset()
    yield
    nccl_tests.reset()


def test_healthy_node_output_parses() -> None:
    efa = parse_fi_info("\n".join(nccl_tests.fi_info(NODE)))
    assert efa.available and efa.devices == 4
    dcgm = parse_dcgm_diag("\n".join(nccl_tests.dcgm_diag(NODE)))
    assert dcgm.completed and dcgm.passed and dcgm.tests == 11
    assert nccl_transport("\n".join(nccl_tests.init_lines("p-0", efa=True))) == "efa"
    assert nccl_transport("\n".join(nccl_tests.init_lines("p-0", efa=False))) == "socket"


def test_faults_show_in_the_tools_output() -> None:
    assert nccl_tests.set_faults("i-0123456789abcdef0", {"efa": False, "gpu": "fail"})["efa"] is False
    efa = parse_fi_info("\n".join(nccl_tests.fi_info(NODE)))
    assert efa.completed and not efa.available
    dcgm = parse_dcgm_diag("\n".join(nccl_tests.dcgm_diag(NODE)))
    assert dcgm.completed and not dcgm.passed and dcgm.failed == ["GPU Memory"]
    no_devices = {"metadata": {"name": "hyperpod-i-0aaaaaaaaaaaaaaa1"}, "status": {"allocatable": {}}}
    assert not parse_fi_info("\n".join(nccl_tests.fi_info(no_devices))).available


@pytest.mark.parametrize(("body", "message"), [
    ({"slow": "yes"}, "slow must be true or false"),
    ({"gpu": "broken"}, "gpu must be ok or fail"),
    ({"nic": True}, "unknown hardware fault field"),
])
def test_fault_body_is_validated(body: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        nccl_tests.set_faults("i-0123456789abcdef0", body)
