"""An existing FSx for Lustre file system adopted by fsx_storage_create: it must be a Lustre file system in the
cluster's VPC whose security groups let the cluster's nodes in over Lustre (TCP 988, 1018-1023); otherwise a
refusal naming what is wrong and the fix (or, when asked, InstantStart adds the two rules)."""

from __future__ import annotations

from typing import Any

from instantstart.aws import ec2_network, vpc
from instantstart.aws import fsx as fsx_api
from instantstart.context import AppContext
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed
from instantstart.manifests import fsx as f
from instantstart.store.models import ClusterRow


def _field(message: str) -> dict[str, Any]:
    return {"fields": [{"field": "fileSystemId", "message": message}]}


def _compute_cidr(app: AppContext, row: ClusterRow) -> str | None:
    """The CIDR block of the cluster's compute subnet (where its nodes are), when known."""
    details = row.details or {}
    subnet = details.get("computeSubnetId") or next(iter((details.get("computeSubnets") or {}).values()), None)
    if not subnet:
        return None
    found = ec2_network.describe_subnets(app.aws, row.region, [str(subnet)])
    return str(found[0]["CidrBlock"]) if found else None


def lustre_access(app: AppContext, row: ClusterRow, fs: dict[str, Any]) -> dict[str, Any]:
    """{securityGroupIds, nodeSecurityGroupId, missing}: the file system's groups (from its network interfaces) and
    the Lustre port ranges they do not allow from the cluster's node security group (blocking)."""
    node_group = (row.details or {}).get("securityGroupId")
    groups = ec2_network.network_interface_groups(app.aws, row.region, list(fs.get("NetworkInterfaceIds") or []))
    described = vpc.find_security_groups(app.aws, row.region, ids=groups) if groups else []
    missing = f.lustre_gaps(described, str(node_group), _compute_cidr(app, row)) if node_group else []
    return {"securityGroupIds": groups, "nodeSecurityGroupId": node_group, "missing": missing}


def check_adoptable(app: AppContext, row: ClusterRow, file_system_id: str, *, add_rules: bool) -> dict[str, Any]:
    """Refuse a file system that is not Lustre, not in the cluster's VPC, or unreachable over Lustre from the
    nodes (unless add_rules: then the answer names the group to add the rules to). Returns what lustre_access
    found plus rulesGroupId (the group to add to, or None). Blocking."""
    fs = fsx_api.describe(app.aws, row.region, file_system_id)
    if fs is None or fs.get("FileSystemType") != "LUSTRE":
        raise NotFound(
            f"No FSx for Lustre file system {file_system_id} in {row.region}.",
            hint="fsx_storage_list shows the cluster's file systems; check the id and the active cluster's Region.",
            details=_field("no such Lustre file system"),
        )
    cluster_vpc = (row.details or {}).get("vpcId")
    if cluster_vpc and fs.get("VpcId") != cluster_vpc:
        raise InvalidInput(
            f"Invalid input: fileSystemId: file system {file_system_id} is in VPC {fs.get('VpcId')}, not in the "
            f"cluster's VPC {cluster_vpc}; the cluster's nodes cannot reach it.",
            hint=f"Adopt a Lustre file system in {cluster_vpc}, or omit fileSystemId to create one in the "
            "cluster's compute subnet.",
            details=_field(f"in {fs.get('VpcId')}, not {cluster_vpc}"),
        )
    access = lustre_access(app, row, fs)
    missing, groups, node = access["missing"], access["securityGroupIds"], access["nodeSecurityGroupId"]
    if missing and not add_rules:
        target = groups[0] if groups else "its security group"
        ports = " and ".join(f"TCP {p}" for p in missing)
        raise PreconditionFailed(
            f"FSx file system {file_system_id}: its security groups ({', '.join(groups) or 'none'}) do not allow "
            f"Lustre traffic from the cluster's node security group {node}: {ports} missing, so pods cannot mount it.",
            hint=f"Add inbound rules to {target}: {ports} from source group {node} (aws ec2 "
            f"authorize-security-group-ingress --group-id {target} --protocol tcp --port 988 --source-group {node}, "
            f"and --port 1018-1023), or call fsx_storage_create again with allowLustreFromNodes: true to let "
            "InstantStart add them.",
            details={**_field("security groups do not allow Lustre from the nodes"), "missingPorts": missing,
                     "securityGroupIds": groups, "nodeSecurityGroupId": node},
        )
    if missing and not groups:
        raise PreconditionFailed(
            f"FSx file system {file_system_id} has no security group to add Lustre rules to.",
            hint="Check the file system's network interfaces in the EC2 console.",
            details=_field("no security group"),
        )
    return {**access, "rulesGroupId": groups[0] if missing else None, "vpcId": fs.get("VpcId")}


def add_lustre_rules(app: AppContext, region: str, group_id: str, node_group: str) -> None:
    """AuthorizeSecurityGroupIngress TCP 988 and 1018-1023 into the file system's group from the node group and
    from the group itself (rules already there are skipped). Blocking."""
    vpc.allow_lustre(app.aws, region, group_id, [node_group])
