"""Fused attention: the ONNX ops of one attention (scores, scale, masks, softmax, weighted sum) run
as one ``torch.nn.functional.scaled_dot_product_attention`` call in the real executor.

An exported transformer spells attention out as ops: ``S = MatMul(Q, K^T)``, then optionally a scale
(``Div`` or ``Mul`` by a one-element constant), then optionally masks (``Add`` of an additive mask,
``Where(keep, S, fill)`` or ``Where(drop, fill, S)`` with a very negative constant ``fill``), then
``P = Softmax(axis=-1)``, then ``O = MatMul(P, V)``. `find_attention` finds such chains in a program
whose inner values nothing else reads; the executor (`placement_gym.real.executor`) runs the chain as
one call at the place of its last op when all its ops run in one unit of one device (and, in training,
one block), so torch picks its fused kernel (FlashAttention or memory-efficient attention on a GPU)
and the scores are never materialised. The other ops of the chain then do nothing.

When the shapes do not suit the fused call (batch dimensions that differ between Q, K and V), the
function computes the same maths op by op.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# A Where's fill at or below this counts as "masked out" (exports use -inf, the dtype's lowest or -1e4..-1e9).
MASK_FILL_LIMIT = -1e4


@dataclass(frozen=True)
class Attention:
    """One attention chain of a program. ``ops``: its op indices in program order, the last the
    weighted sum (``O = MatMul(P, V)``); ``q``, ``kt``, ``v``: the input slots (op, input index) of Q,
    K^T and V; ``scale``: the product of the chain's scale factors; ``masks``: per mask op, its kind
    (``"add"``, ``"keep"``: keep where true, ``"drop"``: drop where true) and the input slot of the
    mask."""

    ops: tuple[int, ...]
    q: tuple[int, int]
    kt: tuple[int, int]
    v: tuple[int, int]
    scale: float
    masks: tuple[tuple[str, tuple[int, int]], ...]


def find_attention(program: Any) -> list[Attention]:
    """Every attention chain of ``program`` (`placement_gym.real.program.Program`) that can run as one
    call: each value inside it read by the next op of the chain alone, none a graph output."""
    p = program
    producer = {name: k for k in range(len(p.outputs)) for name in p.outputs[k] if name}
    outputs = set(p.output_names)

    def tensor_input(k: int, i: int) -> int | None:
        source = p.sources[k][i] if i < len(p.sources[k]) else None
        if source and source[0] == "tensor" and source[1] in producer and source[1] not in p.shared:
            return producer[source[1]]
        return None

    def only_reader(k: int) -> int | None:
        """The op that alone reads op k's one output (None if several ops or a graph output read it)."""
        names = [name for name in p.outputs[k] if name]
        if len(names) != 1 or names[0] in outputs:
            return None
        readers = p.consumers.get(names[0], [])
        return readers[0] if len(readers) == 1 else None

    def scalar_constant(k: int, i: int) -> float | None:
        source = p.sources[k][i] if i < len(p.sources[k]) else None
        if source and source[0] == "const":
            value = p.const_overrides.get((k, i), p.constants.get(source[1]))
            if value is not None and value.size == 1:
                return float(value.reshape(-1)[0])
        return None

    found = []
    for softmax, op_type in enumerate(p.op_types):
        if op_type != "Softmax" or p.attrs[softmax].get("axis", -1) != -1 or p.attrs[softmax]["_opset"] < 13:
            continue
        weighted = only_reader(softmax)
        if weighted is None or p.op_types[weighted] != "MatMul" or tensor_input(weighted, 0) != softmax:
            continue
        chain, scale, masks, scaled = [softmax, weighted], 1.0, [], False
        k = tensor_input(softmax, 0)
        while k is not None and only_reader(k) == chain[0]:
            kind = p.op_types[k]
            if kind == "MatMul":
                if tensor_input(k, 0) is None or tensor_input(k, 1) is None:
                    break
                found.append(Attention(ops=(k, *chain), q=(k, 0), kt=(k, 1), v=(weighted, 1), scale=scale,
                                       masks=tuple(reversed(masks))))
                break
            chain.insert(0, k)
            if kind in ("Div", "Mul"):
                factor = scalar_constant(k, 1)
                if factor is None or factor == 0 or tensor_input(k, 0) is None:
                    break
                scale *= 1.0 / factor if kind == "Div" else factor
                scaled = True
                k = tensor_input(k, 0)
            elif kind in ("Add", "Where") and scaled:
                break  # a mask before a scale would be scaled too: only masks after the scales
            elif kind == "Add":
                chained = [i for i in (0, 1) if tensor_input(k, i) is not None
                           and only_reader(tensor_input(k, i)) == k]
                if len(chained) != 1 or p.sources[k][1 - chained[0]] is None:
                    break
                masks.append(("add", (k, 1 - chained[0])))
                k = tensor_input(k, chained[0])
            elif kind == "Where":
                fills = {i: scalar_constant(k, i) for i in (1, 2)}
                side = next((i for i in (1, 2) if fills[3 - i] is not None and fills[3 - i] <= MASK_FILL_LIMIT
                             and tensor_input(k, i) is not None), None)
                if side is None or p.sources[k][0] is None:
                    break
                masks.append(("keep" if side == 1 else "drop", (k, 0)))
                k = tensor_input(k, side)
            else:
                break
    return found


def attention_call(attention: Attention) -> Any:
    """The torch function of a fused chain: ``fn(args, attrs)`` with ``args`` [Q, K^T, V, mask...]
    (the masks in the chain's order), giving ``O``."""
    import torch
    import torch.nn.functional as F

    kinds = [kind for kind, _ in attention.masks]
    scale = attention.scale

    def run(args: list[Any], attrs: dict[str, Any]) -> Any:
        q, kt, v, *masks = args
        additive = None
        for kind, mask in zip(kinds, masks, strict=True):
            if kind == "add":
                term = mask.to(q.dtype)
            else:
                keep = mask.to(torch.bool) if kind == "keep" else ~mask.to(torch.bool)
                term = torch.zeros(keep.shape, dtype=q.dtype, device=q.device).masked_fill(~keep, -math.inf)
            additive = term if additive is None else additive + term
        k = kt.transpose(-2, -1)
        if q.dim() >= 2 and q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
            return F.scaled_dot_product_attention(q, k, v, attn_mask=additive, scale=scale)
        scores = torch.matmul(q, kt) * scale
        if additive is not None:
            scores = scores + additive
        return torch.matmul(torch.softmax(scores, dim=-1), v)

    return run
