"""S3: the project bucket (found, created, tagged, emptied) and its objects."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate


def bucket_exists(aws: AwsClients, region: str, bucket: str) -> bool:
    """HeadBucket: whether the bucket exists (and is reachable with these credentials)."""
    try:
        aws.s3(region).head_bucket(Bucket=bucket)
        return True
    except Exception as exc:
        if error_code(exc) in ("404", "NoSuchBucket", "NotFound"):
            return False
        raise translate(exc, f"look up bucket {bucket}") from exc


def create_bucket(aws: AwsClients, region: str, bucket: str, tags: list[dict[str, str]]) -> None:
    """CreateBucket in `region` (LocationConstraint outside us-east-1), then its tags."""
    s3 = aws.s3(region)
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    call(f"create bucket {bucket}", s3.create_bucket, **kwargs)
    call(f"tag bucket {bucket}", s3.put_bucket_tagging, Bucket=bucket, Tagging={"TagSet": cast(Any, tags)})


def bucket_region(aws: AwsClients, region: str, bucket: str) -> str | None:
    """The Region the bucket lives in (GetBucketLocation); None when the bucket does not exist."""
    try:
        answer: dict[str, Any] = cast(Any, aws.s3(region).get_bucket_location(Bucket=bucket))
    except Exception as exc:
        if error_code(exc) in ("NoSuchBucket", "404", "NotFound"):
            return None
        raise translate(exc, f"locate bucket {bucket}") from exc
    return str(answer.get("LocationConstraint") or "us-east-1")


def put_object(aws: AwsClients, region: str, bucket: str, key: str, body: bytes, content_type: str) -> None:
    """PutObject."""
    call(
        f"upload s3://{bucket}/{key}",
        aws.s3(region).put_object,
        Bucket=bucket,
        Key=key,
        Body=body,
        ContentType=content_type,
    )


def list_objects(
    aws: AwsClients, region: str, bucket: str, prefix: str, limit: int, token: str | None = None
) -> dict[str, Any]:
    """ListObjectsV2 of one page (at most `limit` keys) under `prefix`, with common prefixes by "/";
    `token` is the previous page's NextContinuationToken."""
    s3 = aws.s3(region)
    extra: dict[str, Any] = {"ContinuationToken": token} if token else {}
    answer = call(
        f"list s3://{bucket}/{prefix}",
        s3.list_objects_v2,
        Bucket=bucket,
        Prefix=prefix,
        Delimiter="/",
        MaxKeys=limit,
        **extra,
    )
    return cast("dict[str, Any]", answer)


def list_keys(
    aws: AwsClients, region: str, bucket: str, prefix: str, *, suffix: str = "", limit: int = 1000
) -> list[str]:
    """Keys under `prefix` ending in `suffix`, page by page, at most `limit` of them."""
    s3 = aws.s3(region)
    pages: Any = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    keys: list[str] = []
    page: Any
    for page in call(f"list s3://{bucket}/{prefix}", list, pages):
        keys.extend(o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(suffix))
        if len(keys) >= limit:
            break
    return keys[:limit]


def get_object(aws: AwsClients, region: str, bucket: str, key: str) -> bytes | None:
    """GetObject's body; None when the key does not exist."""
    try:
        answer: Any = aws.s3(region).get_object(Bucket=bucket, Key=key)
    except Exception as exc:
        if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
            return None
        raise translate(exc, f"read s3://{bucket}/{key}") from exc
    return cast(bytes, answer["Body"].read())


def delete_bucket(aws: AwsClients, region: str, bucket: str) -> None:
    """Empty the bucket (every object, page by page) and delete it."""
    s3 = aws.s3(region)
    pages: list[Any] = call(f"list s3://{bucket}", list, s3.get_paginator("list_objects_v2").paginate(Bucket=bucket))
    for page in pages:
        keys: list[Any] = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            call(f"empty bucket {bucket}", s3.delete_objects, Bucket=bucket, Delete={"Objects": keys})
    call(f"delete bucket {bucket}", s3.delete_bucket, Bucket=bucket)
