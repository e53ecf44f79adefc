"""The helm adapter: argument lists only, a temporary 0600 kubeconfig per call, JSON output parsed."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from instantstart.errors import PreconditionFailed, ProviderError

# Release names and namespaces are DNS-1123 labels (helm limits release names to 53 characters).
_RELEASE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,51}[a-z0-9])?$")
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_CHART_RE = re.compile(r"^[a-z0-9]([-a-z0-9_.]{0,100}[a-z0-9])?$")
_VERSION_RE = re.compile(r"^v?[0-9A-Za-z.+-]{1,64}$")
_REPO_RE = re.compile(r"^(https?|oci)://[^\s'\"`;|&$<>\\]+$")
_SECRET_RE = re.compile(r"(k8s-aws-v1\.[A-Za-z0-9_-]+|Bearer\s+\S+)")


class HelmError(ProviderError):
    """helm exited non-zero; `stderr` is its (redacted) explanation."""

    retryable = False

    def __init__(self, message: str, *, stderr: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint, details={"stderr": stderr[-2000:]} if stderr else None)
        self.stderr = stderr


@dataclass(frozen=True)
class Connection:
    """Where the Kubernetes API server is and how to authenticate (the token is never logged)."""

    endpoint: str
    token: str
    ca_path: str | None

    def __repr__(self) -> str:
        return f"Connection(endpoint={self.endpoint!r})"


def _check(value: str, pattern: re.Pattern[str], what: str) -> str:
    if not pattern.match(value):
        raise PreconditionFailed(f"{what} {value!r} is not a valid name for helm.", hint="Correct the catalog entry.")
    return value


def redact(text: str) -> str:
    """Remove token-shaped values from helm output before it is shown or stored."""
    return _SECRET_RE.sub("<redacted>", text)


@contextmanager
def kubeconfig(conn: Connection) -> Iterator[str]:
    """A kubeconfig file (mode 0600) carrying the endpoint, CA and token; deleted when the block ends."""
    cluster: dict[str, Any] = {"server": conn.endpoint}
    if conn.ca_path:
        cluster["certificate-authority"] = conn.ca_path
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "target", "cluster": cluster}],
        "users": [{"name": "instantstart", "user": {"token": conn.token}}],
        "contexts": [{"name": "target", "context": {"cluster": "target", "user": "instantstart"}}],
        "current-context": "target",
    }
    fd, path = tempfile.mkstemp(prefix="instantstart-kubeconfig-", suffix=".yaml")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as handle:
            yaml.safe_dump(document, handle)
        yield path
    finally:
        with suppress(FileNotFoundError):
            os.unlink(path)


def list_entry(release: dict[str, Any]) -> dict[str, Any] | None:
    """A release as `helm upgrade -o json` prints it (name, namespace, version, info.status, chart.metadata), in
    the form of a `helm list -o json` entry (revision, status, chart "<name>-<version>", app_version); None when a
    field is missing (then ask `helm list`)."""
    info = release.get("info") or {}
    meta = (release.get("chart") or {}).get("metadata") or {}
    if not (release.get("name") and release.get("version") and info.get("status") and meta.get("name")
            and meta.get("version")):
        return None
    return {
        "name": release["name"],
        "namespace": release.get("namespace"),
        "revision": str(release["version"]),
        "status": info["status"],
        "chart": f"{meta['name']}-{meta['version']}",
        "app_version": meta.get("appVersion", ""),
    }


class Helm:
    """Runs helm with an argument list against one cluster connection (blocking; call from a worker thread)."""

    def __init__(self, binary: str, home: Path, conn: Connection) -> None:
        self.binary = binary
        self.home = home
        self.conn = conn

    def _env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "SSL_CERT_FILE")}
        for name in ("CACHE", "CONFIG", "DATA"):
            folder = self.home / name.lower()
            folder.mkdir(parents=True, exist_ok=True)
            env[f"HELM_{name}_HOME"] = str(folder)
        return env

    def run(self, args: list[str], *, timeout: float = 600.0) -> str:
        """Run `helm <args> --kubeconfig <temp file>`; stdout, or HelmError with the redacted stderr."""
        with kubeconfig(self.conn) as path:
            argv = [self.binary, *args, "--kubeconfig", path]
            try:
                done = subprocess.run(
                    argv, capture_output=True, text=True, timeout=timeout, env=self._env(), check=False
                )
            except FileNotFoundError:
                raise PreconditionFailed(
                    f"helm is not installed at {self.binary}.",
                    hint="Unset INSTANTSTART_HELM_PATH to use the bundled helm, or point it at a helm binary.",
                ) from None
            except subprocess.TimeoutExpired:
                raise HelmError(f"helm {args[0]} did not finish within {timeout:.0f}s.") from None
        if done.returncode != 0:
            stderr = redact(done.stderr.strip())
            last = stderr.splitlines()[-1] if stderr else f"exit status {done.returncode}"
            raise HelmError(f"helm {args[0]} failed: {last}", stderr=stderr)
        return done.stdout

    def upgrade_install(
        self,
        *,
        release: str,
        chart: str,
        namespace: str,
        version: str | None,
        repo: str | None,
        values: dict[str, Any],
        timeout_seconds: int = 600,
        wait: bool = True,
    ) -> dict[str, Any]:
        """`helm upgrade --install` with the values in a temporary file; the release as helm reports it."""
        args = [
            "upgrade",
            "--install",
            _check(release, _RELEASE_RE, "release"),
            _check(chart, _CHART_RE, "chart"),
            "--namespace",
            _check(namespace, _LABEL_RE, "namespace"),
            "--create-namespace",
            "--output",
            "json",
        ]
        if version:
            args += ["--version", _check(version, _VERSION_RE, "chart version")]
        if repo:
            args += ["--repo", _check(repo, _REPO_RE, "chart repository")]
        if wait:
            args += ["--wait", "--timeout", f"{int(timeout_seconds)}s"]
        fd, values_path = tempfile.mkstemp(prefix="instantstart-values-", suffix=".yaml")
        try:
            with os.fdopen(fd, "w") as handle:
                yaml.safe_dump(values or {}, handle)
            out = self.run([*args, "--values", values_path], timeout=timeout_seconds + 60)
        finally:
            os.unlink(values_path)
        parsed: dict[str, Any] = json.loads(out) if out.strip() else {}
        return parsed

    def list_releases(self, namespace: str) -> list[dict[str, Any]]:
        """`helm list --all -o json` in one namespace."""
        out = self.run(["list", "--all", "--namespace", _check(namespace, _LABEL_RE, "namespace"), "-o", "json"])
        releases: list[dict[str, Any]] = json.loads(out) if out.strip() else []
        return releases

    def release(self, release: str, namespace: str) -> dict[str, Any] | None:
        """The release's list entry (name, revision, status, chart, app_version), or None when absent."""
        for item in self.list_releases(namespace):
            if item.get("name") == release:
                return item
        return None

    def status(self, release: str, namespace: str) -> dict[str, Any] | None:
        """`helm status -o json`, or None when the release does not exist."""
        try:
            out = self.run(
                ["status", _check(release, _RELEASE_RE, "release"), "--namespace", namespace, "-o", "json"]
            )
        except HelmError as exc:
            if "not found" in exc.stderr:
                return None
            raise
        parsed: dict[str, Any] = json.loads(out)
        return parsed

    def show_chart(self, chart: str, version: str | None, repo: str | None) -> dict[str, Any]:
        """`helm show chart`: the chart's Chart.yaml (name, version, kubeVersion …) from its repository."""
        args = ["show", "chart", _check(chart, _CHART_RE, "chart")]
        if version:
            args += ["--version", _check(version, _VERSION_RE, "chart version")]
        if repo:
            args += ["--repo", _check(repo, _REPO_RE, "chart repository")]
        parsed = yaml.safe_load(self.run(args))
        return parsed if isinstance(parsed, dict) else {}

    def user_values(self, release: str, namespace: str) -> dict[str, Any]:
        """The values the release was installed with (`helm get values -o json`)."""
        out = self.run(
            ["get", "values", _check(release, _RELEASE_RE, "release"), "--namespace", namespace, "-o", "json"]
        )
        parsed = json.loads(out) if out.strip() else None
        return parsed if isinstance(parsed, dict) else {}

    def history(self, release: str, namespace: str) -> list[dict[str, Any]]:
        """`helm history -o json` (revisions oldest first)."""
        out = self.run(
            ["history", _check(release, _RELEASE_RE, "release"), "--namespace", namespace, "-o", "json"]
        )
        items: list[dict[str, Any]] = json.loads(out) if out.strip() else []
        return items

    def rollback(self, release: str, namespace: str) -> None:
        """`helm rollback` to the previous revision (clears a release stuck in pending-upgrade)."""
        self.run(["rollback", _check(release, _RELEASE_RE, "release"), "--namespace", namespace])

    def uninstall(self, release: str, namespace: str) -> bool:
        """`helm uninstall`; False when the release was already gone."""
        try:
            self.run(["uninstall", _check(release, _RELEASE_RE, "release"), "--namespace", namespace, "--wait"])
        except HelmError as exc:
            if "not found" in exc.stderr:
                return False
            raise
        return True
