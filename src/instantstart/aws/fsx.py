"""Amazon FSx for Lustre calls: create, describe, find by tag and delete file systems (blocking, errors translated)."""

from __future__ import annotations

from typing import Any, cast

from instantstart.aws.clients import AwsClients
from instantstart.aws.errors import call, error_code, translate

NOT_FOUND = "FileSystemNotFound"


def create_lustre(
    aws: AwsClients,
    region: str,
    *,
    subnet_id: str,
    security_group_ids: list[str],
    storage_capacity: int | None,
    storage_type: str,
    lustre: dict[str, Any],
    version: str,
    tags: list[dict[str, str]],
    client_token: str,
) -> dict[str, Any]:
    """CreateFileSystem (LUSTRE) in one subnet; the FileSystem description. The same ClientRequestToken
    returns the file system the first call created (a retried stage never makes two). storage_capacity None:
    an elastic (INTELLIGENT_TIERING) file system, sized by LustreConfiguration.ThroughputCapacity."""
    sized: dict[str, Any] = {} if storage_capacity is None else {"StorageCapacity": storage_capacity}
    answer = call(
        "create FSx for Lustre file system",
        aws.fsx(region).create_file_system,
        ClientRequestToken=client_token,
        FileSystemType="LUSTRE",
        FileSystemTypeVersion=version,
        **sized,
        StorageType=cast(Any, storage_type),
        SubnetIds=[subnet_id],
        SecurityGroupIds=security_group_ids,
        Tags=cast(Any, tags),
        LustreConfiguration=cast(Any, lustre),
    )
    return cast("dict[str, Any]", answer["FileSystem"])


def describe(aws: AwsClients, region: str, file_system_id: str) -> dict[str, Any] | None:
    """One file system's description, or None when it does not exist."""
    try:
        answer = aws.fsx(region).describe_file_systems(FileSystemIds=[file_system_id])
    except Exception as exc:
        if error_code(exc) == NOT_FOUND:
            return None
        raise translate(exc, f"describe FSx file system {file_system_id}") from exc
    found = answer.get("FileSystems") or []
    return cast("dict[str, Any]", found[0]) if found else None


def tagged(aws: AwsClients, region: str, key: str, value: str) -> list[dict[str, Any]]:
    """Every file system of the Region carrying the tag key=value (DescribeFileSystems has no tag filter)."""
    pages = aws.fsx(region).get_paginator("describe_file_systems").paginate()
    listed: list[Any] = call("list FSx file systems", list, pages)
    return [
        cast("dict[str, Any]", fs)
        for page in listed
        for fs in page.get("FileSystems", [])
        if any(t.get("Key") == key and t.get("Value") == value for t in fs.get("Tags") or [])
    ]


def delete(aws: AwsClients, region: str, file_system_id: str) -> None:
    """DeleteFileSystem (asynchronous: DELETING, then gone); a file system already gone is success."""
    try:
        aws.fsx(region).delete_file_system(FileSystemId=file_system_id)
    except Exception as exc:
        if error_code(exc) != NOT_FOUND:
            raise translate(exc, f"delete FSx file system {file_system_id}") from exc


def lifecycle(aws: AwsClients, region: str, file_system_id: str) -> str | None:
    """The file system's Lifecycle (AVAILABLE, CREATING, …), or None once it is gone."""
    found = describe(aws, region, file_system_id)
    return str(found.get("Lifecycle")) if found else None
