"""The ``logbroker`` command line: thin click commands over the library.

Every error reaches the user as exactly one line on stderr and a non-zero
exit code, never a traceback:

- ``error: NAME: message``, exit 1: a ``LogbrokerError`` (NAME is its
  registry name: INVALID_TOPIC, BROKER_UNAVAILABLE, ...) or an OSError
  (``error: OS_ERROR: ...``);
- ``error: USAGE: message (see 'logbroker CMD --help')``, exit 2: the
  command line does not parse (unknown option, missing argument, a value of
  the wrong type);
- ``error: INTERNAL: Type: message``, exit 1: a bug; set ``LOGBROKER_DEBUG=1``
  for the traceback.

Client commands keep the clients' log records off stderr (cli/common.py).
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import NoReturn

import click

from .. import __version__
from ..errors import LogbrokerError


def fail(name: str, message: str, code: int = 1) -> "NoReturn":
    """Print ``error: NAME: message`` (one line) on stderr and exit ``code``."""
    one_line = " ".join(str(message).split())
    click.echo(f"error: {name}: {one_line}", err=True)
    sys.exit(code)


# The commands, each in its module cli/<name>.py (a click command or group of that name),
# imported only when it runs or --help lists it: `logbroker produce` does not load the
# broker, inspect's reports or the storage engine (importing every command took ~0.9 s
# more than one command's, `python -X importtime`)
COMMANDS = ("serve", "produce", "consume", "topics", "groups", "cluster", "users", "acls",
            "inspect", "transactions")


class _Group(click.Group):
    """Turns every failure into one line on stderr (module docstring), and
    loads each command when it is needed (``COMMANDS``)."""

    def list_commands(self, ctx) -> list[str]:
        return sorted(set(COMMANDS) | set(self.commands))

    def get_command(self, ctx, cmd_name: str):
        cmd = self.commands.get(cmd_name)
        if cmd is None and cmd_name in COMMANDS:
            cmd = getattr(importlib.import_module(f"{__package__}.{cmd_name}"), cmd_name)
            self.add_command(cmd)
        return cmd

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `logbroker topics`: the help
            exc.show()
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else self._path(args)
            fail("USAGE", f"{exc.format_message()} (see '{where} --help')", exc.exit_code)
        except click.ClickException as exc:  # e.g. a file that cannot be opened
            fail("USAGE", exc.format_message(), exc.exit_code)
        except click.Abort:
            sys.exit(130)
        sys.exit(rv if isinstance(rv, int) else 0)

    def _path(self, args) -> str:
        """``logbroker CMD [SUB]`` named by the leading ``args`` (for the hint)."""
        words, group = ["logbroker"], self
        for arg in sys.argv[1:] if args is None else args:
            cmd = group.get_command(None, arg) if isinstance(group, click.Group) else None
            if cmd is None:
                break
            words.append(arg)
            group = cmd
        return " ".join(words)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except LogbrokerError as exc:
            fail(exc.name, exc.message)
        except BrokenPipeError:  # e.g. `| head`: stop quietly
            sys.stderr.close()
            sys.exit(1)
        except OSError as exc:
            fail("OS_ERROR", f"{exc.strerror or exc}: {exc.filename or ''}".rstrip(": "))
        except KeyboardInterrupt:
            sys.exit(130)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: still one line, unless debugging
            if os.environ.get("LOGBROKER_DEBUG"):
                raise
            fail("INTERNAL", f"{type(exc).__name__}: {exc} (LOGBROKER_DEBUG=1 shows where)")


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="logbroker")
def main() -> None:
    """logbroker: a durable, log-structured message broker."""
