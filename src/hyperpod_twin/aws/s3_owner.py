"""S3 bucket ownership in the twin: ExpectedBucketOwner enforced (403 on a mismatch, as AWS answers), and
buckets created in another account (a squatter who took a bucket name first)."""

from __future__ import annotations

from typing import Any

from .context import AwsContext
from .protocol import AwsError, AwsRequest


def bucket_of(req: AwsRequest) -> str | None:
    """The bucket a path-style S3 request addresses (virtual-hosted: from the Host header)."""
    name = req.path.lstrip("/").split("/", 1)[0]
    if name:
        return name
    host = {k.lower(): v for k, v in req.headers.items()}.get("host", "")
    return host.split(".", 1)[0] if host.count(".") >= 2 and not host[0].isdigit() else None


def owner_of(bucket: str) -> str | None:
    """The account that owns `bucket` in the twin, or None when no account has it."""
    from moto.s3.models import s3_backends

    entry = s3_backends.bucket_accounts.get(bucket)
    return entry[1] if entry else None


def guard(req: AwsRequest) -> None:
    """Refuse a request whose ExpectedBucketOwner is not the bucket's owner (403 AccessDenied)."""
    expected = {k.lower(): v for k, v in req.headers.items()}.get("x-amz-expected-bucket-owner")
    bucket = bucket_of(req)
    if not expected or not bucket:
        return
    owner = owner_of(bucket)
    if owner is not None and owner != expected:
        raise AwsError("AccessDenied", "Access Denied", 403)


def create_foreign_bucket(data: dict[str, Any], region: str) -> dict[str, Any]:
    """`POST /_twin/s3/foreign-buckets {"bucket", "account"}`: the bucket exists, owned by another account."""
    from moto.s3.models import s3_backends

    bucket, account = str(data["bucket"]), str(data["account"])
    if not (account.isdigit() and len(account) == 12):
        raise ValueError("account must be 12 digits")
    s3_backends[account]["aws"].create_bucket(bucket, str(data.get("region") or region))
    return {"bucket": bucket, "owner": account}


def register(ctx: AwsContext) -> None:
    """Install the ExpectedBucketOwner guard on every S3 request (the twin keys S3 requests by ("s3", ""))."""
    ctx.guards[("s3", "")] = guard
