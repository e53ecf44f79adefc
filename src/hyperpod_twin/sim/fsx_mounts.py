"""The FSx for Lustre CSI node plugin, simulated: a pod whose volume is an FSx CSI PV starts only when the
driver is registered, the file system exists, is AVAILABLE and matches the PV's dnsname and mountname, and its
security groups let the node in over Lustre (TCP 988, 1018-1023); otherwise it waits in ContainerCreating with
a FailedMount event, as a kubelet shows it (a blocked port makes the mount hang until the CSI call times out)."""

from __future__ import annotations

from typing import Any

from hyperpod_twin.sim import kobj
from hyperpod_twin.sim.addons import CSIDRIVERS
from hyperpod_twin.sim.kinds import PVCS, PVS
from hyperpod_twin.sim.kobj import Obj
from hyperpod_twin.sim.lustre_network import PENDING, LustreReachability

FSX_CSI = "fsx.csi.aws.com"
FILE_SYSTEMS = "fsx_file_systems"  # sim.extra key: file system id → the AWS side's public view (shared dict)
CONTENTS = "fsx_contents"  # sim.extra key: file system id → {path inside the file system: bytes} (shared dict)
RETRY_SECONDS = 10.0  # how often the kubelet retries a failed mount (twin seconds)


def fsx_volumes(sim: Any, pod: Obj) -> list[tuple[str, Obj]]:
    """(volume name, PV) of each of the pod's claims that is bound to an FSx CSI PV."""
    ns = pod["metadata"]["namespace"]
    found: list[tuple[str, Obj]] = []
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = (volume.get("persistentVolumeClaim") or {}).get("claimName")
        pvc = sim.get(PVCS, ns, claim) if claim else None
        pv_name = ((pvc or {}).get("spec") or {}).get("volumeName")
        pv = sim.get(PVS, "", pv_name) if pv_name else None
        if pv is not None and ((pv.get("spec") or {}).get("csi") or {}).get("driver") == FSX_CSI:
            found.append((str(volume.get("name")), pv))
    return found


def mount_problem(sim: Any, pod: Obj, node: Obj | None = None, reach: LustreReachability | None = None) -> Any:
    """Why the pod's FSx volumes cannot be mounted now (the FailedMount message), None when they can, or PENDING
    while the network path from `node` is being looked up (through `reach`)."""
    volumes = fsx_volumes(sim, pod)
    if not volumes:
        return None
    if sim.get(CSIDRIVERS, "", FSX_CSI) is None:
        pv = volumes[0][1]["metadata"]["name"]
        return (
            f'MountVolume.MountDevice failed for volume "{pv}" : kubernetes.io/csi: attacher.MountDevice failed to '
            f"create newCsiDriverClient: driver name {FSX_CSI} not found in the list of registered CSI drivers"
        )
    known: dict[str, Obj] = sim.extra.get(FILE_SYSTEMS) or {}
    for _, pv in volumes:
        csi = pv["spec"]["csi"]
        attrs = csi.get("volumeAttributes") or {}
        fs_id = str(csi.get("volumeHandle") or "")
        dns, mount = attrs.get("dnsname", ""), attrs.get("mountname", "")
        fs = known.get(fs_id)
        lustre = (fs or {}).get("LustreConfiguration") or {}
        if fs is None or fs.get("Lifecycle") != "AVAILABLE" or fs.get("DNSName") != dns or lustre.get(
            "MountName"
        ) != mount:
            return (
                f'MountVolume.SetUp failed for volume "{pv["metadata"]["name"]}" : rpc error: code = Internal desc = '
                f'Could not mount "{dns}@tcp:/{mount}" at "/var/lib/kubelet/pods/{pod["metadata"]["uid"]}/volumes/'
                f'kubernetes.io~csi/{pv["metadata"]["name"]}/mount": mount failed: exit status 5 '
                f"Output: mount.lustre: mount {dns}@tcp:/{mount} failed: Input/output error"
            )
        if reach is not None and node is not None and fs is not None:
            blocked = reach.blocked(fs, node)
            if blocked is PENDING:
                return PENDING
            if blocked:  # LNet cannot connect: mount.lustre hangs and the CSI NodePublishVolume call times out
                return (
                    f'MountVolume.SetUp failed for volume "{pv["metadata"]["name"]}" : rpc error: '
                    "code = DeadlineExceeded desc = context deadline exceeded"
                )
    return None


class FsxPath:
    """Where a path inside a container lands on Lustre: the file system's files, the path in it, read-only or not."""

    def __init__(self, files: dict[str, bytes], path: str, read_only: bool) -> None:
        self.files, self.path, self.read_only = files, path, read_only


def resolve(sim: Any, pod: Obj, container: Obj, path: str) -> FsxPath | None:
    """Map `path` in `container` of `pod` through volumeMount → claim → FSx CSI PV to the file system's contents
    (None when the path is not on an FSx mount)."""
    found = kobj.covering_mount(pod, container, path)
    pv = dict(fsx_volumes(sim, pod)).get(str(found[0].get("name"))) if found else None
    if found is None or pv is None:
        return None
    mount, volume, inside = found
    fs_id = str(pv["spec"]["csi"].get("volumeHandle") or "")
    contents: dict[str, dict[str, bytes]] = sim.extra.setdefault(CONTENTS, {})
    read_only = bool(mount.get("readOnly") or (volume.get("persistentVolumeClaim") or {}).get("readOnly"))
    return FsxPath(contents.setdefault(fs_id, {}), inside, read_only)
