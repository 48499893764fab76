"""Wire knowledge in one place (issue 9): error codes only in errors.py, one
EARLIEST/LATEST, one error helper, the server using only the public API of
connections and handlers."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "logbroker"


def sources():
    return [(p, p.read_text()) for p in sorted(SRC.rglob("*.py"))]


def test_no_literal_error_codes_in_the_broker():
    literal = re.compile(r"error=-?[1-9]\d*|\[-?[1-9]\d*, f?\"|\(\w+, -?[1-9]\d*, f?\"")
    found = [f"{p.name}:{n}: {line.strip()}" for p in sorted((SRC / "broker").glob("*.py"))
             for n, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert not found, "\n".join(found)


def test_one_definition_of_earliest_and_latest_and_of_the_error_helper():
    defs = [p.relative_to(SRC).as_posix() for p, text in sources()
            if re.search(r"^\s*(EARLIEST|LATEST)\b[^=\n]*=(?!=)", text, re.MULTILINE)]
    assert defs == ["limits.py"]  # with check_offset_spec; protocol/messages.py exports them
    twins = [p.relative_to(SRC).as_posix() for p, text in sources()
             if re.search(r"return (exc|e)\.code, (exc|e)\.message", text)]
    assert twins == ["errors.py"]


def test_the_server_uses_only_public_api_of_connections_and_handlers():
    text = (SRC / "broker" / "server.py").read_text()
    assert not re.search(r"\.transport\b|\.writer\b|handlers\.(?!dispatch(_now)?\b)\w+", text)
