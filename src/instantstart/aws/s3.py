"""S3: the project bucket (found, created, tagged, emptied by prefix) and its objects. Every call names the
expected bucket owner (`owner`, an account id), so a bucket of another account is never read or written."""

from __future__ import annotations

import hashlib
from typing import Any, Literal, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate

BucketState = Literal["absent", "ours", "foreign"]


def bucket_state(aws: AwsClients, region: str, bucket: str, owner: str) -> BucketState:
    """HeadBucket with ExpectedBucketOwner: absent, owned by `owner`, or owned by someone else (403)."""
    try:
        aws.s3(region).head_bucket(Bucket=bucket, ExpectedBucketOwner=owner)
        return "ours"
    except Exception as exc:
        code = error_code(exc)
        if code in ("404", "NoSuchBucket", "NotFound"):
            return "absent"
        if code in ("403", "AccessDenied", "Forbidden"):
            return "foreign"
        raise translate(exc, f"look up bucket {bucket}") from exc


def create_bucket(aws: AwsClients, region: str, bucket: str, tags: list[dict[str, str]], owner: str) -> None:
    """CreateBucket in `region` (LocationConstraint outside us-east-1), then its tags. BucketAlreadyOwnedByYou (S3's
    answer outside us-east-1 when this account made it meanwhile: clusters of one installation created at once
    share the project bucket) means the bucket is there: its creator tags it, this call changes nothing."""
    s3 = aws.s3(region)
    kwargs: dict[str, Any] = {"Bucket": bucket}
    if region != "us-east-1":
        kwargs["CreateBucketConfiguration"] = {"LocationConstraint": region}
    try:
        s3.create_bucket(**kwargs)
    except Exception as exc:
        if error_code(exc) == "BucketAlreadyOwnedByYou":
            return
        raise translate(exc, f"create bucket {bucket}") from exc
    call(
        f"tag bucket {bucket}",
        s3.put_bucket_tagging,
        Bucket=bucket,
        Tagging={"TagSet": cast(Any, tags)},
        ExpectedBucketOwner=owner,
    )


def bucket_tags(aws: AwsClients, region: str, bucket: str, owner: str) -> dict[str, str]:
    """The bucket's tags ({} when it has none)."""
    try:
        answer = aws.s3(region).get_bucket_tagging(Bucket=bucket, ExpectedBucketOwner=owner)
    except Exception as exc:
        if error_code(exc) == "NoSuchTagSet":
            return {}
        raise translate(exc, f"read the tags of bucket {bucket}") from exc
    return {t["Key"]: t["Value"] for t in answer.get("TagSet", [])}


def bucket_region(aws: AwsClients, region: str, bucket: str, owner: str) -> str | None:
    """The Region the bucket lives in (GetBucketLocation); None when the bucket does not exist."""
    try:
        answer: dict[str, Any] = cast(Any, aws.s3(region).get_bucket_location(Bucket=bucket, ExpectedBucketOwner=owner))
    except Exception as exc:
        if error_code(exc) in ("NoSuchBucket", "404", "NotFound"):
            return None
        raise translate(exc, f"locate bucket {bucket}") from exc
    return str(answer.get("LocationConstraint") or "us-east-1")


def put_object(
    aws: AwsClients, region: str, bucket: str, key: str, body: bytes, content_type: str, owner: str
) -> None:
    """PutObject."""
    call(
        f"upload s3://{bucket}/{key}",
        aws.s3(region).put_object,
        Bucket=bucket,
        Key=key,
        Body=body,
        ContentType=content_type,
        ExpectedBucketOwner=owner,
    )


def object_sha256(aws: AwsClients, region: str, bucket: str, key: str, owner: str) -> str | None:
    """The SHA-256 (hex) of an object's content, computed here from GetObject; None when it does not exist."""
    body = get_object(aws, region, bucket, key, owner)
    return None if body is None else hashlib.sha256(body).hexdigest()


def list_objects(
    aws: AwsClients,
    region: str,
    bucket: str,
    prefix: str,
    limit: int,
    owner: str,
    token: str | None = None,
    *,
    flat: bool = False,
) -> dict[str, Any]:
    """ListObjectsV2 of one page (at most `limit` keys, with ETags) under `prefix`, with common prefixes by "/"
    (`flat`: every depth, no common prefixes); `token` is the previous page's NextContinuationToken."""
    s3 = aws.s3(region)
    extra: dict[str, Any] = {"ContinuationToken": token} if token else {}
    if not flat:
        extra["Delimiter"] = "/"
    answer = call(
        f"list s3://{bucket}/{prefix}",
        s3.list_objects_v2,
        Bucket=bucket,
        Prefix=prefix,
        MaxKeys=limit,
        ExpectedBucketOwner=owner,
        **extra,
    )
    return cast("dict[str, Any]", answer)


