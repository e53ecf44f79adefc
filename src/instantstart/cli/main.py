"""The `instantstart` command: serve, mcp, token-file, and the generated operation commands."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Container
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from instantstart import catalog_index
from instantstart.cli.commands import add_catalog_commands
from instantstart.cli.db import db_app, refuse_newer_schema
from instantstart.cli.workspace import add_sync_command
from instantstart.client_config import TOKEN_FILE, ClientConfig

if TYPE_CHECKING:
    from instantstart.settings import Settings


def build_app(settings: Settings | None = None, argv: list[str] | None = None) -> typer.Typer:
    """The whole CLI for `settings` (None: the environment's): static commands plus one command per catalog
    operation, from the catalog index (the commands that call the server import neither the catalog nor the
    settings model, only what they use). With the command line `argv`, only the command group it names gets
    its commands built (the others are listed with their help)."""

    def full_settings() -> Settings:
        from instantstart.settings import Settings

        return settings if settings is not None else Settings()

    @functools.cache
    def client_config() -> ClientConfig:
        return ClientConfig.from_settings(settings) if settings is not None else ClientConfig.from_env()

    app = typer.Typer(help="InstantStart: HyperPod on EKS control plane.", no_args_is_help=True, add_completion=False)
    _add_run_commands(app, full_settings, client_config)
    _add_setup_commands(app, full_settings, client_config)
    index = catalog_index.load(client_config().plugins)
    add_catalog_commands(app, index, client_config, None if argv is None else named_group(argv, index["groups"]))
    add_sync_command(app, client_config)
    app.add_typer(db_app(full_settings), name="db")
    return app


def _add_run_commands(app: typer.Typer, full_settings: Callable[[], Settings],
                      client_config: Callable[[], ClientConfig]) -> None:
    """`serve` (the control plane) and `mcp` (the stdio MCP proxy to a running one)."""

    @app.command()
    def serve(
        host: str | None = typer.Option(None, help="Bind address (default 127.0.0.1)."),
        port: int | None = typer.Option(None, help="Port (default 3099)."),
        twin: bool = typer.Option(False, "--twin", help="Start the digital twin and use it as AWS."),
        twin_port: int = typer.Option(0, help="With --twin: the twin's port (0 picks a free one)."),
        twin_clock_scale: float | None = typer.Option(
            None, help="With --twin: twin seconds per real second (default: the twin's, 40)."
        ),
    ) -> None:
        """Run the control plane: REST under /api/v1, MCP at /mcp, web UI at /."""
        from instantstart.auth import InsecureFileMode
        from instantstart.server import TwinOptions, run_server

        refuse_newer_schema(full_settings())
        try:
            run_server(
                full_settings(), host=host, port=port, twin=TwinOptions(twin_port, twin_clock_scale) if twin else None
            )
        except InsecureFileMode as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    @app.command()
    def mcp(
        server: str | None = typer.Option(None, envvar="INSTANTSTART_SERVER_URL", help="Server URL."),
    ) -> None:
        """MCP over stdio: every tool call is forwarded to the running server's REST API."""
        from instantstart.mcp.stdio import run

        run(client_config(), server_url=server)


def _add_setup_commands(app: typer.Typer, full_settings: Callable[[], Settings],
                        client_config: Callable[[], ClientConfig]) -> None:
    """`agent-config`, `doctor` and `token-file`: getting an agent, an account and a client ready."""

    @app.command("agent-config")
    def agent_config(
        target: str = typer.Argument(..., help="kiro, claude-code or mcp-json."),
        directory: Path = typer.Option(Path("."), "--dir", help="Project directory to write into."),
        command: str = typer.Option("instantstart", help="How the agent starts `instantstart mcp`."),
        url: str | None = typer.Option(
            None, "--url", help="Connect over HTTP to a running server's MCP endpoint (e.g. https://host:3099/mcp)."
        ),
        token_env: str = typer.Option(
            "INSTANTSTART_TOKEN", "--token-env", help="With --url: the environment variable holding the API token."
        ),
    ) -> None:
        """Write an agent configuration for the hypd-inst MCP server and the skills (read-only tools auto-approved).

        With --url the agent needs no local install: the file names the URL and `Bearer ${TOKEN_ENV}`, never the token.
        """
        from instantstart.catalog import CATALOG
        from instantstart.cli.agent_config import TARGETS, write_config
        from instantstart.services import load_all

        load_all(client_config().plugins)
        if target not in TARGETS:
            raise typer.BadParameter(f"must be one of {', '.join(TARGETS)}", param_hint="TARGET")
        try:
            written = write_config(target, directory, CATALOG, command, url=url, token_env=token_env)
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        for path in written:
            typer.echo(str(path))

    @app.command()
    def doctor(
        instance_type: list[str] = typer.Option(
            [], "--instance-type", help="TYPE or TYPE=COUNT (e.g. ml.p5.48xlarge=2): check its cluster-usage quota."
        ),
        output: str = typer.Option("table", "-o", "--output", help="Output format: table or json."),
        twin: bool = typer.Option(False, "--twin", help="Start the digital twin and check it instead of AWS."),
    ) -> None:
        """Check the account, Region, quotas, bucket, helm, database and permissions before a first cluster."""
        from instantstart.cli.doctor import run_doctor_command

        raise typer.Exit(run_doctor_command(full_settings(), instance_type, output, twin=twin))

    @app.command("token-file")
    def token_file() -> None:
        """Print where the bootstrap admin's API token is stored (never the token itself); `instantstart token`
        manages your own tokens."""
        typer.echo(str(client_config().data_dir / TOKEN_FILE))


def named_group(argv: list[str], groups: Container[str]) -> set[str]:
    """The catalog command group a command line runs (none for the root's help or a static command)."""
    first = next((arg for arg in argv if not arg.startswith("-")), None)
    return {first} if first is not None and first in groups else set()


def main() -> None:
    """Console entry point."""
    argv = sys.argv[1:]
    build_app(argv=argv)(argv, prog_name="instantstart")


if __name__ == "__main__":
    main()
