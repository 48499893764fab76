"""Topic settings on the command line: ``--config K=V`` parsed (``topics
create`` and ``topics alter``), and ``topics alter``'s changes of settings
(``--config``, ``--delete-config``) sent as one Admin.alter_configs."""

from __future__ import annotations

import click


def parse_settings(items) -> dict:
    """``K=V`` items as {name: value}, an integer value parsed as one."""
    settings = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"{item!r} is not K=V", param_hint="--config")
        settings[key] = int(value) if value.lstrip("-").isdigit() else value
    return settings


def config_options(fn):
    """``topics alter``'s options of settings: ``--config K=V`` (repeatable)
    and ``--delete-config K`` (repeatable)."""
    fn = click.option("--delete-config", "deleted", multiple=True, metavar="K",
                      help="Return setting K to the broker's default; repeatable.")(fn)
    return click.option("--config", "configs", multiple=True, metavar="K=V",
                        help="Set a setting (e.g. retention_ms=3600000); repeatable.")(fn)


def alter_settings(admin, topic: str, configs, deleted) -> "str | None":
    """Apply ``--config`` / ``--delete-config`` to ``topic``; what was done
    (None when neither was given)."""
    if not configs and not deleted:
        return None
    settings = parse_settings(configs)
    admin.alter_configs(topic, settings, list(deleted))
    done = [f"{k}={v}" for k, v in settings.items()] + [f"{k} (default)" for k in deleted]
    return f"altered topic {topic}: {', '.join(done)}"
