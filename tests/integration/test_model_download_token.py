"""The Hugging Face token of a model download on the twin: its Kubernetes Secret never outlives the download,
however the download ends (refused after the Secret was written, the Job failing, the stage failing before the
Job, a cancel, an orphan of a crash; a retry without it says so), and a token that equals ordinary text
("us-west-2") is refused for its own call without poisoning later writes (a cluster create in us-west-2 then
succeeds)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from hyperpod_twin.sim.hf_hub import GATED_TOKEN
from instantstart import logs
from instantstart.manifests import model_download as md
from instantstart.store.models import utcnow
from instantstart.twin_process import TwinProcess
from tests.support.flows import hand_made_s3_claim, kube, make_hyperpod, mcp_calls, mcp_raw, mcp_wait
from tests.support.servers import Running
from tests.support.twin import control_plane, twin_client
from tests.support.waits import wait_terminal

TAG = "tok1"
SELECTOR = f"{md.LABEL_TOKEN}=true"
GHOST_BUCKET = "tok1-no-such-bucket"


# The control plane cannot reach the hub its Jobs fetch from (only the cluster's nodes can), so its look-up before
# the Job gives no verdict: the refusals and failures below happen where this test looks for them (after the token
# Secret is written, and in the Job), not in the look-up.
UNREACHABLE_HUB = "http://hf-mirror.invalid:8080"


@pytest.fixture
def cp(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """This module's control plane: the twin's account, a hub it cannot reach."""
    with control_plane(twin, tmp_path, monkeypatch, hf_endpoint=UNREACHABLE_HUB) as running:
        yield running


def token_secrets(core: k8s.CoreV1Api) -> list[str]:
    """The model download token Secrets in the default namespace."""
    return sorted(s.metadata.name for s in core.list_namespaced_secret("default", label_selector=SELECTOR).items)


def until(check: Any, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def remove_job(core: k8s.CoreV1Api, name: str) -> None:
    """Delete a download Job and wait until it is gone (the next download of that model makes a new one)."""
    batch = k8s.BatchV1Api(core.api_client)
    batch.delete_namespaced_job(name, "default", propagation_policy="Foreground", _preload_content=False)
    until(lambda: name not in [j.metadata.name for j in batch.list_namespaced_job("default").items], "job gone")


def orphan(core: k8s.CoreV1Api, name: str, orphan_after: str) -> None:
    """A token Secret as a crash between writing it and recording its operation leaves it."""
    core.create_namespaced_secret("default", md.token_secret(name, "default", "dG9rZW4=", orphan_after))


def test_the_token_secret_never_outlives_its_download(
    cp: Running, twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The log registry is process-wide and the control plane runs in this process: "us-west-2" registered here
    # must not redact later tests' log lines.
    monkeypatch.setattr(logs, "_SECRETS", dict(logs._SECRETS))
    with cp.client() as client:
        make_hyperpod(client, TAG)
    core = kube(twin, tmp_path, TAG)
    ref = mcp_calls(cp, [("s3_storage_create", {})])[0]
    assert mcp_wait(cp, ref["operationId"])["status"] == "SUCCEEDED"

    # Orphans of a crash: one past its time goes with the next download, one still within it stays.
    orphan(core, "model-dl-old-token-aaaaaa", "2000-01-01T00:00:00+00:00")
    orphan(core, "model-dl-new-token-bbbbbb", "2999-01-01T00:00:00+00:00")

    # A token equal to ordinary text of its own call (the cluster's Region) is refused naming hfToken, after its
    # Secret was written: the Secret goes with the refusal.
    refused = mcp_raw(cp, [("model_download_enhanced", {"modelId": "twin-org/tiny-llama", "hfToken": "us-west-2"})])[0]
    assert refused["isError"], refused
    error = refused["payload"]["error"]
    assert error["code"] == "INVALID_INPUT" and "hfToken" in error["message"], error
    assert token_secrets(core) == ["model-dl-new-token-bbbbbb"]
    # The Job fails (a wrong token for the gated repo): the Secret goes with the failed download.
    wrong = mcp_calls(cp, [("model_download_enhanced", {"modelId": "twin-org/gated-llama",
                                                         "hfToken": "hf_notTheRightToken000"})])[0]
    failed = mcp_wait(cp, wrong["operationId"])
    assert failed["status"] == "FAILED" and "failed" in failed["error"]["message"], failed
    assert failed["params"]["tokenSecretName"] and token_secrets(core) == ["model-dl-new-token-bbbbbb"]
    remove_job(core, failed["params"]["jobName"])

    # The stage fails before its Job: the claim's bucket is gone (a claim made by hand on a bucket that does not
    # exist), so the manifest cannot be read; the Secret goes when the stage has failed for good.
    hand_made_s3_claim(core, "ghost", GHOST_BUCKET)
    denied = mcp_calls(cp, [("model_download_enhanced", {"modelId": "twin-org/tiny-llama", "s3Storage": "ghost",
                                                          "hfToken": GATED_TOKEN})])[0]
    stopped = mcp_wait(cp, denied["operationId"])
    assert stopped["status"] == "FAILED", stopped
    assert token_secrets(core) == ["model-dl-new-token-bbbbbb"]
    s3: Any = twin_client(twin, "s3")
    s3.create_bucket(Bucket=GHOST_BUCKET, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    # A retry of that operation cannot reach the token any more: it says so instead of starting a Job that
    # could never read it.
    retried = mcp_calls(cp, [("operation_retry", {"operationId": denied["operationId"]})])[0]
    again = mcp_wait(cp, retried["operationId"])
    assert again["status"] == "FAILED" and "Call model_download_enhanced again with hfToken" in str(again["error"])
    assert not k8s.BatchV1Api(core.api_client).list_namespaced_job("default").items

    # A cancel while the Job runs (a slow repo): the Secret goes with the cancelled download.
    slow = mcp_calls(cp, [("model_download_enhanced", {"modelId": "twin-org/slow-llama", "hfToken": GATED_TOKEN})])[0]
    until(lambda: any(p.status.phase == "Running" for p in core.list_namespaced_pod(
        "default", label_selector=f"{md.LABEL_COMPONENT}={md.COMPONENT}").items), "the slow download running")
    assert len(token_secrets(core)) == 2  # its own, beside the orphan still within its time
    mcp_calls(cp, [("operation_cancel", {"operationId": slow["operationId"]})])
    assert mcp_wait(cp, slow["operationId"])["status"] == "CANCELLED"
    assert token_secrets(core) == ["model-dl-new-token-bbbbbb"]
    assert utcnow().year < 2999  # the kept orphan's time really is ahead

    # The refused token poisons nothing else (the downloads above recorded their operations): a cluster create
    # in us-west-2 (its params, outputs and ARNs hold the Region) succeeds and keeps the Region readable.
    with cp.client() as client:
        made = client.post("/api/v1/clusters/eks", json={"clusterTag": "tok2"})
        assert made.status_code == 202, made.text
        view = wait_terminal(client, made.json()["operationId"], timeout=120)
        assert view["status"] == "SUCCEEDED", view
        assert view["params"]["region"] == "us-west-2" and "***" not in str(view)
