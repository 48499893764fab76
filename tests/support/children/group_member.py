"""A consumer-group member in a process of its own (killed with SIGKILL by
tests/coordinator/test_consumer_group.py): joins GROUP on TOPIC and prints one line per
event, flushed at once — ``assigned t:p,...``, ``revoked t:p,...``,
``rec PARTITION OFFSET``.

    python group_member.py BOOTSTRAP GROUP TOPIC [SETTINGS_JSON]

Bounded: it stops by itself after 120 s.
"""

import json
import sys
import time

from logbroker import Consumer


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _parts(partitions) -> str:
    return ",".join(f"{t}:{p}" for t, p in partitions)


def main() -> None:
    bootstrap, group, topic = sys.argv[1:4]
    settings = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
    with Consumer(bootstrap, group=group, **settings) as consumer:
        consumer.subscribe([topic], on_assign=lambda ps: _say("assigned " + _parts(ps)),
                           on_revoke=lambda ps: _say("revoked " + _parts(ps)))
        _say("ready")
        deadline = time.monotonic() + 120  # bounded: the test kills it long before
        while time.monotonic() < deadline:
            for rec in consumer.poll(0.2):
                _say(f"rec {rec.partition} {rec.offset}")


if __name__ == "__main__":
    main()
