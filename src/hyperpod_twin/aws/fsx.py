"""FSx for Lustre file systems: CREATING→AVAILABLE on the twin clock, with DNSName and MountName."""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Final

from .context import AwsContext, alnum_id, hex_id
from .protocol import AwsError, AwsRequest, PassThrough, RawResponse, json_response, page

FSX = "fsx"
CHANGED: Final = "fsx.filesystem.changed"  # bus topic: file_system=<public view>, or file_system_id + deleted=True
CREATE_SECONDS = 360.0
DELETE_SECONDS = 180.0
DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}


def bad_request(message: str) -> AwsError:
    """FSx BadRequest."""
    return AwsError("BadRequest", message)


def _check_capacity(deployment: str, capacity: Any, storage_type: str) -> int:
    if not isinstance(capacity, int):
        raise AwsError("InvalidParameterValue", "StorageCapacity is required for Lustre file systems.")
    if storage_type == "SSD":
        step = 3600 if deployment == "SCRATCH_1" else 2400
        if capacity not in (1200, 2400) and (capacity < 2400 or capacity % step):
            raise AwsError(
                "InvalidParameterValue",
                f"StorageCapacity {capacity} is invalid for {deployment}: use 1200, 2400, or increments of {step} GiB.",
            )
    return capacity


def _check_tiering(deployment: str, p: dict[str, Any], lustre: dict[str, Any]) -> int | None:
    """INTELLIGENT_TIERING (elastic, so no StorageCapacity): PERSISTENT_2 only, ThroughputCapacity a multiple of
    4000 MBps (below 4000 the SDK refuses it before sending), DataReadCacheConfiguration required (SizeGiB with
    USER_PROVISIONED only)."""
    if deployment != "PERSISTENT_2":
        raise bad_request(f"StorageType INTELLIGENT_TIERING is not supported for DeploymentType {deployment}.")
    if p.get("StorageCapacity") is not None:
        raise bad_request("StorageCapacity can't be specified for the INTELLIGENT_TIERING storage type.")
    if lustre.get("PerUnitStorageThroughput") is not None:
        raise bad_request("PerUnitStorageThroughput can't be specified for the INTELLIGENT_TIERING storage type.")
    throughput = lustre.get("ThroughputCapacity")
    if not isinstance(throughput, int) or not (
        0 < throughput <= 2_000_000 and throughput % 4000 == 0
    ):
        raise AwsError(
            "InvalidParameterValue",
            "ThroughputCapacity is required for INTELLIGENT_TIERING: increments of 4000 MBps.",
        )
    cache = lustre.get("DataReadCacheConfiguration")
    if not isinstance(cache, dict) or cache.get("SizingMode") is None:
        raise bad_request("DataReadCacheConfiguration is required for the INTELLIGENT_TIERING storage type.")
    sized = cache.get("SizeGiB") is not None
    if sized != (cache["SizingMode"] == "USER_PROVISIONED"):
        raise bad_request("DataReadCacheConfiguration.SizeGiB is required with USER_PROVISIONED sizing, and only then.")
    if sized and not 8 * throughput // 1000 <= int(cache["SizeGiB"]) <= 32768 * throughput // 1000:
        raise AwsError("InvalidParameterValue", "SizeGiB must be 8 to 32768 GiB per 1000 MBps of ThroughputCapacity.")
    if (lustre.get("MetadataConfiguration") or {}).get("Mode") == "AUTOMATIC":
        raise bad_request("AUTOMATIC metadata configuration mode is supported only on SSD file systems.")
    return None  # elastic: no StorageCapacity


class FsxState:
    """Lustre file systems by id."""

    def __init__(self) -> None:
        self.file_systems: dict[str, dict[str, Any]] = {}

    def reset(self) -> None:
        """Forget every file system."""
        self.file_systems.clear()


