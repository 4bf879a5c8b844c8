"""A sha256 of what a frozen dataclass holds (numpy arrays, strings, numbers, nested tuples).

`OpGraph.content_sha256` and `Cluster.content_sha256` use it: two graphs (clusters) with the same
digest pose the same placement problem, whatever their names or the files they came from.
`placement_digest` names one placement in 32 bytes, whatever the graph's size.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np


def _feed(digest: Any, value: Any) -> None:
    """Add ``value`` to ``digest`` with its type and length, so that no two values feed the same bytes."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        digest.update(f"array {array.dtype.str} {array.shape}\n".encode())
        digest.update(array.tobytes())
    elif isinstance(value, str):
        data = value.encode()
        digest.update(f"str {len(data)}\n".encode())
        digest.update(data)
    elif isinstance(value, Mapping):  # in key order, so that insertion order does not matter
        items = sorted(value.items(), key=lambda item: repr(item[0]))
        digest.update(f"map {len(items)}\n".encode())
        for key, item in items:
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, (tuple, list)):
        digest.update(f"seq {len(value)}\n".encode())
        for item in value:
            _feed(digest, item)
    elif isinstance(value, (bool, np.bool_)):
        digest.update(f"bool {bool(value)}\n".encode())
    elif isinstance(value, (int, np.integer)):
        digest.update(f"int {int(value)}\n".encode())
    elif isinstance(value, (float, np.floating)):
        digest.update(f"float {float(value).hex()}\n".encode())
    elif value is None:
        digest.update(b"none\n")
    else:
        raise TypeError(f"cannot hash a {type(value).__name__} field")


def dataclass_sha256(instance: Any, exclude: Iterable[str] = ()) -> str:
    """The hex sha256 of every constructor field of the dataclass ``instance`` except ``exclude``
    (fields computed in ``__post_init__``, ``init=False``, follow from the others and are left out)."""
    skipped = set(exclude)
    digest = hashlib.sha256()
    for field in dataclasses.fields(instance):
        if field.init and field.name not in skipped:
            digest.update(f"field {field.name}\n".encode())
            _feed(digest, getattr(instance, field.name))
    return digest.hexdigest()


def placement_digest(placement: np.ndarray) -> bytes:
    """The sha256 (32 bytes) of ``placement``'s device indices as int64: a key for remembering
    placements whose size does not grow with the graph (a row of a 100,000-op graph is 800 kB)."""
    return hashlib.sha256(np.ascontiguousarray(placement, dtype=np.int64)).digest()
