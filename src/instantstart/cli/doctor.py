"""The `instantstart doctor` command: parse the instance types, run the checks, print them, exit 1 on a problem."""

from __future__ import annotations

import json
import sys

import typer
from rich.console import Console
from rich.table import Table

from instantstart.services.account.doctor import Check, run_doctor
from instantstart.settings import Settings

_STYLE = {"ok": "green", "info": "cyan", "problem": "bold red", "unknown": "yellow"}


def parse_instance_types(values: list[str]) -> dict[str, int]:
    """`ml.p5.48xlarge` or `ml.p5.48xlarge=2` → {type: count}; a bad count names the option and the form."""
    parsed: dict[str, int] = {}
    for value in values:
        name, _, count = value.partition("=")
        if not name.startswith("ml.") or (count and not count.isdigit()) or count == "0":
            raise typer.BadParameter(
                f"{value!r}: give TYPE or TYPE=COUNT with an ml.* type and a count of at least 1, "
                "e.g. ml.p5.48xlarge=2.",
                param_hint="--instance-type",
            )
        parsed[name] = parsed.get(name, 0) + (int(count) if count else 1)
    return parsed


def render(checks: list[Check], output: str) -> None:
    """JSON (a list of checks) or a table."""
    if output == "json":
        sys.stdout.write(json.dumps([c.as_dict() for c in checks], indent=2) + "\n")
        return
    table = Table(show_header=True, box=None, pad_edge=False)
    for column in ("check", "status", "finding", "hint"):
        table.add_column(column)
    for check in checks:
        style = _STYLE[check.status]
        table.add_row(check.name, f"[{style}]{check.status}[/]", check.message, check.hint or "")
    Console(width=200).print(table)


def run_doctor_command(settings: Settings, instance_types: list[str], output: str, *, twin: bool) -> int:
    """Run doctor (against the twin when asked); 0 when nothing is a problem, else 1."""
    if output not in ("table", "json"):
        raise typer.BadParameter("must be table or json", param_hint="--output")
    wanted = parse_instance_types(instance_types)
    child = None
    if twin:
        from instantstart.twin_process import apply_env, start_twin

        child = start_twin()
        apply_env(child)
        settings = settings.model_copy(
            update={"aws_endpoint_url": child.endpoint_url, "aws_region": child.env.get("AWS_REGION")}
        )
    try:
        checks = run_doctor(settings, wanted)
    finally:
        if child is not None:
            child.stop()
    render(checks, output)
    return 1 if any(c.status == "problem" for c in checks) else 0
