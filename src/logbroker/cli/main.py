"""The ``logbroker`` command line: thin click commands over the library.

Errors reach the user as one line on stderr and a non-zero exit code, never
a traceback.
"""

from __future__ import annotations

import sys

import click

from .. import __version__
from ..errors import LogbrokerError


class _Group(click.Group):
    """Turns LogbrokerError and OSError into one line on stderr, exit 1."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LogbrokerError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except BrokenPipeError:  # e.g. `| head`: stop quietly
            sys.stderr.close()
            sys.exit(1)
        except OSError as exc:
            click.echo(f"error: {exc.strerror or exc}: {exc.filename or ''}".rstrip(": "), err=True)
            sys.exit(1)
        except KeyboardInterrupt:
            sys.exit(130)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logbroker")
def main() -> None:
    """logbroker: a durable, log-structured message broker."""


def _register_commands() -> None:
    from .consume import consume
    from .groups import groups
    from .inspect import inspect
    from .produce import produce
    from .serve import serve
    from .topics import topics

    for command in (serve, produce, consume, topics, groups, inspect):
        main.add_command(command)


_register_commands()


