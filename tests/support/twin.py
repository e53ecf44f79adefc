"""The digital twin for tests: one twin process per session (per xdist worker), reset per test, and control planes
on it: `cp` per test, `shared_control_plane(...)` for a module that shares one costly cluster across its tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.twin_process import TwinProcess, start_twin
from tests.support.servers import SSL_CONTEXT, Running, thread_server

# Twin seconds per real second: EKS (600 twin s) comes up in about a second.
TWIN_CLOCK_SCALE = 500.0


@pytest.fixture(scope="session")
def twin_process() -> Iterator[TwinProcess]:
    """One twin for the session (reset between tests). Under xdist each worker is a session: its own twin."""
    twin = start_twin(clock_scale=TWIN_CLOCK_SCALE)
    try:
        yield twin
    finally:
        twin.stop()


def reset_twin(twin: TwinProcess) -> TwinProcess:
    """Empty the twin's account (every cluster, bucket, role and fault gone)."""
    response = httpx.post(twin.endpoint_url + "/_twin/reset", timeout=60, verify=SSL_CONTEXT)
    response.raise_for_status()
    return twin


@pytest.fixture
def twin(twin_process: TwinProcess) -> TwinProcess:
    """A clean twin account."""
    return reset_twin(twin_process)


@contextmanager
def control_plane(
    twin: TwinProcess, tmp: Path, monkeypatch: pytest.MonkeyPatch, **settings: Any
) -> Iterator[Running]:
    """The control plane (in a thread, on SQLite under `tmp`) using the twin as its AWS account.

    `monkeypatch` points this process's AWS environment at the twin (undone when its owner ends); `settings`
    override the test defaults (poll_seconds=0.2, status_cache_seconds=1.0, the twin's chart repository and hub)."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("INSTANTSTART_AWS_ENDPOINT_URL", twin.endpoint_url)
    options: dict[str, Any] = {
        "aws_endpoint_url": twin.endpoint_url,
        "aws_region": twin.env["AWS_REGION"],
        "poll_seconds": 0.2,
        "status_cache_seconds": 1.0,
        "helm_repository_url": twin.info.get("chart_repo_url"),
        "hf_endpoint": twin.info.get("hub_url"),  # the twin's hub stand-in: tests never reach huggingface.co
        **settings,
    }
    with thread_server(tmp / "data", f"sqlite:///{tmp / 'state.db'}", **options) as running:
        yield running


@pytest.fixture
def cp(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """The control plane (in a thread, on SQLite) using the twin as its AWS account."""
    with control_plane(twin, tmp_path, monkeypatch) as running:
        yield running


def control_plane_env(twin: TwinProcess) -> dict[str, str]:
    """The environment of an `instantstart serve` child process on the twin (process_server's extra_env)."""
    return {
        **twin.env,
        "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url,
        "INSTANTSTART_HELM_REPOSITORY_URL": str(twin.info.get("chart_repo_url")),
        "INSTANTSTART_HF_ENDPOINT": str(twin.info.get("hub_url")),
        "INSTANTSTART_POLL_SECONDS": "0.2",
        "INSTANTSTART_STATUS_CACHE_SECONDS": "1",
        "INSTANTSTART_LOG_LEVEL": "INFO",
    }


def shared_control_plane(
    prepare: Callable[[httpx.Client], None] | None = None, **settings: Any
) -> Callable[..., Iterator[Running]]:
    """A module-scoped fixture: one control plane on a freshly reset twin for every test of the module.

    `prepare(client)` builds the costly shared state once (a HyperPod cluster, dependencies); `settings` as for
    `control_plane`. Assign the result to a module-level name, which becomes the fixture's name:
    `shared_cp = shared_control_plane(lambda client: make_hyperpod(client, TAG))`. Tests that use it must not
    also use `twin` or `cp` (those reset the twin under the shared cluster)."""

    @pytest.fixture(scope="module")
    def fixture(twin_process: TwinProcess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
        reset_twin(twin_process)
        tmp = tmp_path_factory.mktemp("shared-cp")
        with pytest.MonkeyPatch.context() as monkeypatch, control_plane(
            twin_process, tmp, monkeypatch, **settings
        ) as running:
            if prepare is not None:
                with running.client() as client:
                    prepare(client)
            yield running

    return fixture


def twin_client(twin: TwinProcess, service: str) -> Any:
    """A boto3 client on the twin, for assertions about what the control plane created."""
    import boto3

    return boto3.client(
        service,
        endpoint_url=twin.endpoint_url,
        region_name=twin.env["AWS_REGION"],
        aws_access_key_id=twin.env["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=twin.env["AWS_SECRET_ACCESS_KEY"],
    )
