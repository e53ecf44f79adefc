"""The twin's local Helm chart repository: package the stand-in charts and serve index.yaml + .tgz."""

from __future__ import annotations

import gzip
import hashlib
import io
import tarfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from hyperpod_twin.kube.http import HttpServer, Request, Response

CHARTS_DIR = Path(__file__).resolve().parent.parent / "charts"
# A fixed timestamp keeps packages byte-identical across starts, so their digests never change.
EPOCH = datetime(2025, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class PackagedChart:
    """One chart archive as `helm package` lays it out."""

    name: str
    version: str
    app_version: str
    description: str
    api_version: str
    data: bytes

    @property
    def filename(self) -> str:
        """`<name>-<version>.tgz`."""
        return f"{self.name}-{self.version}.tgz"

    @property
    def digest(self) -> str:
        """sha256 of the archive (index.yaml `digest`)."""
        return hashlib.sha256(self.data).hexdigest()


def package_chart(source: Path) -> PackagedChart:
    """A gzipped tar of the chart directory with entries under `<name>/`, like `helm package`."""
    meta: dict[str, Any] = yaml.safe_load((source / "Chart.yaml").read_text())
    name, version = str(meta["name"]), str(meta["version"])
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            info = tarfile.TarInfo(f"{name}/{path.relative_to(source).as_posix()}")
            content = path.read_bytes()
            info.size = len(content)
            info.mode = 0o644
            info.mtime = int(EPOCH.timestamp())
            tar.addfile(info, io.BytesIO(content))
    compressed = gzip.compress(raw.getvalue(), mtime=int(EPOCH.timestamp()))
    return PackagedChart(
        name=name,
        version=version,
        app_version=str(meta.get("appVersion", "")),
        description=str(meta.get("description", "")),
        api_version=str(meta.get("apiVersion", "v2")),
        data=compressed,
    )


def package_all(charts_dir: Path = CHARTS_DIR) -> list[PackagedChart]:
    """Every chart under `charts_dir` (directories holding a Chart.yaml)."""
    return [package_chart(d) for d in sorted(charts_dir.iterdir()) if (d / "Chart.yaml").is_file()]


def index_yaml(charts: list[PackagedChart]) -> bytes:
    """The repository index helm reads (`helm repo add`, `--repo`)."""
    created = EPOCH.strftime("%Y-%m-%dT%H:%M:%SZ")
    entries: dict[str, list[dict[str, Any]]] = {}
    for chart in charts:
        entries.setdefault(chart.name, []).append(
            {
                "apiVersion": chart.api_version,
                "name": chart.name,
                "version": chart.version,
                "appVersion": chart.app_version,
                "description": chart.description,
                "type": "application",
                "created": created,
                "digest": chart.digest,
                "urls": [chart.filename],
            }
        )
    return yaml.safe_dump({"apiVersion": "v1", "entries": entries, "generated": created}, sort_keys=True).encode()


class ChartRepository:
    """An HTTP chart repository on loopback serving the packaged stand-in charts."""

    def __init__(self, charts_dir: Path = CHARTS_DIR, host: str = "127.0.0.1", port: int = 0) -> None:
        self.charts = package_all(charts_dir)
        self._files = {"/" + c.filename: c.data for c in self.charts}
        self._index = index_yaml(self.charts)
        self._http = HttpServer(self._handle, host, port, name="twin-chart-repo")

    @property
    def url(self) -> str:
        """Base URL to give helm (`--repo`, `helm repo add`)."""
        return f"http://{self._http.host}:{self._http.port}"

    def start(self) -> None:
        """Serve."""
        self._http.start()

    def stop(self) -> None:
        """Stop serving."""
        self._http.stop()

    def _handle(self, request: Request) -> Response:
        if request.method not in ("GET", "HEAD"):
            return Response(405, b"method not allowed\n", "text/plain")
        if request.path in ("/index.yaml", "/"):
            return Response(200, self._index, "application/x-yaml")
        data = self._files.get(request.path)
        if data is None:
            return Response(404, b"not found\n", "text/plain")
        return Response(200, data, "application/gzip")
