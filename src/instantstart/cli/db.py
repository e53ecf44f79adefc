"""The `instantstart db` commands: backup, check and restore of the database the server's settings name."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:
    from instantstart.settings import Settings
    from instantstart.store.backup import BackupReport


def db_app(settings: Callable[[], Settings]) -> typer.Typer:
    """The `db` command group; each command works on `settings().resolved_database_url`, not through the API."""
    app = typer.Typer(help="Back up, check and restore the control plane's database.", no_args_is_help=True)

    @app.command()
    def backup(path: Path = typer.Argument(..., help="New file to write (never overwritten).")) -> None:
        """Write a consistent backup while the server runs (SQLite online backup; pg_dump custom format)."""
        from instantstart.store.backup import backup as run

        _finish(_run(settings, lambda db: run(db, path)), "backup written")

    @app.command()
    def check(path: Path = typer.Argument(..., help="A file written by `instantstart db backup`.")) -> None:
        """Check a backup: it opens, its schema revision is known to this release, integrity, rows per table."""
        from instantstart.store.backup import check as run

        _finish(_run(settings, lambda db: run(db, path)), "backup consistent")

    @app.command()
    def restore(
        path: Path = typer.Argument(..., help="A file written by `instantstart db backup`."),
        reconcile: bool = typer.Option(
            True, "--reconcile/--no-reconcile", help="Compare the ledger with the AWS account afterwards."
        ),
    ) -> None:
        """Replace the database with a backup (stop the server first). Operations running at backup time resume
        at the next `serve`; the ledger is then compared with the account (orphans and phantoms are reported,
        never deleted)."""
        from instantstart.store.backup import restore as run

        report = _run(settings, lambda db: run(db, path))
        _print(report, "restored")
        if reconcile:
            from instantstart.api.app import build_context
            from instantstart.services.cluster.ledger_reconcile import reconcile_ledger

            context = build_context(settings())
            try:
                typer.echo(json.dumps({"ledger": reconcile_ledger(context)}, indent=2))
            finally:
                context.db.dispose()

    return app


def refuse_newer_schema(settings: Settings) -> None:
    """Before `serve` starts: a database a newer release migrated stops it with the message and the fix on
    stderr (exit 2), not a traceback in the log. An unreachable database is left to the server's start."""
    from sqlalchemy.exc import SQLAlchemyError

    from instantstart.errors import PreconditionFailed
    from instantstart.store.db import Database, refuse_unknown_revision

    db = Database(settings.resolved_database_url)
    try:
        refuse_unknown_revision(db.revisions()[0])
    except SQLAlchemyError:
        return
    except PreconditionFailed as exc:
        typer.echo(f"error: {exc.message}\nhint: {exc.hint}", err=True)
        raise typer.Exit(2) from None
    finally:
        db.dispose()


def _run(settings: Callable[[], Settings], action: Callable[[Any], BackupReport]) -> BackupReport:
    from instantstart.errors import InstantStartError
    from instantstart.store.db import Database

    db = Database(settings().resolved_database_url)
    try:
        return action(db)
    except InstantStartError as exc:
        typer.echo(f"error: {exc.message}\nhint: {exc.hint}", err=True)
        raise typer.Exit(1) from None
    finally:
        db.dispose()


def _print(report: BackupReport, verdict: str) -> None:
    typer.echo(json.dumps({"path": report.path, "revision": report.revision, "rows": report.rows,
                           "problems": report.problems, "verdict": verdict if report.ok else "problems found"},
                          indent=2))


def _finish(report: BackupReport, verdict: str) -> None:
    _print(report, verdict)
    if not report.ok:
        raise typer.Exit(1)
