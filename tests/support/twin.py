"""The digital twin for tests: one twin process per session, reset per test, and a control plane on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from instantstart.twin_process import TwinProcess, start_twin
from tests.support.servers import Running, thread_server

# Twin seconds per real second: EKS (600 twin s) comes up in about a second.
TWIN_CLOCK_SCALE = 500.0


@pytest.fixture(scope="session")
def twin_process() -> Iterator[TwinProcess]:
    """One twin for the session (reset between tests)."""
    twin = start_twin(clock_scale=TWIN_CLOCK_SCALE)
    try:
        yield twin
    finally:
        twin.stop()


@pytest.fixture
def twin(twin_process: TwinProcess) -> TwinProcess:
    """A clean twin account."""
    response = httpx.post(twin_process.endpoint_url + "/_twin/reset", timeout=60)
    response.raise_for_status()
    return twin_process


@pytest.fixture
def cp(twin: TwinProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    """The control plane (in a thread, on SQLite) using the twin as its AWS account."""
    for key, value in twin.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("INSTANTSTART_AWS_ENDPOINT_URL", twin.endpoint_url)
    with thread_server(
        tmp_path / "data",
        f"sqlite:///{tmp_path / 'state.db'}",
        aws_endpoint_url=twin.endpoint_url,
        aws_region=twin.env["AWS_REGION"],
        poll_seconds=0.2,
        status_cache_seconds=1.0,
        helm_repository_url=twin.info.get("chart_repo_url"),
    ) as running:
        yield running


def control_plane_env(twin: TwinProcess) -> dict[str, str]:
    """The environment of an `instantstart serve` child process on the twin (process_server's extra_env)."""
    return {
        **twin.env,
        "INSTANTSTART_AWS_ENDPOINT_URL": twin.endpoint_url,
        "INSTANTSTART_HELM_REPOSITORY_URL": str(twin.info.get("chart_repo_url")),
        "INSTANTSTART_POLL_SECONDS": "0.2",
        "INSTANTSTART_STATUS_CACHE_SECONDS": "1",
        "INSTANTSTART_LOG_LEVEL": "INFO",
    }


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
