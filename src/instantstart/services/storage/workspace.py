"""The workspace: files of an S3 claim listed, read, written and deleted one by one through the control plane."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any

from pydantic import Field

from instantstart.aws import identity, s3
from instantstart.catalog import operation
from instantstart.catalog.base import WireModel
from instantstart.context import AppContext, CallContext
from instantstart.errors import Conflict, InvalidInput, NotFound, PreconditionFailed
from instantstart.manifests import iam_policies as pol
from instantstart.manifests import storage as storage_manifests
from instantstart.operations.waiting import blocking
from instantstart.services.base.facts import facts_of
from instantstart.services.storage.s3_claims import active_cluster, default_bucket
from instantstart.store.models import ClusterRow
from instantstart.validation import KubeName
from instantstart.workspace_paths import MAX_FILE_BYTES, workspace_path

LIST_PAGE = 1000
ETAG = r"^[0-9A-Za-z-]{1,64}$"


def claim_base(app: AppContext, row: ClusterRow, claim: str) -> dict[str, Any]:
    """Bucket, Region and key prefix of a claim as this control plane recorded it when it made the claim (never
    read back from the PV: anyone who can write PVs could point one at the lifecycle scripts). On the project
    bucket the prefix must lie in the cluster's data prefix."""
    recorded = facts_of(row).storage.get(claim)
    if not recorded:
        raise NotFound(
            f"No S3 storage named {claim!r} recorded for cluster {row.tag}.",
            hint="Create it with s3_storage_create (storage_list shows the claims); the workspace only syncs "
            "into a claim InstantStart made.",
            details={"fields": [{"field": "storage", "message": "unknown S3 storage"}]},
        )
    prefix = str(recorded.get("prefix") or "")
    if recorded["bucketName"] == default_bucket(app, row) and not prefix.startswith(pol.data_prefix(row.tag)):
        raise PreconditionFailed(
            f"Storage {claim!r} is recorded outside the data prefix {pol.data_prefix(row.tag)} of the project bucket.",
            hint="Recreate the claim with s3_storage_create; the workspace never writes elsewhere in that bucket.",
        )
    return {"bucketName": recorded["bucketName"], "region": recorded["region"], "prefix": prefix}


async def _claim(ctx: CallContext, claim: str) -> tuple[dict[str, Any], str]:
    row = await active_cluster(ctx)
    base = await blocking(claim_base, ctx.app, row, claim)
    owner = await blocking(identity.account_id, ctx.app.aws, base["region"])
    return base, owner


class ListFilesRequest(WireModel):
    """Which claim, which sub-folder, which page."""

    storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The claim name given to s3_storage_create."
    )
    prefix: str | None = Field(default=None, description="Only files below this folder of the claim (e.g. code/).")
    continuation_token: str | None = Field(
        default=None, max_length=1024, description="nextContinuationToken of the previous page."
    )


class WorkspaceFile(WireModel):
    """One file of the claim."""

    path: str = Field(description="Relative to the claim (what pods see under the mount).")
    etag: str = Field(description="The object's ETag (quotes stripped): changes whenever the content does.")
    size: int
    last_modified: datetime | None


class ListFilesResult(WireModel):
    """One page of the files below the prefix, every depth."""

    storage: str
    files: list[WorkspaceFile]
    truncated: bool
    next_continuation_token: str | None = None


@operation("workspace_list_files", method="GET", path="/workspace/files", example={"storage": "s3-claim"})
async def workspace_list_files(ctx: CallContext, req: ListFilesRequest) -> ListFilesResult:
    """List every file (all depths) of the S3 storage `storage` (default s3-claim) of the active cluster, below
    `prefix` when given, with ETag, size and time: what `instantstart workspace sync` compares. Paths are relative
    to the claim. Pages of up to 1000; when `truncated`, pass nextContinuationToken as continuationToken. Not
    cached (a sync needs the current ETags). Only claims InstantStart recorded (s3_storage_create)."""
    sub = workspace_path(req.prefix.rstrip("/"), "prefix") + "/" if req.prefix else ""
    base, owner = await _claim(ctx, req.storage)
    root = base["prefix"]
    page = await blocking(
        s3.list_objects,
        ctx.app.aws,
        base["region"],
        base["bucketName"],
        root + sub,
        LIST_PAGE,
        owner,
        req.continuation_token,
        flat=True,
    )
    files = [
        WorkspaceFile(
            path=o["Key"][len(root) :],
            etag=str(o.get("ETag", "")).strip('"'),
            size=int(o.get("Size", 0)),
            last_modified=o.get("LastModified"),
        )
        for o in page.get("Contents") or []
        if o["Key"].startswith(root) and o["Key"] != root
    ]
    return ListFilesResult(
        storage=req.storage,
        files=files,
        truncated=bool(page.get("IsTruncated")),
        next_continuation_token=page.get("NextContinuationToken"),
    )


class FileRequest(WireModel):
    """One file of a claim."""

    storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The claim name given to s3_storage_create."
    )
    path: str = Field(description="The file, relative to the claim (e.g. src/train.py).")


class FileContent(WireModel):
    """A file's content and version."""

    path: str
    etag: str
    size: int
    content_base64: str = Field(description="The content, base64.")