def list_keys(
    aws: AwsClients, region: str, bucket: str, prefix: str, owner: str, *, suffix: str = "", limit: int = 1000
) -> list[str]:
    """Keys under `prefix` ending in `suffix`, page by page, at most `limit` of them."""
    s3 = aws.s3(region)
    pages: Any = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix, ExpectedBucketOwner=owner)
    keys: list[str] = []
    page: Any
    for page in call(f"list s3://{bucket}/{prefix}", list, pages):
        keys.extend(o["Key"] for o in page.get("Contents", []) if o["Key"].endswith(suffix))
        if len(keys) >= limit:
            break
    return keys[:limit]


def get_object(aws: AwsClients, region: str, bucket: str, key: str, owner: str) -> bytes | None:
    """GetObject's body; None when the key does not exist."""
    got = get_object_tagged(aws, region, bucket, key, owner)
    return None if got is None else got[0]


def object_exists(aws: AwsClients, region: str, bucket: str, key: str, owner: str) -> bool:
    """HeadObject: whether the key exists (a 404 is False; any other error is raised, translated)."""
    try:
        aws.s3(region).head_object(Bucket=bucket, Key=key, ExpectedBucketOwner=owner)
    except Exception as exc:
        if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
            return False
        raise translate(exc, f"look up s3://{bucket}/{key}") from exc
    return True


def has_objects(aws: AwsClients, region: str, bucket: str, prefix: str, owner: str) -> bool:
    """Whether any object's key starts with `prefix`."""
    answer = call(
        f"list s3://{bucket}/{prefix}",
        aws.s3(region).list_objects_v2,
        Bucket=bucket,
        Prefix=prefix,
        MaxKeys=1,
        ExpectedBucketOwner=owner,
    )
    return bool(answer.get("KeyCount") or answer.get("Contents"))


def delete_prefix(aws: AwsClients, region: str, bucket: str, prefix: str, owner: str) -> int:
    """Delete every object under `prefix` (page by page); how many were deleted."""
    if not prefix:
        raise ValueError("delete_prefix needs a non-empty prefix")
    s3 = aws.s3(region)
    paginate = s3.get_paginator("list_objects_v2").paginate
    pages: list[Any] = call(
        f"list s3://{bucket}/{prefix}", list, paginate(Bucket=bucket, Prefix=prefix, ExpectedBucketOwner=owner)
    )
    deleted = 0
    for page in pages:
        keys: list[Any] = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if keys:
            call(
                f"delete under s3://{bucket}/{prefix}",
                s3.delete_objects,
                Bucket=bucket,
                Delete={"Objects": keys},
                ExpectedBucketOwner=owner,
            )
            deleted += len(keys)
    return deleted


def delete_empty_bucket(aws: AwsClients, region: str, bucket: str, owner: str) -> None:
    """DeleteBucket (the bucket must be empty)."""
    call(f"delete bucket {bucket}", aws.s3(region).delete_bucket, Bucket=bucket, ExpectedBucketOwner=owner)


def get_object_tagged(aws: AwsClients, region: str, bucket: str, key: str, owner: str) -> tuple[bytes, str] | None:
    """GetObject's body and ETag (quotes stripped); None when the key does not exist."""
    try:
        answer: Any = aws.s3(region).get_object(Bucket=bucket, Key=key, ExpectedBucketOwner=owner)
    except Exception as exc:
        if error_code(exc) in ("NoSuchKey", "404", "NotFound"):
            return None
        raise translate(exc, f"read s3://{bucket}/{key}") from exc
    return cast(bytes, answer["Body"].read()), str(answer.get("ETag", "")).strip('"')


def put_object_if(
    aws: AwsClients, region: str, bucket: str, key: str, body: bytes, owner: str, *, if_match: str | None
) -> str | None:
    """PutObject only over the version `if_match` (an ETag), or only where no object is (`if_match` None): S3's
    conditional write, so a version written meanwhile by someone else is never overwritten. The new ETag, or None
    when the condition failed (412, or 404 for If-Match on a key that is gone)."""
    condition: dict[str, Any] = {"IfMatch": f'"{if_match}"'} if if_match else {"IfNoneMatch": "*"}
    try:
        answer: Any = aws.s3(region).put_object(
            Bucket=bucket, Key=key, Body=body, ExpectedBucketOwner=owner, **condition
        )
    except Exception as exc:
        if error_code(exc) in ("PreconditionFailed", "412", "NoSuchKey", "404", "ConditionalRequestConflict"):
            return None
        raise translate(exc, f"upload s3://{bucket}/{key}") from exc
    return str(answer.get("ETag", "")).strip('"')


def delete_object_if(aws: AwsClients, region: str, bucket: str, key: str, owner: str, *, if_match: str) -> bool:
    """DeleteObject only while the object is the version `if_match` (an ETag); False when it is another one (412).
    A key already gone counts as deleted."""
    try:
        aws.s3(region).delete_object(Bucket=bucket, Key=key, ExpectedBucketOwner=owner, IfMatch=f'"{if_match}"')
    except Exception as exc:
        code = error_code(exc)
        if code in ("NoSuchKey", "404", "NotFound"):
            return True
        if code in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
            return False
        raise translate(exc, f"delete s3://{bucket}/{key}") from exc
    return True
