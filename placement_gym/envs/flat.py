"""The ``obs_mode="flat"`` observation: the dict observation's arrays in one 1-D float32 vector.

Libraries whose stock policies take nothing but a flat `Box` (tianshou's and RLlib's default
encoders, stable-baselines3's ``MlpPolicy``) read it with no glue. `FlatLayout` says where each
array lies in the vector and turns a vector (or a batch of them) back into the dict.

Order (`FLAT_KEYS`), each array flattened in C (row-major) order: ``node_features``,
``node_mask``, ``edge_index``, ``edge_features``, ``edge_mask``, ``device_features``,
``placement``, ``current``, then ``action_mask`` when the env was made with ``mask_in_obs=True``.
The arrays are padded exactly as in the dict mode (``max_ops`` nodes, ``max_edges`` edges), so
``flat == np.concatenate([dict_obs[key].ravel() for key in FLAT_KEYS]).astype(np.float32)``.

Encodings of the arrays that are not float32 in the dict mode:

* ``edge_index`` (int64 node indices): the index itself as a float32, row 0 (producers) then row 1
  (consumers); exact for indices below 2**24. Its bounds are ``[0, max_nodes - 1]``, the other
  entries' ``[0, 1]``.
* ``action_mask`` (bool): 1.0 for an allowed choice, 0.0 for a masked one.
"""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

FLAT_KEYS: tuple[str, ...] = (
    "node_features",
    "node_mask",
    "edge_index",
    "edge_features",
    "edge_mask",
    "device_features",
    "placement",
    "current",
    "action_mask",
)


class FlatLayout:
    """Where each array of a dict observation space lies in the flat vector (see the module docstring).

    ``dict_space``: the env's dict observation space (`Box` entries only, keys among `FLAT_KEYS`).
    Attributes: ``keys`` (in vector order), ``slices`` (key -> slice of the vector), ``shapes``
    (key -> the array's shape in the dict mode), ``dtypes`` (key -> its dtype there), ``size``
    and ``space`` (the flat `Box`, float32, with per-entry bounds)."""

    def __init__(self, dict_space: spaces.Dict) -> None:
        unknown = sorted(set(dict_space.spaces) - set(FLAT_KEYS))
        if unknown:
            raise ValueError(f"cannot flatten observation keys {unknown}; allowed: {', '.join(FLAT_KEYS)}")
        self.keys: tuple[str, ...] = tuple(key for key in FLAT_KEYS if key in dict_space.spaces)
        self.slices: dict[str, slice] = {}
        self.shapes: dict[str, tuple[int, ...]] = {}
        self.dtypes: dict[str, np.dtype] = {}
        lows, highs = [], []
        start = 0
        for key in self.keys:
            box = dict_space[key]
            size = int(np.prod(box.shape, dtype=np.int64))
            self.slices[key] = slice(start, start + size)
            self.shapes[key] = tuple(box.shape)
            self.dtypes[key] = np.dtype(box.dtype)
            lows.append(np.asarray(box.low, dtype=np.float32).ravel())
            highs.append(np.asarray(box.high, dtype=np.float32).ravel())
            start += size
        self.size = start
        self.space = spaces.Box(np.concatenate(lows), np.concatenate(highs), dtype=np.float32)

    def flatten(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The flat float32 vector of one dict observation."""
        flat = np.empty(self.size, dtype=np.float32)
        for key in self.keys:
            flat[self.slices[key]] = np.asarray(obs[key]).ravel()
        return flat

    def unflatten(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The dict observation of a flat vector, or of a batch ``(..., size)`` of them (each array
        then gets the same leading dimensions). ``edge_index`` comes back as int64 and
        ``action_mask`` as bool, as in the dict mode."""
        flat = np.asarray(flat)
        if flat.ndim == 0 or flat.shape[-1] != self.size:
            raise ValueError(
                f"a flat observation has {self.size} entries in its last dimension, got shape {flat.shape}"
            )
        lead = flat.shape[:-1]
        out = {}
        for key in self.keys:
            part = flat[..., self.slices[key]].reshape(lead + self.shapes[key])
            dtype = self.dtypes[key]
            if dtype == np.bool_:
                out[key] = part > 0.5
            elif np.issubdtype(dtype, np.integer):
                out[key] = np.rint(part).astype(dtype)
            else:
                out[key] = part.astype(dtype)
        return out
