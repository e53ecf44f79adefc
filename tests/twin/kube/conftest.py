"""Fixtures for the twin's Kubernetes API server: a standalone cluster, its clients, kubectl and helm."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperpod_twin.kube.charts import ChartRepository
from tests.support.twin_kube import HELM, Cluster, standalone_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """One standalone cluster per module (tests use their own namespaces). Per module, not per session: its EKS
    token is signed once and expires like a real one (15 minutes), and with pytest-xdist a session's modules are
    spread over the whole run."""
    with standalone_cluster(tmp_path_factory.mktemp("kube")) as running:
        yield running


@pytest.fixture(scope="session")
def chart_repo() -> Iterator[ChartRepository]:
    """The twin's local chart repository."""
    repo = ChartRepository()
    repo.start()
    try:
        yield repo
    finally:
        repo.stop()


@pytest.fixture(scope="session")
def helm_binary() -> Path:
    """helm as `make .tools/bin/helm` installs it (scripts/install_helm.py)."""
    if not HELM.is_file():
        raise AssertionError(f"{HELM} is missing: run `.venv/bin/python scripts/install_helm.py` (make does)")
    return HELM
