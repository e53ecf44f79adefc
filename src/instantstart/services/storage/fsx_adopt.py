"""An existing FSx for Lustre file system adopted by fsx_storage_create: it must be a Lustre file system in the
cluster's VPC whose security groups let the cluster's nodes in over Lustre (TCP 988, 1018-1023); otherwise a
refusal naming what is wrong and the fix (or, when asked and the group carries the cluster tag, InstantStart adds the
two rules; IAM lets the control plane change only security groups with that tag)."""

from __future__ import annotations

from typing import Any

from instantstart.aws import ec2_network, vpc
from instantstart.aws import fsx as fsx_api
from instantstart.context import AppContext
from instantstart.errors import InvalidInput, NotFound, PreconditionFailed
from instantstart.manifests import fsx as fsx_manifests
from instantstart.services.base.facts import facts_of
from instantstart.services.core.ledger import TAG_CLUSTER
from instantstart.store.models import ClusterRow


def _field(message: str) -> dict[str, Any]:
    return {"fields": [{"field": "fileSystemId", "message": message}]}


def _compute_cidr(app: AppContext, row: ClusterRow) -> str | None:
    """The CIDR block of the cluster's compute subnet (where its nodes are), when known."""
    subnet = facts_of(row).any_compute_subnet
    if not subnet:
        return None
    found = ec2_network.describe_subnets(app.aws, row.region, [str(subnet)])
    return str(found[0]["CidrBlock"]) if found else None


def lustre_access(app: AppContext, row: ClusterRow, fs: dict[str, Any]) -> dict[str, Any]:
    """{securityGroupIds, taggedGroupIds, nodeSecurityGroupId, missing}: the file system's groups (from its network
    interfaces), those carrying the cluster tag (the only ones the control plane may change), and the Lustre port
    ranges they do not allow from the cluster's node security group (blocking)."""
    node_group = facts_of(row).security_group_id
    groups = ec2_network.network_interface_groups(app.aws, row.region, list(fs.get("NetworkInterfaceIds") or []))
    described = vpc.find_security_groups(app.aws, row.region, ids=groups) if groups else []
    missing = fsx_manifests.lustre_gaps(described, str(node_group), _compute_cidr(app, row)) if node_group else []
    tagged = [str(g["GroupId"]) for g in described
              if any(t.get("Key") == TAG_CLUSTER and t.get("Value") for t in g.get("Tags") or [])]
    return {"securityGroupIds": groups, "taggedGroupIds": tagged, "nodeSecurityGroupId": node_group, "missing": missing}


def rule_commands(region: str, group_id: str, node_group: str, ports: list[str]) -> str:
    """The AWS CLI commands that add the missing Lustre rules (one per port range) for the operator to run."""
    return "; ".join(
        f"aws ec2 authorize-security-group-ingress --region {region} --group-id {group_id} --protocol tcp "
        f"--port {port} --source-group {node_group}"
        for port in ports
    )


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
    cluster_vpc = facts_of(row).vpc_id
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
    target = (access["taggedGroupIds"] or groups or [None])[0]
    if missing and not groups:
        raise PreconditionFailed(
            f"FSx file system {file_system_id} has no security group to add Lustre rules to.",
            hint="Check the file system's network interfaces in the EC2 console.",
            details=_field("no security group"),
        )
    ports = " and ".join(f"TCP {p}" for p in missing)
    details = {"missingPorts": missing, "securityGroupIds": groups, "nodeSecurityGroupId": node}
    commands = rule_commands(row.region, str(target), str(node), missing) if missing else ""
    if missing and not add_rules:
        raise PreconditionFailed(
            f"FSx file system {file_system_id}: its security groups ({', '.join(groups)}) do not allow "
            f"Lustre traffic from the cluster's node security group {node}: {ports} missing, so pods cannot mount it.",
            hint=f"Add inbound rules to {target}: {ports} from source group {node} ({commands}), or call "
            "fsx_storage_create again with allowLustreFromNodes: true to let InstantStart add them (only to a group "
            f"tagged {TAG_CLUSTER}).",
            details={**_field("security groups do not allow Lustre from the nodes"), **details},
        )
    if missing and not access["taggedGroupIds"]:
        # The operator's group: the control plane's policy allows AuthorizeSecurityGroupIngress only on groups with
        # the cluster tag, so refuse up front with what to run rather than fail on AccessDenied mid-operation.
        raise PreconditionFailed(
            f"FSx file system {file_system_id}: allowLustreFromNodes: its security group {target} is not "
            f"InstantStart's (no {TAG_CLUSTER} tag), so InstantStart does not change it; {ports} from the cluster's "
            f"node security group {node} missing.",
            hint=f"Run {commands}; then call fsx_storage_create again (the rules are found, nothing is changed). "
            f"Or tag the group to let InstantStart add them: aws ec2 create-tags --region {row.region} "
            f"--resources {target} --tags Key={TAG_CLUSTER},Value={row.tag}",
            details={**_field("security group not tagged by InstantStart"), **details},
        )
    return {**access, "rulesGroupId": target if missing else None, "vpcId": fs.get("VpcId")}


def add_lustre_rules(app: AppContext, region: str, group_id: str, node_group: str) -> None:
    """AuthorizeSecurityGroupIngress TCP 988 and 1018-1023 into the file system's group from the node group and
    from the group itself (rules already there are skipped). Blocking."""
    vpc.allow_lustre(app.aws, region, group_id, [node_group])
