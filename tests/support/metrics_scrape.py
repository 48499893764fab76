"""Scraping a broker's ``/metrics`` over HTTP, parsed with prometheus_client's
own parser (tests/metrics/, tests/security/test_quotas_broker.py)."""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def scrape(url: str) -> dict:
    """{sample name: {frozenset(labels.items()): value}} and the families, by name."""
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.status == 200
        return parse(resp.read().decode())


def parse(text: str) -> dict:
    """``text`` (the Prometheus text format) as ``scrape`` answers it."""
    samples: dict = {}
    families = list(text_string_to_metric_families(text))
    for fam in families:
        for s in fam.samples:
            samples.setdefault(s.name, {})[frozenset(s.labels.items())] = s.value
    samples["__families__"] = families
    return samples


def value(samples: dict, name: str, **labels) -> float:
    return samples[name][frozenset((k, str(v)) for k, v in labels.items())]


# 8 threads scraping in a loop, in a process of their own (their own GIL): prints the count
SCRAPER = """
import sys, threading, time, urllib.request
url, n, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end, done = time.monotonic() + seconds, []
def run():
    while time.monotonic() < end:
        with urllib.request.urlopen(url, timeout=60) as resp:
            done.append(len(resp.read()))
threads = [threading.Thread(target=run) for _ in range(n)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(done), min(done))
"""
