"""Sample records shared by the codec tests: every column mode and edge value."""

T0 = 1_700_000_000_000  # a fixed "now" in ms

RECORDS = [  # (value, key, headers, timestamp_ms)
    (b"v0", b"k0", [("trace", b"abc")], T0),
    (None, b"k1", [], T0 + 5),
    (b"", None, [("h\u00e9ader-\u2603", None), ("dup", b"1"), ("dup", b"")], T0 - 3),
    (b"\x00\xff" * 10, b"", [("", b"x")], T0 + (1 << 31) - 1),
    (b"last", None, [], T0 - (1 << 31)),
]
