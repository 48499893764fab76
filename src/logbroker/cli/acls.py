"""``logbroker acls add|remove|list``: who may do what (docs/security.md,
"Authorization"). A binding names a principal, one resource (``--topic``,
``--group``, ``--transactional-id`` or ``--cluster``; ``--prefix`` for every
name starting with it), an operation and allow (default) or ``--deny``."""

from __future__ import annotations

import click

from ..errors import InvalidConfigError
from .common import bootstrap_option, emit_json, json_option, table

OPERATIONS = ("read", "write", "create", "delete", "describe", "alter", "cluster_action", "all")
OPERATIONS = OPERATIONS[:-1] + ("describe_configs", "alter_configs", "all")  # Kafka's config ops
COLUMNS = ["PRINCIPAL", "PERMISSION", "OPERATION", "RESOURCE", "NAME", "PATTERN"]


def _resource(fn):
    for option in reversed((
            click.option("--principal", default="", metavar="User:NAME",
                         help="User:NAME, or User:* for every authenticated user."),
            click.option("--topic", default=None, help="The topic (or topic prefix)."),
            click.option("--group", default=None, help="The consumer group (or prefix)."),
            click.option("--transactional-id", "txn_id", default=None,
                         help="A transactional producer's id (or prefix)."),
            click.option("--cluster", is_flag=True, default=False,
                         help="The cluster (users, ACLs, cluster-wide requests)."),
            click.option("--prefix", is_flag=True, default=False,
                         help="The name is a prefix: every topic or group starting with it."))):
        fn = option(fn)
    return fn


def _target(topic, group, cluster, txn_id=None) -> "tuple[str, str]":
    given = [(t, n) for t, n in (("topic", topic), ("group", group),
                                 ("transactional_id", txn_id)) if n is not None]
    if cluster:
        given.append(("cluster", "logbroker"))
    if len(given) > 1:
        raise InvalidConfigError("give one of --topic, --group, --transactional-id and --cluster")
    return given[0] if given else ("", "")


@click.group()
def acls() -> None:
    """Add, remove and list ACLs (enforced with auth_required and super_users,
    or with allow_everyone_if_no_acl_found)."""


@acls.command()
@_resource
@click.option("--operation", "operations", multiple=True, required=True,
              type=click.Choice(OPERATIONS), help="What is allowed (or denied); repeatable.")
@click.option("--deny", is_flag=True, default=False, help="Deny instead of allow.")
@bootstrap_option
def add(principal, topic, group, txn_id, cluster, prefix, operations, deny, conn):
    """Allow (or --deny) a principal operations on one resource."""
    from .. import Admin
    from ..client.admin.results import Acl

    rtype, name = _target(topic, group, cluster, txn_id)
    if not principal or not rtype:
        raise InvalidConfigError("acls add needs --principal and one of --topic, --group, "
                                 "--transactional-id, --cluster")
    rows = [Acl(principal, rtype, name, "prefix" if prefix else "literal", op,
                "deny" if deny else "allow") for op in operations]
    with Admin(**conn) as admin:
        created = admin.create_acls(rows)
    click.echo(f"added {created} ACL(s)")


@acls.command()
@_resource
@click.option("--operation", default="", type=click.Choice(("",) + OPERATIONS),
              help="Only this operation (default: any).")
@click.option("--permission", default="", type=click.Choice(("", "allow", "deny")),
              help="Only allows or only denies (default: both).")
@bootstrap_option
def remove(principal, topic, group, txn_id, cluster, prefix, operation, permission, conn):
    """Remove the ACLs matching the flags given (at least a principal or a resource)."""
    from .. import Admin

    rtype, name = _target(topic, group, cluster, txn_id)
    if not principal and not rtype:
        raise InvalidConfigError("acls remove needs --principal or a resource (it would "
                                 "remove every ACL)")
    pattern = "prefix" if prefix else ("literal" if rtype else "")
    with Admin(**conn) as admin:
        gone = admin.delete_acls(principal, rtype, name, pattern, operation, permission)
    click.echo(f"removed {len(gone)} ACL(s)")


@acls.command("list")
@_resource
@bootstrap_option
@json_option
def list_(principal, topic, group, txn_id, cluster, prefix, conn, as_json):
    """The ACLs, all or those matching the flags given."""
    from .. import Admin

    rtype, name = _target(topic, group, cluster, txn_id)
    pattern = ("prefix" if prefix else "literal") if rtype else ""
    with Admin(**conn) as admin:
        found = admin.describe_acls(principal, rtype, name, pattern)
    rows = [(a.principal, a.permission, a.operation, a.resource_type, a.name, a.pattern)
            for a in found]
    if as_json:
        emit_json([dict(zip((c.lower() for c in COLUMNS), row)) for row in rows])
    else:
        table(COLUMNS, rows)