class FsxOps:
    """The FSx for Lustre file system operations, one named handler each."""

    def __init__(self, ctx: AwsContext, state: FsxState) -> None:
        self.ctx = ctx
        self.state = state

    def create(self, req: AwsRequest) -> RawResponse:
        """CreateFileSystem."""
        p = req.params
        if p.get("FileSystemType") != "LUSTRE":
            raise PassThrough()
        lustre = copy.deepcopy(p.get("LustreConfiguration") or {})
        deployment = lustre.get("DeploymentType", "SCRATCH_1")
        if deployment not in DEPLOYMENT_TYPES:
            raise bad_request(f"Invalid DeploymentType {deployment}")
        storage_type = p.get("StorageType", "SSD")
        capacity = (
            _check_tiering(deployment, p, lustre)
            if storage_type == "INTELLIGENT_TIERING"
            else _check_capacity(deployment, p.get("StorageCapacity"), storage_type)
        )
        if deployment in THROUGHPUT and storage_type != "INTELLIGENT_TIERING":
            tput = lustre.get("PerUnitStorageThroughput")
            if tput not in THROUGHPUT[deployment] and storage_type == "SSD":
                raise AwsError(
                    "InvalidPerUnitStorageThroughput",
                    f"PerUnitStorageThroughput must be one of {THROUGHPUT[deployment]} for {deployment}.",
                )
        subnets = list(p.get("SubnetIds") or [])
        if len(subnets) != 1:
            raise AwsError("InvalidNetworkSettings", "Lustre file systems require exactly one subnet.")
        with self.ctx.locked():
            try:
                az, az_id, vpc_id = self.ctx.subnet_az(req.region, subnets[0])
            except AwsError as exc:
                raise AwsError("InvalidNetworkSettings", f"The subnet ID '{subnets[0]}' does not exist") from exc
            ec2 = self.ctx.ec2(req.region)
            groups = list(p.get("SecurityGroupIds") or [])
            for sg in groups:
                if ec2.get_security_group_from_id(sg) is None:
                    raise AwsError("InvalidNetworkSettings", f"The security group '{sg}' does not exist")
            if not groups:  # none given: the VPC's default security group
                default = ec2.get_default_security_group(vpc_id)
                groups = [default.id] if default is not None else []
            token = p.get("ClientRequestToken")
            if token:
                for known in self.state.file_systems.values():
                    if known.get("_token") == token:
                        return json_response(req, {"FileSystem": _public(known)})
            fs_id = "fs-" + hex_id(17)
            # The file system's network interface in its subnet carries its security groups (what DescribeFileSystems
            # does not show: a client finds them through NetworkInterfaceIds and DescribeNetworkInterfaces).
            eni = ec2.create_network_interface(
                ec2.get_subnet(subnets[0]),
                None,
                group_ids=groups,
                description=f"ENI for Amazon FSx file system {fs_id}",
            )
            mount = "fsx" if deployment == "SCRATCH_1" else alnum_id(8)
            lustre.setdefault("DeploymentType", deployment)
            lustre["MountName"] = mount
            lustre.setdefault("DataCompressionType", "NONE")
            lustre.setdefault("WeeklyMaintenanceStartTime", "1:05:00")
            fs: dict[str, Any] = {
                "OwnerId": self.ctx.account_id,
                "CreationTime": self.ctx.clock.wall(),
                "FileSystemId": fs_id,
                "FileSystemType": "LUSTRE",
                "FileSystemTypeVersion": p.get("FileSystemTypeVersion", "2.15"),
                "Lifecycle": "CREATING",
                **({"StorageCapacity": capacity} if capacity is not None else {}),
                "StorageType": storage_type,
                "VpcId": vpc_id,
                "SubnetIds": subnets,
                "NetworkInterfaceIds": [eni.id],
                "DNSName": f"{fs_id}.fsx.{req.region}.amazonaws.com",
                "ResourceARN": self.ctx.arn("fsx", req.region, f"file-system/{fs_id}"),
                "Tags": list(p.get("Tags") or []),
                "LustreConfiguration": lustre,
                "_token": token,
                "_security_groups": groups,
                "_region": req.region,
                "_az": (az, az_id),
            }
            if p.get("KmsKeyId"):
                fs["KmsKeyId"] = p["KmsKeyId"]
            self.state.file_systems[fs_id] = fs
            _changed(self.ctx, fs)

            def available() -> None:
                if self.state.file_systems.get(fs_id) is fs and fs["Lifecycle"] == "CREATING":
                    fs["Lifecycle"] = "AVAILABLE"
                    _changed(self.ctx, fs)

            def failed() -> None:
                if self.state.file_systems.get(fs_id) is fs:
                    fs["Lifecycle"] = "FAILED"
                    fs["FailureDetails"] = {"Message": "Insufficient capacity to create the file system in " + az}
                    _changed(self.ctx, fs)

            # A scripted capacity shortage for "fsx.lustre" in this AZ fails the file system.
            short = self.ctx.faults.capacity_short("fsx.lustre", az, az_id)
            self.ctx.later(CREATE_SECONDS if not short else 60.0, failed if short else available)
            return json_response(req, {"FileSystem": _public(fs)})

    def describe(self, req: AwsRequest) -> RawResponse:
        """DescribeFileSystems."""
        p = req.params
        with self.ctx.locked():
            ids = list(p.get("FileSystemIds") or [])
            for fid in ids:
                if fid not in self.state.file_systems:
                    raise AwsError("FileSystemNotFound", f"File system '{fid}' does not exist.")
            items = [
                _public(fs)
                for fid, fs in sorted(self.state.file_systems.items())
                if fs["_region"] == req.region and (not ids or fid in ids)
            ]
        return json_response(req, page(p, items, "FileSystems", default_size=2147483647))

    def delete(self, req: AwsRequest) -> RawResponse:
        """DeleteFileSystem."""
        fid = str(req.params.get("FileSystemId"))
        with self.ctx.locked():
            fs = self.state.file_systems.get(fid)
            if fs is None:
                raise AwsError("FileSystemNotFound", f"File system '{fid}' does not exist.")
            if fs["Lifecycle"] == "CREATING":
                raise bad_request(f"File system '{fid}' is CREATING and cannot be deleted yet.")
            fs["Lifecycle"] = "DELETING"
            _changed(self.ctx, fs)

            def gone() -> None:
                if self.state.file_systems.get(fid) is fs:
                    del self.state.file_systems[fid]
                    for eni_id in fs["NetworkInterfaceIds"]:  # its network interfaces go with it
                        with contextlib.suppress(Exception):  # already gone
                            self.ctx.ec2(fs["_region"]).delete_network_interface(eni_id)
                    self.ctx.emit(CHANGED, file_system_id=fid, deleted=True)

            self.ctx.later(DELETE_SECONDS, gone)
        return json_response(req, {"FileSystemId": fid, "Lifecycle": "DELETING"})

    def update(self, req: AwsRequest) -> RawResponse:
        """UpdateFileSystem."""
        p = req.params
        fid = str(p.get("FileSystemId"))
        with self.ctx.locked():
            fs = self.state.file_systems.get(fid)
            if fs is None:
                raise AwsError("FileSystemNotFound", f"File system '{fid}' does not exist.")
            if fs["Lifecycle"] != "AVAILABLE":
                raise bad_request(f"File system '{fid}' is {fs['Lifecycle']}.")
            if p.get("StorageCapacity") is not None:
                deployment = fs["LustreConfiguration"]["DeploymentType"]
                fs["StorageCapacity"] = _check_capacity(deployment, p["StorageCapacity"], fs["StorageType"])
            for key, value in (p.get("LustreConfiguration") or {}).items():
                fs["LustreConfiguration"][key] = value
            return json_response(req, {"FileSystem": _public(fs)})

    def _tagged(self, arn: str) -> dict[str, Any] | None:
        return next((fs for fs in self.state.file_systems.values() if fs["ResourceARN"] == arn), None)

    def tag(self, req: AwsRequest) -> RawResponse:
        """TagResource."""
        with self.ctx.locked():
            fs = self._tagged(str(req.params.get("ResourceARN")))
            if fs is None:
                raise PassThrough()
            new = {t["Key"]: t["Value"] for t in req.params.get("Tags") or []}
            fs["Tags"] = [t for t in fs["Tags"] if t["Key"] not in new] + [
                {"Key": k, "Value": v} for k, v in new.items()
            ]
        return json_response(req, {})

    def untag(self, req: AwsRequest) -> RawResponse:
        """UntagResource."""
        with self.ctx.locked():
            fs = self._tagged(str(req.params.get("ResourceARN")))
            if fs is None:
                raise PassThrough()
            keys = set(req.params.get("TagKeys") or [])
            fs["Tags"] = [t for t in fs["Tags"] if t["Key"] not in keys]
        return json_response(req, {})

    def list_tags(self, req: AwsRequest) -> RawResponse:
        """ListTagsForResource."""
        with self.ctx.locked():
            fs = self._tagged(str(req.params.get("ResourceARN")))
            if fs is None:
                raise PassThrough()
            return json_response(req, {"Tags": list(fs["Tags"])})


def register(ctx: AwsContext, state: FsxState) -> None:
    """Answer FSx Create/Describe/Delete/UpdateFileSystem and tags for Lustre file systems."""
    ops = FsxOps(ctx, state)
    for operation, handler in (
        ("CreateFileSystem", ops.create),
        ("DescribeFileSystems", ops.describe),
        ("DeleteFileSystem", ops.delete),
        ("UpdateFileSystem", ops.update),
        ("TagResource", ops.tag),
        ("UntagResource", ops.untag),
        ("ListTagsForResource", ops.list_tags),
    ):
        ctx.route(FSX, operation)(handler)
    ctx.on_reset(state.reset)


def _changed(ctx: AwsContext, fs: dict[str, Any]) -> None:
    """Tell the simulator (its FSx CSI node plugin) what a file system looks like now."""
    ctx.emit(CHANGED, file_system_id=fs["FileSystemId"], file_system=_public(fs))


def _public(fs: dict[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in fs.items() if not k.startswith("_")}
