"""The `instantstart` command: serve, mcp, token, and the generated operation commands."""

from __future__ import annotations

import typer

from instantstart.auth import token_path
from instantstart.catalog import CATALOG
from instantstart.cli.commands import add_catalog_commands
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
    ) -> None:
        """Run the control plane: REST under /api/v1, MCP at /mcp, web UI at /."""
        from instantstart.auth import InsecureFileMode
        from instantstart.server import run_server

        try:
            run_server(settings, host=host, port=port, twin=twin)
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

    @app.command()
    def token() -> None:
        """Print where the API token is stored (never the token itself)."""
        typer.echo(str(token_path(settings)))

    load_all(settings.plugins)
    add_catalog_commands(app, CATALOG, settings)
    return app


def main() -> None:
    """Console entry point."""
    build_app(Settings())(prog_name="instantstart")


if __name__ == "__main__":
    main()
