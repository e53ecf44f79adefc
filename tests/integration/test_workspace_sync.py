"""`instantstart workspace sync` against a twin cluster (S3 in moto), through the CLI and the REST API only (the
laptop has no AWS credentials): dry run, round trip local→claim→local, deletions both ways, a conflict kept on
both sides, the watch loop, and refusals (a key outside the claim, a stale version, too large)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from instantstart.cli import sync_plan as sp
from instantstart.cli.main import build_app
from instantstart.cli.workspace import RemoteFiles, sync_once, watch
from instantstart.client import RestClient
from instantstart.client_config import ClientConfig
from instantstart.manifests import iam_policies as pol
from instantstart.settings import Settings
from instantstart.twin_process import TwinProcess
from instantstart.workspace_paths import MAX_FILE_BYTES
from tests.support.flows import make_eks
from tests.support.servers import Running
from tests.support.twin import twin_client
from tests.support.waits import wait_terminal

TAG = "ws1"
DATA = pol.data_prefix(TAG)


def sync(cp: Running, folder: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    """`instantstart workspace sync FOLDER -o json ...` in-process, real HTTP to the control plane."""
    settings = Settings(data_dir=cp.data_dir, server_url=cp.url)
    result = CliRunner().invoke(build_app(settings), ["workspace", "sync", str(folder), "-o", "json", *extra])
    text = result.stdout if result.stdout.strip() else result.stderr
    assert text.strip(), result
    return result.exit_code, json.loads(text) if text.lstrip().startswith("{") else {"text": text}


def actions(report: dict[str, Any]) -> dict[str, str]:
    return {a["path"]: a["action"] for a in report["actions"]}


def remote_keys(s3: Any, bucket: str) -> dict[str, bytes]:
    listed = s3.list_objects_v2(Bucket=bucket, Prefix=DATA).get("Contents") or []
    return {o["Key"][len(DATA) :]: s3.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listed}


def tool(cp: Running, name: str, args: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    with cp.client() as client:
        response = client.post(f"/api/v1/tools/{name}", json=args)
    return response.status_code, response.json()


def test_sync_round_trip_deletions_conflict_dry_run_and_refusals(cp: Running, twin: TwinProcess,
                                                                 tmp_path: Path) -> None:
    with cp.client() as client:
        make_eks(client, TAG)
        ref = client.post("/api/v1/storage/s3", json={}).json()
        assert wait_terminal(client, ref["operationId"], timeout=120)["status"] == "SUCCEEDED"
        bucket = client.get("/api/v1/storage/s3/defaults").json()["bucketName"]
    s3: Any = twin_client(twin, "s3")
    s3.put_object(Bucket=bucket, Key=f"lifecycle/{TAG}/keep.txt", Body=b"outside the claim")
    laptop, other = tmp_path / "laptop", tmp_path / "other"
    laptop.mkdir()
    other.mkdir()
    (laptop / "train.py").write_text("print('v1')\n")
    (laptop / "src").mkdir()
    (laptop / "src" / "util.py").write_text("X = 1\n")
    (laptop / ".git").mkdir()
    (laptop / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (laptop / sp.IGNORE_FILE).write_text("*.log\n")
    (laptop / "run.log").write_text("noise\n")

    # A dry run prints the plan and changes nothing on either side (no state file either).
    code, plan = sync(cp, laptop, "--dry-run")
    assert code == 0 and plan["dryRun"] and actions(plan) == {"src/util.py": "upload", "train.py": "upload"}
    assert remote_keys(s3, bucket) == {} and not (laptop / sp.STATE_FILE).exists()

    # Local → claim: ignored files (.git, *.log, the ignore file itself) stay local.
    code, done = sync(cp, laptop)
    assert code == 0 and actions(done) == actions(plan) and done["failed"] == []
    assert remote_keys(s3, bucket) == {"src/util.py": b"X = 1\n", "train.py": b"print('v1')\n"}
    assert (laptop / sp.STATE_FILE).is_file() and sync(cp, laptop)[1]["actions"] == []  # in step now

    # A change made on the cluster side (a pod writing under the mount) and a new file; claim → another folder.
    s3.put_object(Bucket=bucket, Key=f"{DATA}train.py", Body=b"print('v2')\n")
    s3.put_object(Bucket=bucket, Key=f"{DATA}out/metrics.json", Body=b"{}")
    code, down = sync(cp, other)
    assert code == 0 and set(actions(down).values()) == {"download"}
    assert (other / "train.py").read_text() == "print('v2')\n" and (other / "src" / "util.py").read_text() == "X = 1\n"
    assert actions(sync(cp, laptop)[1]) == {"out/metrics.json": "download", "train.py": "download"}
    assert (laptop / "train.py").read_text() == "print('v2')\n"

    # A deletion propagates: deleted on the laptop → deleted in the claim → deleted in the other folder.
    (laptop / "src" / "util.py").unlink()
    assert actions(sync(cp, laptop)[1]) == {"src/util.py": "delete-remote"}
    assert "src/util.py" not in remote_keys(s3, bucket)
    assert actions(sync(cp, other)[1]) == {"src/util.py": "delete-local"} and not (other / "src" / "util.py").exists()

    # Changed on both sides: the laptop's edit goes up first; the other folder keeps its own version and gets the
    # claim's as train.py.remote-<etag8>; nothing is lost, and nothing moves until the copy is deleted.
    (laptop / "train.py").write_text("print('laptop')\n")
    (other / "train.py").write_text("print('other')\n")
    assert actions(sync(cp, laptop)[1]) == {"train.py": "upload"}
    code, clash = sync(cp, other)
    assert code == 0 and actions(clash) == {"train.py": "conflict"}
    etag = s3.head_object(Bucket=bucket, Key=f"{DATA}train.py")["ETag"].strip('"')
    copy = other / sp.conflict_copy("train.py", etag)
    assert copy.read_text() == "print('laptop')\n" and (other / "train.py").read_text() == "print('other')\n"
    assert remote_keys(s3, bucket)["train.py"] == b"print('laptop')\n"
    assert actions(sync(cp, other)[1]) == {"train.py": "conflict-pending"}
    copy.unlink()  # resolved: the other folder's version wins
    assert actions(sync(cp, other)[1]) == {"train.py": "upload"}
    assert remote_keys(s3, bucket)["train.py"] == b"print('other')\n"

    # --watch: re-syncs when a local file changes (the loop driven by an injected sleep, a fixed number of polls).
    client = RestClient(ClientConfig.from_settings(Settings(data_dir=cp.data_dir)), cp.url)
    remote = RemoteFiles(client, "s3-claim", "")
    reports: list[dict[str, Any]] = []

    def edit(_: float) -> None:
        if len(reports) == 1:
            (laptop / "notes.md").write_text("# notes\n")

    runs = watch(laptop, lambda: reports.append(sync_once(laptop, remote).as_dict()), interval=0, sleep=edit,
                 iterations=2)
    assert runs == 2 and actions(reports[1]) == {"notes.md": "upload"}
    assert remote_keys(s3, bucket)["notes.md"] == b"# notes\n"

    # Refusals: a key outside the claim, a stale version, too large. Nothing written; the lifecycle key untouched.
    for bad in ("../../../lifecycle/ws1/on_create.sh", "/abs.txt", "a/../b", "dir/"):
        status, body = tool(cp, "workspace_write_file", {"path": bad, "contentBase64": "eA=="})
        assert status == 422 and body["error"]["code"] == "INVALID_INPUT", (bad, body)
        assert body["error"]["details"]["fields"][0]["field"] == "path"
    status, body = tool(cp, "workspace_list_files", {"prefix": "../"})
    assert status == 422 and body["error"]["details"]["fields"][0]["field"] == "prefix"
    status, body = tool(cp, "workspace_write_file", {"path": "notes.md", "contentBase64": "eA==", "ifMatch": "0" * 32})
    assert status == 409 and body["error"]["code"] == "CONFLICT"
    status, body = tool(cp, "workspace_write_file", {"path": "notes.md", "contentBase64": "eA=="})  # exists
    assert status == 409
    status, body = tool(cp, "workspace_delete_file", {"path": "notes.md", "ifMatch": "0" * 32})
    assert status == 409 and remote_keys(s3, bucket)["notes.md"] == b"# notes\n"
    big = base64.b64encode(b"x" * (MAX_FILE_BYTES + 1)).decode()
    status, body = tool(cp, "workspace_write_file", {"path": "big.bin", "contentBase64": big})
    assert status == 422 and body["error"]["details"]["fields"][0]["field"] == "contentBase64"
    status, body = tool(cp, "workspace_read_file", {"storage": "nope", "path": "x"})
    assert status == 404 and body["error"]["details"]["fields"][0]["field"] == "storage"
    assert s3.get_object(Bucket=bucket, Key=f"lifecycle/{TAG}/keep.txt")["Body"].read() == b"outside the claim"
    assert set(remote_keys(s3, bucket)) == {"train.py", "out/metrics.json", "notes.md"}

    # A remote file under a local symlinked folder is never written through it (it could lead out of the folder).
    outside = tmp_path / "outside"
    outside.mkdir()
    (laptop / "evil").symlink_to(outside)
    s3.put_object(Bucket=bucket, Key=f"{DATA}evil/sub/x.txt", Body=b"payload")
    code, report = sync(cp, laptop)
    assert code == 1 and [f["path"] for f in report["failed"]] == ["evil/sub/x.txt"] and list(outside.iterdir()) == []
