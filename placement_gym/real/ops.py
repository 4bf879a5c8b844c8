"""The ONNX-op -> torch-function table of the real-hardware executor.

Every entry is ``fn(inputs, attrs) -> Tensor | tuple[Tensor, ...]``: ``inputs`` are the node's inputs
in ONNX order (``None`` for an omitted optional input), ``attrs`` its attributes as Python values
(strings decoded) plus two entries the executor adds: ``"_opset"`` (the default-domain opset of the
model) and ``"_n_outputs"`` (how many outputs the node declares). Integer inputs that ONNX uses as
shapes, axes or indices (Reshape's shape, Slice's starts, ...) arrive as CPU tensors, so reading
them never waits on a GPU. The functions are differentiable where ONNX's op is, so the executor can
take the gradient of each op on its own device.

This module imports torch: import it only from code that runs with the real-hardware extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

OpFunction = Callable[[list[Any], dict[str, Any]], Any]

# ONNX TensorProto element types -> torch dtypes (the types a compute graph carries).
ONNX_TO_TORCH_DTYPE: dict[int, torch.dtype] = {
    1: torch.float32, 2: torch.uint8, 3: torch.int8, 5: torch.int16, 6: torch.int32, 7: torch.int64,
    9: torch.bool, 10: torch.float16, 11: torch.float64, 16: torch.bfloat16,
}


def _ints(value: Any) -> list[int]:
    """An integer input or attribute (tensor, list or scalar) as a list of Python ints."""
    if value is None:
        return []
    if isinstance(value, torch.Tensor):
        return [int(v) for v in value.reshape(-1).tolist()]
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _same_device(x: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``x`` on ``like``'s device (constants may live on the CPU; see the module docstring)."""
    return x if x.device == like.device else x.to(like.device)


# --- element-wise ---------------------------------------------------------------------------------


def _binary(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        a, b = inputs[0], inputs[1]
        if a.dim() == 0 and b.dim() > 0:  # keep the tensor with a real shape as the anchor
            return fn(_same_device(a, b), b)
        return fn(a, _same_device(b, a))
    return op


def _unary(fn: Callable[[torch.Tensor], torch.Tensor]) -> OpFunction:
    return lambda inputs, attrs: fn(inputs[0])


def _variadic(fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], mean: bool = False) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        result = inputs[0]
        for x in inputs[1:]:
            result = fn(result, _same_device(x, result))
        return result / len(inputs) if mean else result
    return op


