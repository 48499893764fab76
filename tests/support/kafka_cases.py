"""The Kafka codec's cases (tests/kafka/): every API x every version of the
profile, and request/response bodies of random values generated from the
schemas (as plain data: dicts, lists)."""

from __future__ import annotations

import random

from logbroker.kafka.apis import PROFILE
from logbroker.kafka.schema import Array, Struct

CASES = [(api, v) for api in PROFILE for v in range(api.min_version, api.max_version + 1)]
_INT_BITS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


def random_value(type_, nullable: bool, version: int, rng: random.Random, depth: int = 0):
    """A random value of ``type_`` at ``version`` as plain data (dicts, lists)."""
    if nullable and rng.random() < 0.2:
        return None
    if isinstance(type_, Struct):
        return random_body(type_, version, rng, depth + 1)
    if isinstance(type_, Array):
        n = rng.randint(0, 2 if depth < 3 else 1)
        return [random_value(type_.element, False, version, rng, depth + 1) for _ in range(n)]
    if type_ in _INT_BITS:
        lo, hi = -(1 << (_INT_BITS[type_] - 1)), (1 << (_INT_BITS[type_] - 1)) - 1
        return rng.choice([lo, hi, -1, 0, 1, rng.randint(lo, hi)])
    if type_ == "bool":
        return rng.random() < 0.5
    if type_ == "string":
        return rng.choice(["", "t", "orders-1", "tópico ✓", "x" * rng.randint(0, 300)])
    if type_ == "uuid":
        return bytes(rng.getrandbits(8) for _ in range(16))
    # bytes, records
    return bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 40)))


def random_body(struct: Struct, version: int, rng: random.Random, depth: int = 0) -> dict:
    return {f.name: random_value(f.type, version in f.nullable, version, rng, depth)
            for f in struct.fields if version in f.versions}
