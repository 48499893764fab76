"""The ``logbroker`` command line: thin click commands over the library.

Errors reach the user as one line on stderr and a non-zero exit code, never
a traceback.
"""

from __future__ import annotations

import sys

import click

from . import __version__
from .errors import LogbrokerError


class _Group(click.Group):
    """Turns LogbrokerError and OSError into one line on stderr, exit 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LogbrokerError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except OSError as exc:
            click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
            sys.exit(1)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="logbroker")
def main() -> None:
    """logbroker: a durable, log-structured message broker."""


@main.command()
@click.option("--data-dir", default="./data", show_default=True, type=click.Path(file_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9555, show_default=True, type=int)
def serve(data_dir: str, host: str, port: int) -> None:
    """Run the broker on DATA_DIR."""
    from .storage.store import Store

    with Store.open(data_dir) as store:
        n = len(store.logs())
    click.echo(f"storage at {data_dir}: opened and recovered {n} partition(s).", err=True)
    click.echo("error: the network server is not built yet (issue 3); only the storage "
               "engine and `logbroker inspect` exist.", err=True)
    sys.exit(2)


def _register_commands() -> None:
    from .inspect_cli import inspect

    main.add_command(inspect)


_register_commands()
