"""CLI commands generated from the catalog index: options from each operation's fields, output as JSON or Rich."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
import time
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

import typer

from instantstart.client_config import ClientConfig

if TYPE_CHECKING:
    from rich.console import Console

    from instantstart.client import RestClient

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
# What a command needs to reach the server, asked for only when it runs (reading it is not free).
ConfigSource = Callable[[], ClientConfig]


def console(stderr: bool = False) -> Console:
    """A Rich console on stdout or stderr (Rich is imported only by commands that print with it)."""
    from rich.console import Console

    return Console(stderr=stderr)


def kebab(name: str) -> str:
    """camelCase → kebab-case option names."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def secret_envvar(wire: str) -> str:
    """The environment variable a Secret field is read from, e.g. hfToken → INSTANTSTART_HF_TOKEN."""
    return "INSTANTSTART_" + kebab(wire).replace("-", "_").upper()


def _parameters(entry: dict[str, Any]) -> list[inspect.Parameter]:
    """Typer parameters: one option per input field, then the common options."""
    params: list[inspect.Parameter] = []

    def add(name: str, annotation: Any, option: Any) -> None:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))

    for option in entry["options"]:
        name, wire, help_text, kind = option["field"], option["wire"], option["help"], option["kind"]
        if kind == "secret":
            # A secret on the command line lands in shell history and `ps`: prefer the environment variable.
            add(
                name,
                str | None,
                typer.Option(
                    None,
                    f"--{kebab(wire)}",
                    envvar=secret_envvar(wire),
                    show_envvar=True,
                    show_default=False,
                    metavar="SECRET",
                    help=help_text + f" Prefer the {secret_envvar(wire)} environment variable.",
                ),
            )
        elif kind == "flag":
            add(name, bool | None, typer.Option(None, f"--{kebab(wire)}/--no-{kebab(wire)}", help=help_text))
        else:
            # Values go to the server as typed; the server validates them (one error text for all faces).
            structured = kind == "json"
            add(
                name,
                str | None,
                typer.Option(
                    None,
                    f"--{kebab(wire)}",
                    metavar="JSON" if structured else "TEXT",
                    help=help_text + (" (JSON)" if structured else ""),
                ),
            )
    add("client_token", str | None, typer.Option(None, "--client-token", help="Idempotency key for safe retries."))
    add("output", str, typer.Option("table", "-o", "--output", help=OUTPUT_HELP))
    if entry["mutating"]:
        add("wait", bool, typer.Option(False, "--wait/--no-wait", help="Poll until the operation ends."))
        add("wait_timeout", float, typer.Option(3600.0, "--wait-timeout", help="Seconds --wait polls at most."))
    add(
        "server",
        str | None,
        typer.Option(
            None, "--server", envvar="INSTANTSTART_SERVER_URL", help="Server URL (default http://127.0.0.1:3099)."
        ),
    )
    return params


def _coerce(value: str) -> Any:
    """Numbers stay strings (the server coerces and validates); JSON objects and arrays are parsed."""
    text = value.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return value


OUTPUT_HELP = "Output format: table or json; csv for a result that has a CSV form (usage report)."
OUTPUTS = ("table", "json", "csv")


def render(payload: dict[str, Any], output: str) -> None:
    """Print a result: JSON, its CSV form, or a compact Rich view."""
    if output == "csv":
        if not isinstance(payload.get("csv"), str):
            raise typer.BadParameter("this command's result has no CSV form; use table or json", param_hint="--output")
        sys.stdout.write(payload["csv"])
        return
    if output == "json":
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    from rich.table import Table

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan")
    table.add_column()
    for key, value in payload.items():
        shown = json.dumps(value, indent=1) if isinstance(value, dict | list) else str(value)
        table.add_row(key, shown)
    console().print(table)


def render_error(payload: dict[str, Any], output: str) -> None:
    """Print an error to stderr with its code and hint."""
    if output == "json":
        sys.stderr.write(json.dumps(payload, indent=2) + "\n")
        return
    error = payload.get("error", payload)
    err = console(stderr=True)
    err.print(f"[bold red]{error.get('code', 'ERROR')}[/]: {error.get('message', '')}")
    if error.get("hint"):
        err.print(f"[yellow]hint[/]: {error['hint']}")


def wait_for(client: RestClient, operation_id: str, output: str, timeout: float) -> dict[str, Any]:
    """Poll operation_get until the operation ends, with a live spinner naming the current stage."""
    from rich.live import Live
    from rich.spinner import Spinner

    err = console(stderr=True)
    deadline = time.monotonic() + timeout
    spinner = Spinner("dots", text=f"{operation_id}: waiting")
    view: dict[str, Any] = {}
    live = output != "json" and err.is_terminal
    with Live(spinner, console=err, transient=True) if live else contextlib.nullcontext():
        while time.monotonic() < deadline:
            failed, view = client.call("operation_get", {"operationId": operation_id})
            if failed:
                return view
            stage = view.get("currentStage") or "-"
            message = next((s.get("message") for s in view.get("stages", []) if s["name"] == stage), "")
            spinner.update(text=f"{operation_id} {view['status']} · stage {stage} · {message}")
            if output != "json" and not err.is_terminal:
                err.print(f"{view['status']} stage={stage} {message}")
            if view.get("status") in TERMINAL:
                return view
            time.sleep(1.0)
    return view


def make_command(entry: dict[str, Any], config: ConfigSource) -> Callable[..., None]:
    """The Typer command function of one operation (its signature is built from the operation's fields)."""
    fields = {option["field"]: option["wire"] for option in entry["options"]}

    def command(**kwargs: Any) -> None:
        output = kwargs.pop("output")
        if output not in OUTPUTS:
            raise typer.BadParameter("must be table, json or csv", param_hint="--output")
        server = kwargs.pop("server")
        wait = kwargs.pop("wait", False)
        wait_timeout = kwargs.pop("wait_timeout", 3600.0)
        token = kwargs.pop("client_token")
        # Only the options the user gave are sent: the server applies its own defaults.
        args = {fields[k]: _coerce(v) if isinstance(v, str) else v for k, v in kwargs.items() if v is not None}
        if token:
            args["clientToken"] = token
        from instantstart.client import RestClient

        client = RestClient(config(), server)
        failed, payload = client.call(entry["name"], args)
        if failed:
            render_error(payload, output)
            raise typer.Exit(1)
        if wait and "operationId" in payload:
            payload = wait_for(client, payload["operationId"], output, wait_timeout)
            render(payload, output)
            raise typer.Exit(0 if payload.get("status") == "SUCCEEDED" else 1)
        render(payload, output)

    command.__signature__ = inspect.Signature(_parameters(entry))  # type: ignore[attr-defined]
    command.__name__ = entry["name"]
    command.__doc__ = entry["tool"]["description"]
    return command


def add_catalog_commands(
    root: typer.Typer, index: dict[str, Any], config: ConfigSource, built: Container[str] | None = None
) -> None:
    """Attach `instantstart <group> <command>` for every operation of the catalog `index`.

    With `built`, only those groups get their commands; the others are listed with their help alone (typer builds
    every option of every command it holds, and a command line runs one group's command: the root's help needs
    only the groups' help).
    """
    groups: dict[str, typer.Typer] = {}
    for entry in index["operations"]:
        name = entry["group"]
        group = groups.get(name)
        if group is None:
            group = typer.Typer(help=index["groups"][name], no_args_is_help=True)
            groups[name] = group
            root.add_typer(group, name=name)
        if built is None or name in built:
            group.command(entry["command"], help=entry["tool"]["description"], short_help=entry["summary"])(
                make_command(entry, config)
            )
