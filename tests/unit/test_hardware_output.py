"""The hardware-check parsers on output in the real tools' formats (nccl-tests with and without mpirun's
--tag-output, DCGM 3.3 tables passing and failing, fi_info with and without EFA, NCCL_DEBUG=INFO network lines),
and the validation verdict built from them: a straggler and a node without EFA each named with the next step."""

from __future__ import annotations

from pathlib import Path

from instantstart.manifests.validation import nccl_mpijob, pair_rounds
from instantstart.services.base.hardware_output import (
    nccl_transport,
    parse_dcgm_diag,
    parse_fi_info,
    parse_nccl_tests,
)
from instantstart.services.capacity.validate_report import report

SAMPLES = Path(__file__).parent / "hardware_samples"  # in the tools' real formats (see the module docstring)
NCCL_TAGGED = (SAMPLES / "nccl_tests_tagged_efa.txt").read_text()
NCCL_PLAIN_SOCKET = (SAMPLES / "nccl_tests_socket.txt").read_text()
DCGM_PASS = (SAMPLES / "dcgm_diag_r2_pass.txt").read_text()
DCGM_FAIL = (SAMPLES / "dcgm_diag_fail.txt").read_text()
FI_EFA = (SAMPLES / "fi_info_efa.txt").read_text()


def test_nccl_tests_tagged_output_with_efa() -> None:
    result = parse_nccl_tests(NCCL_TAGGED)
    assert result.completed and result.avg_busbw == 1.15327
    assert result.largest_bytes == 1073741824 and result.peak_busbw == 3.12  # the better of out-of-place / in-place
    assert result.hosts == ["test-nccl-efa-worker-0", "test-nccl-efa-worker-1"] and result.ranks == 2
    assert result.transport == "efa" and result.wrong == 0


def test_nccl_tests_plain_output_on_sockets_with_wrong_values() -> None:
    result = parse_nccl_tests(NCCL_PLAIN_SOCKET)
    assert result.completed and result.peak_busbw == 470.73 and result.wrong == 4  # rows (2) + summary (2)
    assert result.transport == "socket"
    assert not parse_nccl_tests(NCCL_PLAIN_SOCKET.split("# Out")[0]).completed  # cut off before the summary


def test_transport_from_nccl_debug_lines() -> None:
    assert nccl_transport("x:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)") == "efa"
    assert nccl_transport("x:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>") == "socket"
    mixed = "a NCCL INFO NET/OFI Selected Provider is efa\nb NCCL INFO NET/Socket : Using [0]eth0:1.2.3.4<0>"
    assert nccl_transport(mixed) == "socket"  # one rank on sockets makes the ring run at socket speed
    assert nccl_transport("step 1/5 loss=2.5\nNET/OFI mentioned in prose") == "unknown"


def test_dcgm_pass_and_fail_name_only_known_tests() -> None:
    passed = parse_dcgm_diag(DCGM_PASS)
    assert passed.completed and passed.passed and passed.tests == 11 and passed.failed == []
    failed = parse_dcgm_diag(DCGM_FAIL)
    assert failed.completed and not failed.passed
    assert failed.failed == ["Persistence Mode"]  # the injected row is no known test, so it is never echoed
    assert not parse_dcgm_diag("Error: unable to connect to host engine").completed


def test_fi_info_counts_rdm_devices_or_reports_no_efa() -> None:
    found = parse_fi_info(FI_EFA)
    assert found.completed and found.available and found.devices == 2
    missing = parse_fi_info("fi_getinfo: -61 (No data available)\n")
    assert missing.completed and not missing.available and missing.devices == 0
    assert not parse_fi_info("sh: fi_info: not found").completed


def test_pair_rounds_put_every_node_in_two_pairs_without_overlap_in_a_round() -> None:
    nodes = ["a", "b", "c", "d"]
    assert pair_rounds(nodes) == [[("a", "b"), ("c", "d")], [("b", "c"), ("d", "a")]]
    assert pair_rounds(["a", "b"]) == [[("a", "b")]] and pair_rounds(["a"]) == []
    three = [p for r in pair_rounds(["a", "b", "c"]) for p in r]
    assert sorted(three) == [("a", "b"), ("b", "c"), ("c", "a")]


def test_mpijob_asks_for_efa_only_when_the_nodes_have_it() -> None:
    job = nccl_mpijob("validate-x", "validate-x-pair0-0", ["n1", "n2"], 4, 1)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert worker["resources"]["limits"] == {"nvidia.com/gpu": "4", "vpc.amazonaws.com/efa": "1"}
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert launcher["command"][launcher["command"].index("-np") + 1] == "8"
    assert {"name": "FI_PROVIDER", "value": "efa"} in launcher["env"]
    no_efa = nccl_mpijob("validate-x", "j", ["n1", "n2"], 1, 0)
    assert "vpc.amazonaws.com/efa" not in no_efa["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"][
        "containers"][0]["resources"]["limits"]


def test_report_names_the_straggler_and_the_node_without_efa_with_the_fix() -> None:
    node = {"gpus": 4, "efaDevices": 1, "dcgm": {"status": "passed"}, "efa": {"status": "ok"}}
    checks = {"nodes": {"a": node, "b": node, "c": node, "d": dict(node, efa={"status": "missing"})}}
    # c is slow (both its pairs), d has no EFA (both its pairs on sockets): the median (2.25) would miss c.
    pairs = [{"nodes": ["a", "b"], "busbwGbps": 11.0, "status": "passed"},
             {"nodes": ["c", "d"], "busbwGbps": 0.4, "status": "passed"},
             {"nodes": ["b", "c"], "busbwGbps": 3.3, "status": "passed"},
             {"nodes": ["d", "a"], "busbwGbps": 1.2, "status": "passed"}]
    result = report({"checks": checks, "nccl": {"pairs": pairs, "all": None}})
    by_node = {n["node"]: n for n in result["nodes"]}
    assert result["stragglers"] == ["c", "d"] and result["failedNodes"] == ["c", "d"] and not result["passed"]
    assert by_node["c"]["problems"][0]["nextStep"] == {
        "tool": "hyperpod_node_reboot", "arguments": {"nodeId": "c"}, "why": by_node["c"]["problems"][0][
            "nextStep"]["why"]}
    [efa] = by_node["d"]["problems"]  # slow because NCCL fell back to sockets: one problem, one fix
    assert efa["nextStep"]["tool"] == "hyperpod_node_replace" and "no EFA provider" in efa["problem"]
    assert "0.40 GB/s" not in efa["problem"] and "1.20 GB/s" in efa["problem"]
    assert by_node["a"]["verdict"] == "passed" and by_node["a"]["bestPairBusbwGbps"] == 11.0
