"""A tiny structural type checker for decoded msgpack values.

Specs: a type (``int``, ``str``, ``bool``, ``bytes``), ``Opt(spec)`` (None
allowed), ``[spec]`` (a list of), ``(spec, ...)`` (a fixed-length list),
``Map(spec)`` (str keys to spec values). ``check`` raises
``InvalidRequestError`` naming the path of the first mismatch, so a peer's
malformed message never reaches handler code as a TypeError.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvalidRequestError

MAX_INT = (1 << 63) - 1
MIN_INT = -(1 << 63)


@dataclass(frozen=True)
class Opt:
    spec: Any


@dataclass(frozen=True)
class Map:
    spec: Any


def check(value: Any, spec: Any, path: str = "") -> Any:
    """Return ``value`` with every list turned into a tuple, or raise."""
    if isinstance(spec, Opt):
        return None if value is None else check(value, spec.spec, path)
    if isinstance(spec, Map):
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise InvalidRequestError(f"{path or 'message'}: expected a map with string keys")
        return {k: check(v, spec.spec, f"{path}.{k}") for k, v in value.items()}
    if isinstance(spec, list):
        if not isinstance(value, (list, tuple)):
            raise InvalidRequestError(f"{path or 'message'}: expected a list")
        return tuple(check(v, spec[0], f"{path}[{i}]") for i, v in enumerate(value))
    if isinstance(spec, tuple):
        if not isinstance(value, (list, tuple)) or len(value) != len(spec):
            raise InvalidRequestError(f"{path or 'message'}: expected a list of {len(spec)} items")
        return tuple(check(v, s, f"{path}[{i}]") for i, (v, s) in enumerate(zip(value, spec)))
    if spec is int:
        if type(value) is not int or not MIN_INT <= value <= MAX_INT:
            raise InvalidRequestError(f"{path or 'message'}: expected an integer")
        return value
    if spec is bool:
        if type(value) is not bool:
            raise InvalidRequestError(f"{path or 'message'}: expected true or false")
        return value
    if spec is object:  # a scalar config value
        if not isinstance(value, (int, str, bool, float)) and value is not None:
            raise InvalidRequestError(f"{path or 'message'}: expected a scalar")
        if type(value) is int and not MIN_INT <= value <= MAX_INT:
            raise InvalidRequestError(f"{path or 'message'}: integer out of range")
        return value
    if not isinstance(value, spec):
        raise InvalidRequestError(f"{path or 'message'}: expected {spec.__name__}")
    return value
