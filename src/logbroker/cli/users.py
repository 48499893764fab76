"""``logbroker users add|delete|list``: the broker's SCRAM-SHA-256 users
(docs/security.md, "Authentication"). Passwords are never printed, and
never sent: the client derives the salted credentials the broker stores."""

from __future__ import annotations

import sys

import click

from ..errors import InvalidConfigError
from .common import bootstrap_option, emit_json, json_option, table


@click.group()
def users() -> None:
    """Add, delete and list the users that may authenticate."""


@users.command()
@click.argument("name")
@bootstrap_option
@click.option("--user-password-stdin", is_flag=True, default=False,
              help="Read NAME's new password from stdin (its first line after the "
                   "--password-stdin one, if that is given too); else a prompt.")
@click.option("--iterations", type=click.IntRange(4096, 16384), default=4096, show_default=True,
              help="PBKDF2 iterations of the salted password.")
def add(name, conn, user_password_stdin, iterations):
    """Create user NAME, or change its password."""
    from .. import Admin

    if user_password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif sys.stdin.isatty():
        password = click.prompt(f"New password for {name}", hide_input=True,
                                confirmation_prompt=True, err=True)
    else:
        password = ""
    if not password:
        raise InvalidConfigError(f"no password for user {name}: use --user-password-stdin or a "
                                 "terminal")
    with Admin(**conn) as admin:
        created = admin.create_user(name, password, iterations)
    click.echo(f"{'created' if created else 'changed the password of'} user {name}")


@users.command()
@click.argument("name")
@bootstrap_option
def delete(name, conn):
    """Delete user NAME (its connections open now stay open)."""
    from .. import Admin

    with Admin(**conn) as admin:
        admin.delete_user(name)
    click.echo(f"deleted user {name}")


@users.command("list")
@bootstrap_option
@json_option
def list_(conn, as_json):
    """Every user's name, mechanism and iteration count (never salts or keys)."""
    from .. import Admin

    with Admin(**conn) as admin:
        found = admin.list_users()
    if as_json:
        emit_json([{"name": u.name, "mechanism": u.mechanism, "iterations": u.iterations}
                   for u in found])
    else:
        table(["NAME", "MECHANISM", "ITERATIONS"], found)
