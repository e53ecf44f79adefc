"""Whether a node can reach an FSx for Lustre file system over the network: the file system's security groups
(found through its network interfaces, as DescribeFileSystems does not list them) must allow TCP 988 and
1018-1023 in from one of the node's security groups (its HyperPod instance group's VPC config) or from a CIDR
range holding the node's address. Looked up on a background thread (EC2 calls never run on the sim's loop);
the CSI node plugin uses the latest answer and asks again when it is older than a mount retry."""

from __future__ import annotations

import ipaddress
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hyperpod_twin.sim.kobj import Obj

log = logging.getLogger(__name__)

LUSTRE_PORTS = ((988, 988), (1018, 1023))
GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
PENDING = object()  # the answer is being looked up


def node_groups(sim: Any, node: Obj) -> list[str]:
    """The node's security groups: its instance group's OverrideVpcConfig, else the HyperPod cluster's VpcConfig
    (empty when the node is not a HyperPod node the twin knows)."""
    cluster: Obj = sim.extra.get("hyperpod_cluster") or {}
    group = ((node.get("metadata") or {}).get("labels") or {}).get(GROUP_LABEL)
    for ig in cluster.get("InstanceGroups") or []:
        if ig.get("InstanceGroupName") == group and (ig.get("OverrideVpcConfig") or {}).get("SecurityGroupIds"):
            return list(ig["OverrideVpcConfig"]["SecurityGroupIds"])
    return list((cluster.get("VpcConfig") or {}).get("SecurityGroupIds") or [])


def node_address(node: Obj) -> str | None:
    """The node's InternalIP (IPv4), if any."""
    for address in (node.get("status") or {}).get("addresses") or []:
        if address.get("type") == "InternalIP" and ":" not in str(address.get("address")):
            return str(address["address"])
    return None


def _allows(perm: Obj, low: int, high: int, sources: set[str], ip: str | None) -> bool:
    proto = str(perm.get("IpProtocol"))
    lowest, highest = int(perm.get("FromPort", -1)), int(perm.get("ToPort", -1))
    if proto != "-1" and (proto not in ("tcp", "6") or not lowest <= low <= high <= highest):
        return False
    if any(pair.get("GroupId") in sources for pair in perm.get("UserIdGroupPairs") or []):
        return True
    if ip is None:
        return False
    for item in perm.get("IpRanges") or []:
        try:
            if ipaddress.ip_address(ip) in ipaddress.ip_network(str(item.get("CidrIp")), strict=False):
                return True
        except ValueError:
            continue
    return False


def blocked_ports(groups: list[Obj], sources: list[str], ip: str | None) -> list[str]:
    """The Lustre port ranges no inbound rule of `groups` (DescribeSecurityGroups items) allows from `sources`."""
    missing = []
    for low, high in LUSTRE_PORTS:
        if not any(_allows(p, low, high, set(sources), ip) for g in groups for p in g.get("IpPermissions") or []):
            missing.append(str(low) if low == high else f"{low}-{high}")
    return missing


def look_up(factory: Callable[[str], Any], fs: Obj, sources: list[str], ip: str | None) -> list[str]:
    """The blocked Lustre ports from a node (security groups `sources`, address `ip`) to file system `fs`."""
    ec2 = factory("ec2")
    enis = ec2.describe_network_interfaces(NetworkInterfaceIds=list(fs.get("NetworkInterfaceIds") or []))
    ids = list(dict.fromkeys(g["GroupId"] for e in enis.get("NetworkInterfaces", []) for g in e.get("Groups", [])))
    groups = ec2.describe_security_groups(GroupIds=ids)["SecurityGroups"] if ids else []
    return blocked_ports(groups, sources, ip)


class LustreReachability:
    """Cached answers per (file system, node), refreshed off the loop when older than `max_age` twin seconds."""

    def __init__(self, sim: Any, max_age: float) -> None:
        self.sim, self.max_age = sim, max_age
        self._answers: dict[tuple[str, str], tuple[float, list[str] | None]] = {}
        self._asking: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    def blocked(self, fs: Obj, node: Obj) -> Any:
        """The blocked Lustre ports (empty: reachable; None: unknown, e.g. not a HyperPod node), or PENDING."""
        factory = self.sim.extra.get("boto3_client")
        sources = node_groups(self.sim, node)
        if factory is None or not sources:
            return None  # nothing to check against: the twin does not know the node's network
        key = (str(fs["FileSystemId"]), str(node["metadata"]["name"]))
        now = self.sim.clock.now()
        with self._lock:
            known = self._answers.get(key)
            if known is not None and now - known[0] < self.max_age:
                return known[1]
            if key not in self._asking:
                self._asking.add(key)
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="twin-lustre-net")
                self._executor.submit(self._ask, key, factory, fs, sources, node_address(node))
        return known[1] if known is not None else PENDING

    def _ask(self, key: tuple[str, str], factory: Callable[[str], Any], fs: Obj, sources: list[str],
             ip: str | None) -> None:
        answer: list[str] | None
        try:
            answer = look_up(factory, fs, sources, ip)
        except Exception as exc:  # an EC2 error: treat as unreachable until the next look-up
            log.info("lustre reachability of %s: %s", key, exc)
            answer = ["988", "1018-1023"]
        with self._lock:
            self._answers[key] = (self.sim.clock.now(), answer)
            self._asking.discard(key)

    def stop(self) -> None:
        """Stop the look-up thread."""
        if self._executor is not None:
            self._executor.shutdown(wait=False)
            self._executor = None