@operation(
    "workspace_read_file", method="GET", path="/workspace/files/content", example={"path": "README.md"}
)
async def workspace_read_file(ctx: CallContext, req: FileRequest) -> FileContent:
    """Read one file of the S3 storage `storage` (default s3-claim) of the active cluster: content (base64) and
    ETag. At most 512 KiB (larger: PRECONDITION_FAILED; read it from a pod or with S3 tools). NOT_FOUND when
    the file does not exist."""
    path = workspace_path(req.path)
    base, owner = await _claim(ctx, req.storage)
    key = base["prefix"] + path
    got = await blocking(s3.get_object_tagged, ctx.app.aws, base["region"], base["bucketName"], key, owner)
    if got is None:
        raise NotFound(
            f"No file {path!r} in storage {req.storage!r}.",
            hint="workspace_list_files shows the files of the claim.",
            details={"fields": [{"field": "path", "message": "no such file"}]},
        )
    body, etag = got
    if len(body) > MAX_FILE_BYTES:
        raise PreconditionFailed(
            f"{path} is {len(body)} bytes; the workspace moves files of at most {MAX_FILE_BYTES} bytes.",
            hint="Read large files from a pod that mounts the claim, or with S3 tools.",
        )
    return FileContent(path=path, etag=etag, size=len(body), content_base64=base64.b64encode(body).decode())


class WriteFileRequest(WireModel):
    """A file to write, and the version it replaces."""

    storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The claim name given to s3_storage_create."
    )
    path: str = Field(description="The file, relative to the claim (e.g. src/train.py).")
    content_base64: str = Field(
        max_length=(MAX_FILE_BYTES + 2) // 3 * 4, description="The content, base64; at most 512 KiB decoded."
    )
    if_match: str | None = Field(
        default=None,
        pattern=ETAG,
        description="The ETag of the version this replaces; omitted: the file must not exist yet.",
    )


class WrittenFile(WireModel):
    """What was written."""

    path: str
    etag: str
    size: int


def _stale(path: str, storage: str, what: str) -> Conflict:
    return Conflict(
        f"{path} in storage {storage!r} {what}.",
        hint="Someone changed it meanwhile: list the files again (or run `instantstart workspace sync` again, "
        "which keeps both versions), then retry with its current ETag.",
        details={"fields": [{"field": "ifMatch", "message": "not the current version"}]},
    )


@operation(
    "workspace_write_file",
    method="POST",
    path="/workspace/files",
    side_effecting=True,
    idempotent=True,
    example={"path": "README.md", "contentBase64": "aGVsbG8K"},
)
async def workspace_write_file(ctx: CallContext, req: WriteFileRequest) -> WrittenFile:
    """Write one file (at most 512 KiB, base64) into the S3 storage `storage` (default s3-claim) of the active
    cluster, where its pods see it under the mount. Conditional: with ifMatch only over that version (its ETag),
    without it only where no file is; otherwise CONFLICT and nothing is written, so a version written meanwhile
    is never lost. Paths stay inside the claim (no '..', no leading '/').

    Side-effecting: it writes a file of your data in the claim's bucket (no managed resource changes); it is no
    read, so an agent asks before calling it."""
    path = workspace_path(req.path)
    try:
        body = base64.b64decode(req.content_base64, validate=True)
    except (binascii.Error, ValueError):
        raise InvalidInput(
            "Invalid input: contentBase64: not valid base64",
            details={"fields": [{"field": "contentBase64", "message": "must be base64 (RFC 4648)"}]},
        ) from None
    if len(body) > MAX_FILE_BYTES:
        raise InvalidInput(
            f"Invalid input: contentBase64: {len(body)} bytes, at most {MAX_FILE_BYTES}",
            hint="Copy large files with S3 tools or from a pod that mounts the claim.",
            details={"fields": [{"field": "contentBase64", "message": f"at most {MAX_FILE_BYTES} bytes"}]},
        )
    base, owner = await _claim(ctx, req.storage)
    key = base["prefix"] + path
    etag = await blocking(
        s3.put_object_if, ctx.app.aws, base["region"], base["bucketName"], key, body, owner, if_match=req.if_match
    )
    if etag is None:
        raise _stale(path, req.storage, "is not the version ifMatch names" if req.if_match else "exists already")
    return WrittenFile(path=path, etag=etag, size=len(body))


class DeleteFileRequest(WireModel):
    """A file to delete, and the version it must still be."""

    storage: KubeName = Field(
        default=storage_manifests.DEFAULT_CLAIM, description="The claim name given to s3_storage_create."
    )
    path: str = Field(description="The file, relative to the claim.")
    if_match: str = Field(pattern=ETAG, description="The ETag of the version to delete (workspace_list_files).")


class DeletedFile(WireModel):
    """What was deleted."""

    path: str
    deleted: bool


@operation(
    "workspace_delete_file",
    method="POST",
    path="/workspace/files/delete",
    side_effecting=True,
    idempotent=True,
    example={"path": "README.md", "ifMatch": "5d41402abc4b2a76b9719d911017c592"},
)
async def workspace_delete_file(ctx: CallContext, req: DeleteFileRequest) -> DeletedFile:
    """Delete one file of the S3 storage `storage` (default s3-claim) of the active cluster, only while it is the
    version ifMatch names (CONFLICT when it changed since: nothing deleted). A file already gone is success.

    Side-effecting: it deletes a file of your data in the claim's bucket (no managed resource changes); it is no
    read, so an agent asks before calling it."""
    path = workspace_path(req.path)
    base, owner = await _claim(ctx, req.storage)
    key = base["prefix"] + path
    done = await blocking(
        s3.delete_object_if, ctx.app.aws, base["region"], base["bucketName"], key, owner, if_match=req.if_match
    )
    if not done:
        raise _stale(path, req.storage, "is not the version ifMatch names")
    return DeletedFile(path=path, deleted=True)
