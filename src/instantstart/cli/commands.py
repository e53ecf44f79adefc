"""CLI commands generated from the catalog: options from the input model, output as JSON or Rich."""

from __future__ import annotations

import contextlib
import inspect
import json
import re
import sys
import time
from collections.abc import Callable
from typing import Any, get_args, get_origin

import typer
from pydantic.fields import FieldInfo
from rich.console import Console
from rich.live import Live
from rich.spinner import Spinner
from rich.table import Table

from instantstart.catalog.registry import Catalog, OperationSpec
from instantstart.catalog.secret import is_secret_annotation
from instantstart.client import RestClient
from instantstart.settings import Settings

TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
out = Console()
err = Console(stderr=True)


def kebab(name: str) -> str:
    """camelCase → kebab-case option names."""
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def secret_envvar(wire: str) -> str:
    """The environment variable a Secret field is read from, e.g. hfToken → INSTANTSTART_HF_TOKEN."""
    return "INSTANTSTART_" + kebab(wire).replace("-", "_").upper()


def _is_bool(info: FieldInfo) -> bool:
    ann = info.annotation
    return ann is bool or (
        get_origin(ann) is not None and bool in get_args(ann) and all(a in (bool, type(None)) for a in get_args(ann))
    )


def _is_structured(info: FieldInfo) -> bool:
    ann = info.annotation
    origin = get_origin(ann)
    candidates = get_args(ann) if origin is not None else (ann,)
    for candidate in candidates:
        if get_origin(candidate) in (list, dict) or candidate in (list, dict):
            return True
        if isinstance(candidate, type) and hasattr(candidate, "model_fields"):
            return True
    return False


def _parameters(spec: OperationSpec) -> list[inspect.Parameter]:
    """Typer parameters: one option per input field, then the common options."""
    params: list[inspect.Parameter] = []

    def add(name: str, annotation: Any, option: Any) -> None:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=option, annotation=annotation))

    for name, info in spec.input_model.model_fields.items():
        wire = info.alias or name
        help_text = info.description or ""
        if is_secret_annotation(info.annotation):
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
        elif _is_bool(info):
            add(name, bool | None, typer.Option(None, f"--{kebab(wire)}/--no-{kebab(wire)}", help=help_text))
        else:
            # Values go to the server as typed; the server validates them (one error text for all faces).
            structured = _is_structured(info)
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
    add("output", str, typer.Option("table", "-o", "--output", help="Output format: table or json."))
    if spec.mutating:
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


def render(payload: dict[str, Any], output: str) -> None:
    """Print a result: JSON, or a compact Rich view."""
    if output == "json":
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
        return
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold cyan")
    table.add_column()
    for key, value in payload.items():
        shown = json.dumps(value, indent=1) if isinstance(value, dict | list) else str(value)
        table.add_row(key, shown)
    out.print(table)


def render_error(payload: dict[str, Any], output: str) -> None:
    """Print an error to stderr with its code and hint."""
    if output == "json":
        sys.stderr.write(json.dumps(payload, indent=2) + "\n")
        return
    error = payload.get("error", payload)
    err.print(f"[bold red]{error.get('code', 'ERROR')}[/]: {error.get('message', '')}")
    if error.get("hint"):
        err.print(f"[yellow]hint[/]: {error['hint']}")


def wait_for(client: RestClient, catalog: Catalog, operation_id: str, output: str, timeout: float) -> dict[str, Any]:
    """Poll operation_get until the operation ends, with a live spinner naming the current stage."""
    getter = catalog.get("operation_get")
    assert getter is not None
    deadline = time.monotonic() + timeout
    spinner = Spinner("dots", text=f"{operation_id}: waiting")
    view: dict[str, Any] = {}
    live = output != "json" and err.is_terminal
    with Live(spinner, console=err, transient=True) if live else contextlib.nullcontext():
        while time.monotonic() < deadline:
            failed, view = client.call(getter, {"operationId": operation_id})
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


def make_command(spec: OperationSpec, catalog: Catalog, settings: Settings) -> Callable[..., None]:
    """The Typer command function of one operation (its signature is built from the input model)."""
    fields = {name: info.alias or name for name, info in spec.input_model.model_fields.items()}

    def command(**kwargs: Any) -> None:
        output = kwargs.pop("output")
        if output not in ("table", "json"):
            raise typer.BadParameter("must be table or json", param_hint="--output")
        server = kwargs.pop("server")
        wait = kwargs.pop("wait", False)
        wait_timeout = kwargs.pop("wait_timeout", 3600.0)
        token = kwargs.pop("client_token")
        # Only the options the user gave are sent: the server applies its own defaults.
        args = {fields[k]: _coerce(v) if isinstance(v, str) else v for k, v in kwargs.items() if v is not None}
        if token:
            args["clientToken"] = token
        client = RestClient(settings, server)
        try:
            failed, payload = client.call(spec, args)
            if failed:
                render_error(payload, output)
                raise typer.Exit(1)
            if wait and "operationId" in payload:
                payload = wait_for(client, catalog, payload["operationId"], output, wait_timeout)
                render(payload, output)
                raise typer.Exit(0 if payload.get("status") == "SUCCEEDED" else 1)
            render(payload, output)
        finally:
            client.close()

    command.__signature__ = inspect.Signature(_parameters(spec))  # type: ignore[attr-defined]
    command.__name__ = spec.name
    command.__doc__ = spec.tool_description
    return command


def add_catalog_commands(root: typer.Typer, catalog: Catalog, settings: Settings) -> None:
    """Attach `instantstart <group> <command>` for every operation."""
    groups: dict[str, typer.Typer] = {}
    for spec in catalog:
        group = groups.get(spec.cli_group)
        if group is None:
            group = typer.Typer(help=f"{spec.cli_group} operations", no_args_is_help=True)
            groups[spec.cli_group] = group
            root.add_typer(group, name=spec.cli_group)
        group.command(spec.cli_command, help=spec.tool_description, short_help=spec.summary)(
            make_command(spec, catalog, settings)
        )
