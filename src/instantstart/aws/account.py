"""Account-level look-ups for `instantstart doctor`: identity, roles, quotas, VPCs, bucket owner, policy simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import error_code


@dataclass(frozen=True)
class Identity:
    """Who the credentials belong to."""

    account: str
    arn: str

    @property
    def assumed_role(self) -> str | None:
        """The role name when the caller is an assumed-role session (arn:…:sts::…:assumed-role/NAME/session)."""
        kind, _, rest = self.arn.partition(":assumed-role/")
        return rest.split("/", 1)[0] if kind and rest else None


def caller_identity(aws: AwsClients, region: str) -> Identity:
    """STS GetCallerIdentity."""
    answer = aws.sts(region).get_caller_identity()
    return Identity(account=str(answer["Account"]), arn=str(answer["Arn"]))


def role_arn(aws: AwsClients, region: str, name: str) -> str | None:
    """The ARN of role `name`, or None when no such role exists."""
    try:
        return str(aws.iam(region).get_role(RoleName=name)["Role"]["Arn"])
    except Exception as exc:
        if error_code(exc) == "NoSuchEntity":
            return None
        raise


def quota_values(aws: AwsClients, region: str, service_code: str) -> dict[str, float]:
    """Every applied quota of one service by name (Service Quotas ListServiceQuotas, all pages)."""
    values: dict[str, float] = {}
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"ServiceCode": service_code, "MaxResults": 100}
        if token:
            kwargs["NextToken"] = token
        page = aws.quotas(region).list_service_quotas(**kwargs)
        for quota in page.get("Quotas", []):
            values[str(quota["QuotaName"])] = float(quota["Value"])
        token = page.get("NextToken")
        if not token:
            return values


def vpc_count(aws: AwsClients, region: str) -> int:
    """How many VPCs the Region has."""
    return sum(len(page.get("Vpcs", [])) for page in aws.ec2(region).get_paginator("describe_vpcs").paginate())


def bucket_owned(aws: AwsClients, region: str, bucket: str, account: str) -> bool | None:
    """True: the bucket exists and `account` owns it; False: it exists under another owner; None: no such bucket."""
    try:
        aws.s3(region).head_bucket(Bucket=bucket, ExpectedBucketOwner=account)
        return True
    except Exception as exc:
        code = error_code(exc)
        if code in ("404", "NoSuchBucket", "NotFound"):
            return None
        if code in ("403", "AccessDenied"):
            return False
        raise


def simulate_denied(aws: AwsClients, region: str, principal_arn: str, actions: list[str]) -> list[str]:
    """Actions of `actions` that IAM's policy simulator does not allow `principal_arn` (any resource)."""
    denied: list[str] = []
    for start in range(0, len(actions), 100):
        kwargs: dict[str, Any] = {"PolicySourceArn": principal_arn, "ActionNames": actions[start : start + 100]}
        while True:
            page = aws.iam(region).simulate_principal_policy(**kwargs)
            denied += [r["EvalActionName"] for r in page.get("EvaluationResults", []) if r["EvalDecision"] != "allowed"]
            if not page.get("IsTruncated"):
                break
            kwargs["Marker"] = page["Marker"]
    return denied