def _div(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if not a.is_floating_point() and not b.is_floating_point():
        return torch.div(a, b, rounding_mode="trunc")  # ONNX integer Div truncates, as C does
    return a / b


def _pow(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    base, exponent = inputs[0], inputs[1]
    if exponent.numel() == 1:  # a scalar exponent (LRN's 0.75): no broadcast tensor needed
        return torch.pow(base, exponent.reshape(()).item() if exponent.device.type == "cpu" else exponent)
    return torch.pow(base, _same_device(exponent, base))


def _gelu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.gelu(inputs[0], approximate=attrs.get("approximate", "none"))


def _clip(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    low = inputs[1] if len(inputs) > 1 and inputs[1] is not None else attrs.get("min")
    high = inputs[2] if len(inputs) > 2 and inputs[2] is not None else attrs.get("max")
    low = low.item() if isinstance(low, torch.Tensor) else low
    high = high.item() if isinstance(high, torch.Tensor) else high
    return torch.clamp(x, min=low, max=high)


def _cast(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    to = attrs["to"]
    if to not in ONNX_TO_TORCH_DTYPE:
        raise NotImplementedError(f"Cast to ONNX element type {to} is not supported by the torch executor")
    return inputs[0].to(ONNX_TO_TORCH_DTYPE[to])


def _cast_like(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return inputs[0].to(inputs[1].dtype)


def _where(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    condition, x, y = inputs
    anchor = x if x.dim() >= y.dim() else y
    return torch.where(_same_device(condition, anchor), _same_device(x, anchor), _same_device(y, anchor))


# --- matrix products and convolutions --------------------------------------------------------------


def _gemm(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if attrs.get("transA", 0):
        a = a.t()
    if attrs.get("transB", 0):
        b = b.t()
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    product = a @ b
    if alpha != 1.0:
        product = product * alpha
    if c is None:
        return product
    return product + (c if beta == 1.0 else c * beta)


def _spatial_pads(attrs: dict[str, Any], x: torch.Tensor, kernel: Sequence[int], strides: Sequence[int],
                  dilations: Sequence[int]) -> list[int]:
    """ONNX pads ``[x1_begin, x2_begin, ..., x1_end, ...]`` for the spatial axes, auto_pad resolved."""
    k = len(kernel)
    auto_pad = attrs.get("auto_pad", "NOTSET")
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for size, kernel_size, stride, dilation in zip(x.shape[2:], kernel, strides, dilations, strict=True):
            out = math.ceil(size / stride)
            total = max(0, (out - 1) * stride + (kernel_size - 1) * dilation + 1 - size)
            small, large = total // 2, total - total // 2
            begins.append(large if auto_pad == "SAME_LOWER" else small)
            ends.append(small if auto_pad == "SAME_LOWER" else large)
        return begins + ends
    if auto_pad == "VALID":
        return [0] * (2 * k)
    pads = _ints(attrs.get("pads")) or [0] * (2 * k)
    return pads


def _symmetric_or_padded(x: torch.Tensor, pads: list[int], value: float) -> tuple[torch.Tensor, list[int]]:
    """Torch takes one padding per axis: pad asymmetric cases explicitly, return the per-axis padding."""
    k = len(pads) // 2
    begins, ends = pads[:k], pads[k:]
    if begins == ends:
        return x, begins
    torch_pads: list[int] = []
    for begin, end in zip(reversed(begins), reversed(ends), strict=True):
        torch_pads += [begin, end]
    return F.pad(x, torch_pads, value=value), [0] * k


def _conv(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    kernel = list(w.shape[2:])
    k = len(kernel)
    strides = _ints(attrs.get("strides")) or [1] * k
    dilations = _ints(attrs.get("dilations")) or [1] * k
    pads = _spatial_pads(attrs, x, kernel, strides, dilations)
    x, padding = _symmetric_or_padded(x, pads, 0.0)
    conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}.get(k)
    if conv is None:
        raise NotImplementedError(f"Conv with {k} spatial dimensions is not supported (1, 2 or 3)")
    return conv(x, w, bias, stride=strides, padding=padding, dilation=dilations, groups=attrs.get("group", 1))


def _conv_transpose(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    k = w.dim() - 2
    if attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or "output_shape" in attrs:
        raise NotImplementedError("ConvTranspose with auto_pad SAME_* or output_shape is not supported")
    pads = _ints(attrs.get("pads")) or [0] * (2 * k)
    if pads[:k] != pads[k:]:
        raise NotImplementedError("ConvTranspose with asymmetric pads is not supported")
    conv = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}.get(k)
    if conv is None:
        raise NotImplementedError(f"ConvTranspose with {k} spatial dimensions is not supported")
    return conv(x, w, bias, stride=_ints(attrs.get("strides")) or 1, padding=pads[:k],
                output_padding=_ints(attrs.get("output_padding")) or 0, groups=attrs.get("group", 1),
                dilation=_ints(attrs.get("dilations")) or 1)


# --- pooling and normalisation ---------------------------------------------------------------------


def _pool_common(x: torch.Tensor, attrs: dict[str, Any], pad_value: float):
    kernel = _ints(attrs["kernel_shape"])
    k = len(kernel)
    strides = _ints(attrs.get("strides")) or [1] * k
    dilations = _ints(attrs.get("dilations")) or [1] * k
    pads = _spatial_pads(attrs, x, kernel, strides, dilations)
    return kernel, strides, dilations, pads


def _max_pool(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    kernel, strides, dilations, pads = _pool_common(x, attrs, -math.inf)
    x, padding = _symmetric_or_padded(x, pads, -math.inf)
    pool = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}.get(len(kernel))
    if pool is None:
        raise NotImplementedError(f"MaxPool with {len(kernel)} spatial dimensions is not supported")
    if attrs.get("_n_outputs", 1) > 1:
        raise NotImplementedError("MaxPool's Indices output is not supported by the torch executor")
    return pool(x, kernel, strides, padding, dilations, ceil_mode=bool(attrs.get("ceil_mode", 0)))


def _average_pool(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    kernel, strides, dilations, pads = _pool_common(x, attrs, 0.0)
    if any(d != 1 for d in dilations):
        raise NotImplementedError("AveragePool with dilations is not supported by torch")
    include_pad = bool(attrs.get("count_include_pad", 0))
    k = len(kernel)
    if pads[:k] != pads[k:] and not include_pad and any(pads):
        raise NotImplementedError("AveragePool with asymmetric pads and count_include_pad=0 is not supported")
    x, padding = _symmetric_or_padded(x, pads, 0.0)
    pool = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}.get(k)
    if pool is None:
        raise NotImplementedError(f"AveragePool with {k} spatial dimensions is not supported")
    return pool(x, kernel, strides, padding, ceil_mode=bool(attrs.get("ceil_mode", 0)),
                count_include_pad=include_pad)


def _global_pool(reduce: Callable[..., torch.Tensor]) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        x = inputs[0]
        return reduce(x, dim=tuple(range(2, x.dim())), keepdim=True)
    return op


def _batch_norm(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, scale, bias, mean, var = inputs
    if attrs.get("training_mode", 0):
        raise NotImplementedError("BatchNormalization with training_mode=1 is not supported")
    # Inference-mode normalisation: running statistics are state, not trained (no gradient flows to them).
    return F.batch_norm(x, mean.detach(), var.detach(), scale, bias, training=False,
                        eps=attrs.get("epsilon", 1e-5))


def _layer_norm(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    axis = _axis(attrs.get("axis", -1), x.dim())
    shape = tuple(x.shape[axis:])
    if tuple(scale.shape) != shape:
        scale = scale.expand(shape)
    if bias is not None and tuple(bias.shape) != shape:
        bias = bias.expand(shape)
    return F.layer_norm(x, shape, scale, bias, eps=attrs.get("epsilon", 1e-5))


def _softmax_like(fn: Callable[..., torch.Tensor]) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        x = inputs[0]
        if attrs.get("_opset", 13) >= 13:
            return fn(x, dim=attrs.get("axis", -1))
        # Before opset 13 the input is coerced to 2-D at `axis` (default 1) and normalised per row.
        axis = _axis(attrs.get("axis", 1), x.dim())
        return fn(x.reshape(math.prod(x.shape[:axis]), -1), dim=1).reshape(x.shape)
    return op


# --- reductions -----------------------------------------------------------------------------------


def _reduce(fn: Callable[..., torch.Tensor], axes_input_opset: int = 18) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        x = inputs[0]
        if attrs.get("_opset", 18) >= axes_input_opset:
            axes = _ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else []
        else:
            axes = _ints(attrs.get("axes"))
        keepdims = bool(attrs.get("keepdims", 1))
        if not axes:
            if attrs.get("noop_with_empty_axes", 0):
                return x
            axes = list(range(x.dim()))
        return fn(x, dim=tuple(_axis(a, x.dim()) for a in axes), keepdim=keepdims)
    return op


def _reduce_max(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.amax(x, dim=dim, keepdim=keepdim)


def _reduce_min(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.amin(x, dim=dim, keepdim=keepdim)


def _reduce_sum_square(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.sum(x * x, dim=dim, keepdim=keepdim)


# --- data movement --------------------------------------------------------------------------------


def _reshape(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    shape = _ints(inputs[1])
    if not attrs.get("allowzero", 0):  # 0 copies the input's dimension
        shape = [x.shape[i] if s == 0 else s for i, s in enumerate(shape)]
    return x.reshape(shape)


def _flatten(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    axis = _axis(attrs.get("axis", 1), x.dim())
    return x.reshape(math.prod(x.shape[:axis]), -1)


def _transpose(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    perm = _ints(attrs.get("perm")) or list(range(x.dim()))[::-1]
    return x.permute(perm)


def _axes(inputs: list[Any], attrs: dict[str, Any], opset_with_input: int = 13) -> list[int]:
    if attrs.get("_opset", 13) >= opset_with_input:
        return _ints(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else []
    return _ints(attrs.get("axes"))


def _squeeze(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    axes = _axes(inputs, attrs)
    if not axes:
        return x.squeeze()
    return x.squeeze(tuple(_axis(a, x.dim()) for a in axes))


def _unsqueeze(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    axes = _axes(inputs, attrs)
    rank = x.dim() + len(axes)
    for a in sorted(_axis(a, rank) for a in axes):
        x = x.unsqueeze(a)
    return x


def _concat(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    parts = [x for x in inputs if x is not None]
    anchor = max(parts, key=lambda t: t.dim())
    return torch.cat([_same_device(p, anchor) for p in parts], dim=attrs["axis"])


def _split(inputs: list[Any], attrs: dict[str, Any]) -> tuple[torch.Tensor, ...]:
    x = inputs[0]
    axis = _axis(attrs.get("axis", 0), x.dim())
    if len(inputs) > 1 and inputs[1] is not None:
        sizes: list[int] | int = _ints(inputs[1])
    elif "split" in attrs:
        sizes = _ints(attrs["split"])
    else:
        n = attrs.get("num_outputs", attrs.get("_n_outputs", 1))
        sizes = math.ceil(x.shape[axis] / n)  # ONNX: equal parts, the last one smaller if uneven
    return tuple(torch.split(x, sizes, dim=axis))


def _slice(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    if attrs.get("_opset", 13) >= 10:
        starts, ends = _ints(inputs[1]), _ints(inputs[2])
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts)))
        steps = _ints(inputs[4]) if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts)
    else:
        starts, ends = _ints(attrs["starts"]), _ints(attrs["ends"])
        axes = _ints(attrs.get("axes")) or list(range(len(starts)))
        steps = [1] * len(starts)
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        axis = _axis(axis, x.dim())
        size = x.shape[axis]
        # Python's slice clamping is ONNX's (ends beyond the axis, INT64_MAX, negative indices).
        begin, stop, stride = slice(start, end, step).indices(size)
        if stride == 1:
            x = x.narrow(axis, begin, max(0, stop - begin))
        else:
            x = x.index_select(axis, torch.arange(begin, stop, stride, device=x.device))
    return x


def _gather(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    data, indices = inputs[0], inputs[1]
    axis = _axis(attrs.get("axis", 0), data.dim())
    indices = _same_device(indices, data).long()
    size = data.shape[axis]
    indices = torch.where(indices < 0, indices + size, indices)
    picked = data.index_select(axis, indices.reshape(-1))
    return picked.reshape(*data.shape[:axis], *indices.shape, *data.shape[axis + 1:])


def _pad(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    if attrs.get("_opset", 13) >= 11:
        pads = _ints(inputs[1])
        value = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
        has_value = isinstance(value, torch.Tensor) and value.numel() > 0
        value = float(value.reshape(-1)[0].item()) if has_value else 0.0
        axes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else list(range(x.dim()))
    else:
        pads, value, axes = _ints(attrs["pads"]), float(attrs.get("value", 0.0)), list(range(x.dim()))
    k = len(axes)
    begins, ends = [0] * x.dim(), [0] * x.dim()
    for i, axis in enumerate(axes):
        begins[_axis(axis, x.dim())], ends[_axis(axis, x.dim())] = pads[i], pads[k + i]
    mode = {"constant": "constant", "reflect": "reflect", "edge": "replicate", "wrap": "circular"}.get(
        attrs.get("mode", "constant"))
    if mode is None:
        raise NotImplementedError(f"Pad mode {attrs.get('mode')!r} is not supported")
    torch_pads: list[int] = []
    last = max([d for d in range(x.dim()) if begins[d] or ends[d]], default=-1)
    first = min([d for d in range(x.dim()) if begins[d] or ends[d]], default=x.dim())
    if mode != "constant" and first < 2 and last >= 0:
        raise NotImplementedError(f"Pad mode {mode!r} on the batch or channel axis is not supported by torch")
    for d in range(x.dim() - 1, first - 1, -1):
        torch_pads += [begins[d], ends[d]]
    if not torch_pads:
        return x
    return F.pad(x, torch_pads, mode=mode, value=value if mode == "constant" else None)


def _expand(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, shape = inputs[0], _ints(inputs[1])
    rank = max(x.dim(), len(shape))
    shape = [1] * (rank - len(shape)) + shape
    current = [1] * (rank - x.dim()) + list(x.shape)
    target = [c if s == 1 else s for c, s in zip(current, shape, strict=True)]  # ONNX broadcasts both ways
    return x.reshape(current).expand(target)


def _tile(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return inputs[0].repeat(_ints(inputs[1]))


def _shape(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    dims = list(inputs[0].shape)
    start, end = attrs.get("start", 0), attrs.get("end")
    return torch.tensor(dims[start:end], dtype=torch.int64)


def _identity(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return inputs[0]


def _dropout(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    # Inference semantics (training_mode defaults to false): the identity. The mask output is not kept.
    return inputs[0]


def _constant(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    from onnx import numpy_helper

    if "value" in attrs:
        return torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy())
    for key, dtype in (("value_float", torch.float32), ("value_int", torch.int64),
                       ("value_floats", torch.float32), ("value_ints", torch.int64)):
        if key in attrs:
            return torch.tensor(attrs[key], dtype=dtype)
    raise NotImplementedError(f"Constant with attributes {sorted(attrs)} is not supported")


def _constant_of_shape(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    from onnx import numpy_helper

    value = torch.from_numpy(numpy_helper.to_array(attrs["value"]).copy()) if "value" in attrs else (
        torch.zeros(1))
    return torch.full(_ints(inputs[0]), value.reshape(-1)[0].item(), dtype=value.dtype)


def _range(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    start, limit, delta = (x.reshape(()).item() for x in inputs)
    dtype = inputs[0].dtype
    return torch.arange(start, limit, delta, dtype=dtype, device=inputs[0].device)


def _einsum(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return torch.einsum(attrs["equation"], *inputs)


def _leaky_relu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.leaky_relu(inputs[0], attrs.get("alpha", 0.01))


def _elu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.elu(inputs[0], attrs.get("alpha", 1.0))


def _hard_sigmoid(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return torch.clamp(inputs[0] * attrs.get("alpha", 0.2) + attrs.get("beta", 0.5), 0.0, 1.0)



def _hard_swish(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.hardswish(inputs[0])


def _prelu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, slope = inputs[0], _same_device(inputs[1], inputs[0])
    # ONNX broadcasts the slope (numpy rules); torch's prelu wants one value per channel.
    return torch.where(x >= 0, x, x * slope)


def _selu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    alpha = attrs.get("alpha", 1.67326319217681884765625)  # ONNX's defaults, as float32 holds them
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    x = inputs[0]
    return gamma * torch.where(x > 0, x, alpha * torch.expm1(x))


def _celu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.celu(inputs[0], attrs.get("alpha", 1.0))


def _thresholded_relu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    return torch.where(x > attrs.get("alpha", 1.0), x, torch.zeros_like(x))


def _mish(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return F.mish(inputs[0])


def _is_inf(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    positive, negative = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    if positive and negative:
        return torch.isinf(x)
    if positive:
        return torch.isposinf(x)
    return torch.isneginf(x) if negative else torch.zeros_like(x, dtype=torch.bool)


def _mod(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    a, b = inputs[0], _same_device(inputs[1], inputs[0])
    # fmod=1: the sign of the dividend (C's fmod); fmod=0 (integers only): the sign of the divisor.
    return torch.fmod(a, b) if attrs.get("fmod", 0) else torch.remainder(a, b)


def _cum_sum(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x = inputs[0]
    axis = _axis(_ints(inputs[1])[0], x.dim())
    if attrs.get("reverse", 0):
        x = x.flip(axis)
    total = torch.cumsum(x, dim=axis)
    if attrs.get("exclusive", 0):
        total = total - x  # the sum of the elements before each one, not including it
    return total.flip(axis) if attrs.get("reverse", 0) else total


def _trilu(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    k = _ints(inputs[1])[0] if len(inputs) > 1 and inputs[1] is not None else 0
    return torch.triu(inputs[0], k) if attrs.get("upper", 1) else torch.tril(inputs[0], k)


def _size(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    return torch.tensor(inputs[0].numel(), dtype=torch.int64)


def _index_tuple(indices: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The last axis of ONNX index tuples as one index tensor per indexed axis (torch's advanced
    indexing takes negative indices as ONNX does: counted from the end)."""
    return tuple(indices[..., i] for i in range(indices.shape[-1]))


def _gather_nd(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    data, indices = inputs[0], _same_device(inputs[1], inputs[0]).long()
    b = attrs.get("batch_dims", 0)
    if b == 0:
        return data[_index_tuple(indices)]
    batch = data.shape[:b]
    flat_data = data.reshape(-1, *data.shape[b:])
    flat_indices = indices.reshape(-1, *indices.shape[b:])
    rows = torch.arange(flat_data.shape[0], device=data.device).reshape(-1, *[1] * (flat_indices.dim() - 2))
    picked = flat_data[(rows, *_index_tuple(flat_indices))]
    return picked.reshape(*batch, *picked.shape[1:])


_SCATTER_REDUCE = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}


def _scatter_nd(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    data, indices, updates = inputs[0], _same_device(inputs[1], inputs[0]).long(), inputs[2]
    updates = _same_device(updates, data)
    reduction = attrs.get("reduction", "none")
    if reduction == "none":
        return data.index_put(_index_tuple(indices), updates)
    # Reductions through scatter_reduce on the indexed axes flattened into one.
    m = indices.shape[-1]
    lead, rest = data.shape[:m], data.shape[m:]
    strides = torch.tensor([math.prod(lead[i + 1:]) for i in range(m)], device=data.device)
    sizes = torch.tensor(list(lead), device=data.device)
    linear = ((indices % sizes) * strides).sum(-1).reshape(-1)
    flat = data.reshape(math.prod(lead), -1)
    values = updates.reshape(linear.numel(), -1)
    index = linear.reshape(-1, 1).expand(-1, flat.shape[1])
    return flat.scatter_reduce(0, index, values, reduce=_SCATTER_REDUCE[reduction]).reshape(*lead, *rest)


def _gather_elements(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    data, indices = inputs[0], _same_device(inputs[1], inputs[0]).long()
    axis = _axis(attrs.get("axis", 0), data.dim())
    indices = torch.where(indices < 0, indices + data.shape[axis], indices)
    return torch.gather(data, axis, indices)


def _scatter_elements(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    data, indices = inputs[0], _same_device(inputs[1], inputs[0]).long()
    updates = _same_device(inputs[2], data)
    axis = _axis(attrs.get("axis", 0), data.dim())
    indices = torch.where(indices < 0, indices + data.shape[axis], indices)
    reduction = attrs.get("reduction", "none")
    if reduction == "none":
        return data.scatter(axis, indices, updates)
    return data.scatter_reduce(axis, indices, updates, reduce=_SCATTER_REDUCE[reduction])


def _arg_reduce(largest: bool) -> OpFunction:
    def op(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
        x = inputs[0]
        axis = _axis(attrs.get("axis", 0), x.dim())
        keepdims = bool(attrs.get("keepdims", 1))
        if attrs.get("select_last_index", 0):
            # The last of equal extremes: the first one of the reversed axis, counted from the end.
            flipped = torch.argmax(x.flip(axis), dim=axis, keepdim=keepdims) if largest else (
                torch.argmin(x.flip(axis), dim=axis, keepdim=keepdims))
            return x.shape[axis] - 1 - flipped
        return torch.argmax(x, dim=axis, keepdim=keepdims) if largest else (
            torch.argmin(x, dim=axis, keepdim=keepdims))
    return op


def _top_k(inputs: list[Any], attrs: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
    x, k = inputs[0], _ints(inputs[1])[0]
    axis = _axis(attrs.get("axis", -1), x.dim())
    values, indices = torch.topk(x, k, dim=axis, largest=bool(attrs.get("largest", 1)),
                                 sorted=bool(attrs.get("sorted", 1)))
    return values, indices


def _one_hot(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    indices, depth, values = inputs[0], int(inputs[1].reshape(-1)[0].item()), inputs[2]
    indices = indices.long()
    indices = torch.where(indices < 0, indices + depth, indices)  # ONNX: negative counts from depth
    inside = (indices >= 0) & (indices < depth)  # an index out of range gives a row of off values
    hot = F.one_hot(indices.clamp(0, depth - 1), depth).bool() & inside[..., None]
    off, on = values.reshape(-1)[0], values.reshape(-1)[1]
    result = torch.where(hot, on.to(hot.device), off.to(hot.device))
    axis = attrs.get("axis", -1)
    return result if axis in (-1, result.dim() - 1) else result.movedim(-1, _axis(axis, result.dim()))


def _instance_norm(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, scale, bias = inputs
    return F.instance_norm(x, weight=scale, bias=bias, eps=attrs.get("epsilon", 1e-5))


def _depth_to_space(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, block = inputs[0], attrs["blocksize"]
    if attrs.get("mode", "DCR") == "CRD":
        return F.pixel_shuffle(x, block)
    n, c, h, w = x.shape
    # DCR: the depth is (block, block, channels), in that order.
    x = x.reshape(n, block, block, c // (block * block), h, w).permute(0, 3, 4, 1, 5, 2)
    return x.reshape(n, c // (block * block), h * block, w * block)


def _space_to_depth(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    x, block = inputs[0], attrs["blocksize"]
    n, c, h, w = x.shape
    x = x.reshape(n, c, h // block, block, w // block, block).permute(0, 3, 5, 1, 2, 4)
    return x.reshape(n, c * block * block, h // block, w // block)


def _reduce_prod(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    for d in sorted(dim, reverse=True):  # torch.prod takes one axis at a time
        x = torch.prod(x, dim=d, keepdim=keepdim)
    return x


def _reduce_l1(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.sum(torch.abs(x), dim=dim, keepdim=keepdim)


def _reduce_l2(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.sqrt(torch.sum(x * x, dim=dim, keepdim=keepdim))


def _reduce_log_sum(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.log(torch.sum(x, dim=dim, keepdim=keepdim))


def _reduce_log_sum_exp(x: torch.Tensor, dim: tuple[int, ...], keepdim: bool) -> torch.Tensor:
    return torch.logsumexp(x, dim=dim, keepdim=keepdim)


# Resize (opset 11+): the (mode, coordinate transformation, nearest rounding) combinations that are
# one of torch's interpolations. torch's "nearest" maps output pixel x to floor(x / scale), ONNX's
# asymmetric + floor; "nearest-exact" to floor((x + 0.5) / scale), ONNX's half_pixel + round_prefer_ceil.
_RESIZE_NEAREST = {("asymmetric", "floor"): "nearest", ("half_pixel", "round_prefer_ceil"): "nearest-exact",
                   ("pytorch_half_pixel", "round_prefer_ceil"): "nearest-exact"}
_RESIZE_SMOOTH = {"linear": {1: "linear", 2: "bilinear", 3: "trilinear"}, "cubic": {2: "bicubic"}}
_RESIZE_ALIGN = {"half_pixel": False, "pytorch_half_pixel": False, "align_corners": True}


def resize_mode(attrs: dict[str, Any]) -> str | None:
    """Why the torch executor cannot run a Resize with these attributes, or None when it can."""
    mode = attrs.get("mode", "nearest")
    transform = attrs.get("coordinate_transformation_mode", "half_pixel")
    if attrs.get("antialias", 0) or attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        return "Resize with antialias or keep_aspect_ratio_policy is not supported"
    if attrs.get("_opset", 13) < 11:
        return "Resize before opset 11 is not supported"
    if mode == "nearest":
        key = (transform, attrs.get("nearest_mode", "round_prefer_floor"))
        if key not in _RESIZE_NEAREST:
            return (f"Resize nearest with coordinate_transformation_mode={key[0]!r} and "
                    f"nearest_mode={key[1]!r} is not supported; allowed: asymmetric+floor, "
                    "half_pixel+round_prefer_ceil")
        return None
    if mode not in _RESIZE_SMOOTH or transform not in _RESIZE_ALIGN:
        return (f"Resize mode {mode!r} with coordinate_transformation_mode {transform!r} is not supported; "
                "allowed: linear or cubic with half_pixel, pytorch_half_pixel or align_corners")
    if mode == "cubic" and (attrs.get("cubic_coeff_a", -0.75) != -0.75 or attrs.get("exclude_outside", 0)):
        return ("Resize cubic is supported with cubic_coeff_a=-0.75 and exclude_outside=0 only "
                "(torch's bicubic)")
    return None


def _resize(inputs: list[Any], attrs: dict[str, Any]) -> torch.Tensor:
    problem = resize_mode(attrs)
    if problem:
        raise NotImplementedError(problem)
    x = inputs[0]
    scales = [float(v) for v in inputs[2].reshape(-1).tolist()] if (
        len(inputs) > 2 and inputs[2] is not None and inputs[2].numel()) else []
    sizes = _ints(inputs[3]) if len(inputs) > 3 and inputs[3] is not None else []
    axes = [_axis(a, x.dim()) for a in _ints(attrs.get("axes"))] or list(range(x.dim()))
    spatial = x.dim() - 2
    full_scales, full_sizes = [1.0] * x.dim(), list(x.shape)
    for i, axis in enumerate(axes):
        if scales:
            full_scales[axis] = scales[i]
        if sizes:
            full_sizes[axis] = sizes[i]
    if full_scales[:2] != [1.0, 1.0] or full_sizes[:2] != list(x.shape[:2]):
        raise NotImplementedError("Resize of the batch or channel axis is not supported by torch")
    mode = attrs.get("mode", "nearest")
    if mode == "nearest":
        torch_mode, align = _RESIZE_NEAREST[(attrs.get("coordinate_transformation_mode", "half_pixel"),
                                             attrs.get("nearest_mode", "round_prefer_floor"))], None
    else:
        torch_mode = _RESIZE_SMOOTH[mode].get(spatial)
        if torch_mode is None:
            raise NotImplementedError(f"Resize {mode} of {spatial} spatial axes is not supported by torch")
        align = _RESIZE_ALIGN[attrs.get("coordinate_transformation_mode", "half_pixel")]
    if sizes:
        return F.interpolate(x, size=full_sizes[2:], mode=torch_mode, align_corners=align)
    # With scales ONNX maps coordinates by the scale itself, not by the ratio of the rounded sizes.
    return F.interpolate(x, scale_factor=full_scales[2:], mode=torch_mode, align_corners=align,
                         recompute_scale_factor=False)


OP_TABLE: dict[str, OpFunction] = {
    # element-wise arithmetic (NumPy broadcasting, as ONNX)
    "Add": _binary(torch.add), "Sub": _binary(torch.sub), "Mul": _binary(torch.mul), "Div": _binary(_div),
    "Pow": _pow, "Max": _variadic(torch.maximum), "Min": _variadic(torch.minimum),
    "Sum": _variadic(torch.add), "Mean": _variadic(torch.add, mean=True),
    "Equal": _binary(torch.eq), "Less": _binary(torch.lt), "Greater": _binary(torch.gt),
    "LessOrEqual": _binary(torch.le), "GreaterOrEqual": _binary(torch.ge),
    "And": _binary(torch.logical_and), "Or": _binary(torch.logical_or), "Xor": _binary(torch.logical_xor),
    "Not": _unary(torch.logical_not), "Where": _where,
    "Neg": _unary(torch.neg), "Abs": _unary(torch.abs), "Exp": _unary(torch.exp), "Log": _unary(torch.log),
    "Sqrt": _unary(torch.sqrt), "Reciprocal": _unary(torch.reciprocal), "Erf": _unary(torch.erf),
    "Sign": _unary(torch.sign), "Floor": _unary(torch.floor), "Ceil": _unary(torch.ceil),
    "Sin": _unary(torch.sin), "Cos": _unary(torch.cos),
    "Relu": _unary(torch.relu), "Sigmoid": _unary(torch.sigmoid), "Tanh": _unary(torch.tanh),
    "Softplus": _unary(F.softplus), "LeakyRelu": _leaky_relu, "Elu": _elu, "HardSigmoid": _hard_sigmoid,
    "Gelu": _gelu, "Clip": _clip, "Cast": _cast, "CastLike": _cast_like, "Identity": _identity,
    "Dropout": _dropout,
    # products and convolutions
    "MatMul": _binary(torch.matmul), "Gemm": _gemm, "Einsum": _einsum, "Conv": _conv,
    "ConvTranspose": _conv_transpose,
    # pooling, normalisation
    "MaxPool": _max_pool, "AveragePool": _average_pool,
    "GlobalAveragePool": _global_pool(torch.mean), "GlobalMaxPool": _global_pool(torch.amax),
    "BatchNormalization": _batch_norm, "LayerNormalization": _layer_norm,
    "Softmax": _softmax_like(torch.softmax), "LogSoftmax": _softmax_like(torch.log_softmax),
    # reductions (axes became an input in opset 18; ReduceSum in opset 13)
    "ReduceMean": _reduce(torch.mean), "ReduceSum": _reduce(torch.sum, axes_input_opset=13),
    "ReduceMax": _reduce(_reduce_max), "ReduceMin": _reduce(_reduce_min),
    "ReduceSumSquare": _reduce(_reduce_sum_square),
    # data movement and shapes
    "Reshape": _reshape, "Flatten": _flatten, "Transpose": _transpose, "Squeeze": _squeeze,
    "Unsqueeze": _unsqueeze, "Concat": _concat, "Split": _split, "Slice": _slice, "Gather": _gather,
    "Pad": _pad, "Expand": _expand, "Tile": _tile, "Shape": _shape, "Constant": _constant,
    "ConstantOfShape": _constant_of_shape, "Range": _range,
    # what Hugging Face and torchvision-style exports add (attention masks, positions, detection heads)
    "GatherND": _gather_nd, "ScatterND": _scatter_nd, "GatherElements": _gather_elements,
    "ScatterElements": _scatter_elements, "CumSum": _cum_sum, "Trilu": _trilu, "Mod": _mod,
    "IsNaN": _unary(torch.isnan), "IsInf": _is_inf, "Size": _size, "Resize": _resize,
    "HardSwish": _hard_swish, "PRelu": _prelu, "Selu": _selu, "Celu": _celu, "Mish": _mish,
    "ThresholdedRelu": _thresholded_relu, "Softsign": _unary(F.softsign), "Round": _unary(torch.round),
    "Tan": _unary(torch.tan), "Asin": _unary(torch.asin), "Acos": _unary(torch.acos),
    "Atan": _unary(torch.atan), "Sinh": _unary(torch.sinh), "Cosh": _unary(torch.cosh),
    "ArgMax": _arg_reduce(largest=True), "ArgMin": _arg_reduce(largest=False), "TopK": _top_k,
    "OneHot": _one_hot, "InstanceNormalization": _instance_norm, "DepthToSpace": _depth_to_space,
    "SpaceToDepth": _space_to_depth, "ReduceProd": _reduce(_reduce_prod), "ReduceL1": _reduce(_reduce_l1),
    "ReduceL2": _reduce(_reduce_l2), "ReduceLogSum": _reduce(_reduce_log_sum),
    "ReduceLogSumExp": _reduce(_reduce_log_sum_exp),
}


def _attribute_problem(op_type: str, attrs: dict[str, Any]) -> str | None:
    """Attribute combinations that the op's torch function refuses, known before it runs."""
    if op_type == "Resize":
        return resize_mode(attrs)
    if op_type == "Pad" and attrs.get("mode", "constant") not in ("constant", "reflect", "edge", "wrap"):
        return f"Pad mode {attrs['mode']!r} is not supported; allowed: constant, reflect, edge, wrap"
    if op_type == "BatchNormalization" and attrs.get("training_mode", 0):
        return "BatchNormalization with training_mode=1 is not supported (export the model in eval mode)"
    if op_type == "MaxPool" and attrs.get("_n_outputs", 1) > 1:
        return "MaxPool's Indices output is not supported by the torch executor"
    if op_type == "Cast" and attrs.get("to") not in ONNX_TO_TORCH_DTYPE:
        return f"Cast to ONNX element type {attrs.get('to')} is not supported by the torch executor"
    if op_type == "ConvTranspose" and (
            attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or "output_shape" in attrs):
        return "ConvTranspose with auto_pad SAME_* or output_shape is not supported"
    if op_type == "AveragePool" and any(d != 1 for d in _ints(attrs.get("dilations"))):
        return "AveragePool with dilations is not supported by torch"
    if op_type in ("ScatterND", "ScatterElements") and (
            attrs.get("reduction", "none") not in ("none", *_SCATTER_REDUCE)):
        return (f"{op_type} reduction {attrs['reduction']!r} is not supported; "
                "allowed: none, add, mul, max, min")
    return None


def unsupported_reason(op_type: str, attrs: dict[str, Any]) -> str | None:
    """Why the torch executor cannot run an op of ``op_type`` with ``attrs`` (the attributes as
    `OP_TABLE` functions get them), in one line; None when it can. Problems that depend on the
    input values (a Pad mode on the channel axis) still surface when the op runs."""
    if op_type not in OP_TABLE:
        return (f"op type {op_type} has no torch function in the real-hardware executor "
                "(placement_gym.real.ops)")
    return _attribute_problem(op_type, attrs)
