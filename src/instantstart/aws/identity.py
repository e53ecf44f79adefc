"""STS: who the control plane is (account, principal)."""

from __future__ import annotations

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call


def caller_arn(aws: AwsClients, region: str) -> str:
    """GetCallerIdentity's ARN (a user, role or assumed-role session)."""
    return str(call("get caller identity", aws.sts(region).get_caller_identity)["Arn"])


def account_id(aws: AwsClients, region: str) -> str:
    """The account id of the control plane's credentials."""
    return str(call("read the account id", aws.sts(region).get_caller_identity)["Account"])
