"""What a HyperPod node launch looks up in the account: a free private IP, the lifecycle script in S3."""

from __future__ import annotations

import ipaddress

from .context import AwsContext
from .hyperpod_model import InstanceGroup


def free_private_ip(ctx: AwsContext, region: str, subnet_id: str, used: set[str]) -> str:
    """The first address of the subnet (from .10) no twin node uses."""
    try:
        cidr = ipaddress.ip_network(ctx.ec2(region).get_subnet(subnet_id).cidr_block)
    except Exception:
        cidr = ipaddress.ip_network("10.0.0.0/16")
    for offset in range(10, cidr.num_addresses - 1):
        ip = str(cidr.network_address + offset)
        if ip not in used:
            return ip
    return str(cidr.network_address + 4)


def lifecycle_script_problem(ctx: AwsContext, group: InstanceGroup) -> str | None:
    """Why the group's OnCreate script cannot be fetched from S3 (None when it can, or none is set)."""
    lcc = group.spec.get("LifeCycleConfig") or {}
    uri, script = str(lcc.get("SourceS3Uri") or ""), str(lcc.get("OnCreate") or "")
    if not uri.startswith("s3://") or not script:
        return None
    from moto.s3.models import s3_backends

    bucket, _, prefix = uri[len("s3://") :].partition("/")
    key = f"{prefix.strip('/')}/{script}" if prefix.strip("/") else script
    where = f"s3://{bucket}/{key}"
    try:
        found = s3_backends[ctx.account_id]["aws"].get_object(bucket, key)
    except Exception:
        found = None
    if found is None:
        return f"Lifecycle script {where} could not be downloaded: the object does not exist."
    return None
