"""docs/kafka.md's table of supported APIs says what ApiVersions advertises:
one row per API of the profile (kafka/apis.py), its key and version range."""

from __future__ import annotations

import pathlib
import re

from logbroker.kafka.apis import APIS

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "kafka.md"
ROW = re.compile(r"^\| *([A-Z][A-Za-z]+) *\| *(\d+) *\| *(\d+)(?:-(\d+))? *\|", re.M)


def test_every_advertised_api_has_its_row_with_its_versions():
    rows = {int(key): (name, int(lo), int(hi or lo))
            for name, key, lo, hi in ROW.findall(DOC.read_text())}
    want = {api.key: (api.name, api.min_version, api.max_version) for api in APIS.values()}
    assert {k: rows.get(k) for k in want} == want
    assert set(rows) == set(want), "rows for APIs the listener does not advertise"
