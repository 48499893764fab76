"""Every refusal a client sees, named in the broker log at debug level.

A Kafka client's error says "see the broker logs"; so does ours. Both
listeners answer with our responses (the Kafka listener translates them
after), so one look at a ready response, in the answering pump, covers
both: ``log_refusals(log, conn, response)`` writes one debug line per
refused request or part (its top-level error, then every part whose
``error`` is set, at most ``MAX_PARTS`` of them and a count of the rest),
naming the connection's peer and principal, the response kind, the part
(topic, partition, name or group), the error's name and its message.

The caller checks ``log.isEnabledFor(logging.DEBUG)`` first, so an
answer costs one check when debug is off; with debug on, the work is
bounded by the response's size and ``MAX_PARTS`` lines per answer.
A Kafka answer the listener makes itself (a translator's refusal, no
request for the broker) is logged by ``log_listener_refusal``, a Kafka
request of an API or version it does not serve by ``log_unsupported``. Refusals
that close a connection are logged where it closes (answering.py);
denials of authorization are counted in the metrics too.
"""

from __future__ import annotations

from ..errors import for_code

MAX_PARTS = 5  # refused parts named per answer; the rest counted in one line
_WHERE = ("topic", "name", "group", "group_id", "resource", "partition")


def log_refusals(log, conn, response) -> None:
    """Debug lines for ``response``'s refusals (module docstring); nothing
    for a response without an error anywhere, or for anything but one."""
    schema = getattr(response, "SCHEMA", None)
    if schema is None or "error" not in schema:
        return
    error = response.error
    kind = type(response).__name__.removesuffix("Response")
    who = f"{conn.peer} ({conn.session.principal or 'anonymous'})"
    if error:
        log.debug("refused %s from %s: %s: %s", kind, who, _name(error),
                  response.message or "-")
    named = more = 0
    for field, spec in schema.items():
        part_cls = spec[0] if isinstance(spec, list) and spec else None
        fields = getattr(part_cls, "_fields", ())
        if "error" not in fields:
            continue
        at = fields.index("error")
        for part in getattr(response, field, None) or ():
            code = part[at]
            if not code:
                continue
            if named < MAX_PARTS:
                named += 1
                log.debug("refused %s %s from %s: %s: %s", kind, _where(fields, part), who,
                          _name(code), _message(fields, part))
            else:
                more += 1
    if more:
        log.debug("refused %s: %d more part(s) from %s", kind, more, who)


def log_listener_refusal(log, conn, header, body) -> None:
    """A debug line for a Kafka answer the listener made itself, without
    asking the broker (a translator's refusal: kafka/plan.py ``Plan(None,
    ...)``), when its top-level ``error_code`` is set."""
    code = body.get("error_code", 0) if isinstance(body, dict) else 0
    if code:
        log.debug("refused Kafka api %d v%d from %s (%s): error %d: %s", header.api_key,
                  header.api_version, conn.peer, conn.session.principal or "anonymous", code,
                  body.get("error_message") or "-")


def log_unsupported(log, conn, header, why: str) -> None:
    """A debug line for a Kafka request of an API key or version the
    listener does not serve (``header`` None: not even its header read)."""
    api = "?" if header is None else f"{header.api_key} v{header.api_version}"
    log.debug("refused Kafka api %s from %s (%s): UNSUPPORTED_VERSION: %s", api, conn.peer,
              conn.session.principal or "anonymous", why)


def _name(code: int) -> str:
    cls = for_code(code)
    return cls.name if cls.code == code else f"error {code}"


def _where(fields, part) -> str:
    return " ".join(f"{f}={part[fields.index(f)]!r:.80}" for f in _WHERE if f in fields)


def _message(fields, part) -> str:
    return (part[fields.index("message")] if "message" in fields else "") or "-"
