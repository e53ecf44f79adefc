"""The catalog index the CLI and `instantstart mcp` start from: fresh, used only when fresh, and enough for them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from instantstart import catalog_index
from instantstart.catalog_index import INDEX_FILE, REGENERATE, cached, source_fingerprint
from instantstart.client_config import ClientConfig
from instantstart.settings import Settings

REPO = Path(__file__).resolve().parents[2]
SRC = str(REPO / "src")
# What a command that only talks to the server must never import (each costs a CLI start 0.1-1 s).
HEAVY = ("boto3", "botocore", "kubernetes", "fastapi", "starlette", "sqlalchemy", "alembic", "instantstart.services",
         "instantstart.catalog", "instantstart.settings")


def test_the_shipped_index_is_the_live_catalogs() -> None:
    # A fresh interpreter: this one may hold the test plugins' operations.
    check = subprocess.run([sys.executable, "-m", "instantstart.catalog_index", "--check"], capture_output=True,
                           text=True, timeout=120, env={"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin"})
    assert check.returncode == 0, (
        f"src/instantstart/data/catalog_index.json is stale (an operation, a model or a source changed): run "
        f"`{REGENERATE}` (PYTHONPATH=src) and commit it. {check.stdout}{check.stderr}"
    )


def test_the_index_is_used_only_while_it_matches_the_sources(tmp_path: Path) -> None:
    shipped = json.loads(INDEX_FILE.read_text())
    good = tmp_path / "good.json"
    good.write_text(json.dumps(shipped))
    if shipped["fingerprint"] == source_fingerprint():  # stale: the test above says how to regenerate
        assert cached(good) == shipped
    for name, change in {"stale": {"fingerprint": "0" * 64}, "old": {"format": 0}}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({**shipped, **change}))
        assert cached(path) is None, name
    (tmp_path / "broken.json").write_text("{")
    assert cached(tmp_path / "broken.json") is None
    assert cached(tmp_path / "missing.json") is None


def test_the_fingerprint_follows_the_sources_but_not_the_faces(tmp_path: Path) -> None:
    package = tmp_path / "instantstart"
    for part in ("services/base/registry.py", "catalog/registry.py", "cli/main.py", "mcp/stdio.py", "api/app.py"):
        (package / part).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "src" / "instantstart" / part, package / part)
    before = source_fingerprint(package)
    (package / "cli" / "main.py").write_text("# a face changed\n")
    (package / "api" / "app.py").write_text("# a face changed\n")
    assert source_fingerprint(package) == before
    (package / "services" / "base" / "registry.py").write_text("# an operation changed\n")
    changed = source_fingerprint(package)
    assert changed != before
    (package / "services" / "new.py").write_text("")
    assert source_fingerprint(package) != changed


def test_plugins_get_the_live_catalog() -> None:
    index = catalog_index.load(["tests.support.probe_ops"])
    names = {entry["name"] for entry in index["operations"]}
    assert "probe_run" in names and "cluster_list_all" in names
    assert index["groups"]["probe"]


def heavy(modules: set[str]) -> set[str]:
    """The HEAVY modules (and their submodules) among `modules`."""
    return {m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)}


def imported(*args: str, stdin: str = "") -> set[str]:
    """The modules `instantstart ARGS` imports (from -X importtime), the shipped index being fresh."""
    env = {"PYTHONPATH": SRC, "PATH": "/usr/bin:/bin", "INSTANTSTART_SERVER_URL": "http://127.0.0.1:9",
           "INSTANTSTART_DATA_DIR": "/nonexistent", "HOME": "/nonexistent"}
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "instantstart.cli.main", *args], input=stdin,
                         capture_output=True, text=True, timeout=120, env=env)
    return {line.split("|")[-1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize(
    "args",
    [("--help",), ("cluster", "--help"), ("cluster", "list-all", "-o", "json"), ("token-file",)],
    ids=["help", "group-help", "client-call", "token-file"],
)
def test_client_commands_import_neither_aws_kubernetes_the_web_stack_nor_the_catalog(args: tuple[str, ...]) -> None:
    if json.loads(INDEX_FILE.read_text())["fingerprint"] != source_fingerprint():
        pytest.fail(f"the catalog index is stale, so every command imports the catalog: run `{REGENERATE}`")
    modules = imported(*args)
    assert "instantstart.cli.commands" in modules
    assert not heavy(modules)


def test_the_stdio_mcp_server_lists_its_tools_without_the_catalog() -> None:
    if json.loads(INDEX_FILE.read_text())["fingerprint"] != source_fingerprint():
        pytest.fail(f"the catalog index is stale, so `instantstart mcp` imports the catalog: run `{REGENERATE}`")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ]
    modules = imported("mcp", stdin="".join(json.dumps(m) + "\n" for m in messages))
    assert "instantstart.mcp.stdio" in modules
    # Nor the MCP SDK (nor anyio, which it runs on): the proxy speaks the protocol with the standard library.
    assert not heavy(modules) and not {m for m in modules if m.split(".")[0] in ("mcp", "mcp_types", "anyio")}


ENVIRONMENTS = [
    {},
    {"INSTANTSTART_SERVER_URL": "https://cp.example.com:8443/", "INSTANTSTART_API_TOKEN": "tok-123"},
    {"INSTANTSTART_HOST": "0.0.0.0", "INSTANTSTART_PORT": "4000", "INSTANTSTART_TLS_CERT_FILE": "/c.pem",
     "INSTANTSTART_TLS_KEY_FILE": "/k.pem"},
    {"instantstart_host": "10.0.0.5", "INSTANTSTART_PLUGINS": '["tests.support.probe_ops"]'},
]


@pytest.mark.parametrize("env", ENVIRONMENTS)
def test_the_client_reads_the_environment_as_the_settings_do(
    env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("INSTANTSTART_DATA_DIR", str(tmp_path))
    (tmp_path / "api-token").write_text("stored-token\n")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert ClientConfig.from_env() == ClientConfig.from_settings(Settings())


def test_a_bad_port_is_refused_naming_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSTANTSTART_PORT", "99999")
    with pytest.raises(ValueError, match="INSTANTSTART_PORT must be a port number from 1 to 65535"):
        ClientConfig.from_env()
