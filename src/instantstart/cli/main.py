"""The `instantstart` command: serve, mcp, token-file, and the generated operation commands."""

from __future__ import annotations

from pathlib import Path

import typer

from instantstart.auth import token_path
from instantstart.catalog import CATALOG
from instantstart.cli.commands import add_catalog_commands
from instantstart.cli.workspace import add_sync_command
from instantstart.services import load_all
from instantstart.settings import Settings


def build_app(settings: Settings) -> typer.Typer:
    """The whole CLI for `settings`: static commands plus one command per catalog operation."""
    app = typer.Typer(help="InstantStart: HyperPod on EKS control plane.", no_args_is_help=True, add_completion=False)

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

        try:
            run_server(
                settings, host=host, port=port, twin=TwinOptions(twin_port, twin_clock_scale) if twin else None
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

        run(settings, server_url=server)

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
        from instantstart.cli.agent_config import TARGETS, write_config

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

        raise typer.Exit(run_doctor_command(settings, instance_type, output, twin=twin))

    @app.command("token-file")
    def token_file() -> None:
        """Print where the bootstrap admin's API token is stored (never the token itself); `instantstart token`
        manages your own tokens."""
        typer.echo(str(token_path(settings)))

    load_all(settings.plugins)
    add_catalog_commands(app, CATALOG, settings)
    add_sync_command(app, CATALOG, settings)
    return app


def main() -> None:
    """Console entry point."""
    build_app(Settings())(prog_name="instantstart")


if __name__ == "__main__":
    main()
