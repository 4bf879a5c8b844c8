"""Import an ONNX model into an `OpGraph`: structure, shape inference and per-op costs.

Which tensors are parameters, data inputs and constants is decided by
`placement_gym.graph.parameters` (the placement-gym metadata key when present; otherwise
initializers and the role each graph input plays in the computation); the shapes of weights a file
reads without declaring them come from `placement_gym.graph.undeclared_weights`. `import_onnx`
returns the graph with that account; `graph_from_onnx` the graph alone.

A parameter used by one op is owned by it (its bytes go to that op's ``param_bytes``). A
parameter used by several ops (weights shared across unrolled time steps, tied embeddings) is owned
by its first consumer in topological order; every other consumer gets an edge from a parameter
tensor produced by the owner, so the cost model sees the weight transfer when they sit on different
devices. Constant nodes are folded away: their values are constants, read by their consumers.

What a file may hold: every text field (node names, op types, tensor names, ...) valid UTF-8 (a
name that is not would be read back as bytes, no longer equal to the same name elsewhere, and
silently cut the edge between them), and every tensor a static shape of dimensions >= 0 and at most
`MAX_TENSOR_BYTES`, an IR version and a default-domain opset in `supported_versions`; anything else
is refused naming the node and the tensor or field. An op type
without a cost formula is named in a warning, whether it is costed by its bytes or, its inputs
having its output's shape, as an element-wise op.
"""

from __future__ import annotations

import gc
import hashlib
import math
import re
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.descriptor import FieldDescriptor
from onnx import TensorProto

from placement_gym.common.untrusted import MAX_ONNX_BYTES, read_bytes, shown
from placement_gym.graph.op_costs import COST_RULES, DEFAULT_DOMAINS, TensorInfo, all_bytes, op_cost
from placement_gym.graph.opgraph import CATEGORY_INDEX, OpGraph
from placement_gym.graph.ordering import stable_topological_order
from placement_gym.graph.parameters import (
    PARAMETERS_METADATA_KEY,
    InputRoles,
    classify_inputs,
    outer_scope_inputs,
    role_warnings,
    subgraphs,
)
from placement_gym.graph.undeclared_weights import derive_shapes

__all__ = [
    "PARAMETERS_METADATA_KEY", "OnnxImport", "ParameterInfo", "graph_from_onnx", "import_onnx",
    "is_constant_node", "node_attributes", "onnx_ops",
]

# Bytes per element of each ONNX element type (4-bit types pack two per byte). Strings have no
# fixed size: counted as 8 bytes (a pointer), they are rare in compute graphs.
_ITEMSIZE: dict[int, float] = {
    TensorProto.FLOAT: 4, TensorProto.UINT8: 1, TensorProto.INT8: 1, TensorProto.UINT16: 2,
    TensorProto.INT16: 2, TensorProto.INT32: 4, TensorProto.INT64: 8, TensorProto.STRING: 8,
    TensorProto.BOOL: 1, TensorProto.FLOAT16: 2, TensorProto.DOUBLE: 8, TensorProto.UINT32: 4,
    TensorProto.UINT64: 8, TensorProto.COMPLEX64: 8, TensorProto.COMPLEX128: 16,
    TensorProto.BFLOAT16: 2,
}
for _name, _size in (("FLOAT8E4M3FN", 1), ("FLOAT8E4M3FNUZ", 1), ("FLOAT8E5M2", 1), ("FLOAT8E5M2FNUZ", 1),
                     ("FLOAT8E8M0", 1), ("UINT4", 0.5), ("INT4", 0.5), ("FLOAT4E2M1", 0.5)):
    if hasattr(TensorProto, _name):  # newer onnx versions only
        _ITEMSIZE[getattr(TensorProto, _name)] = _size

# An exabyte: no tensor of a real model comes near, and sizes stay far from float overflow.
MAX_TENSOR_BYTES = 1e18

_STATIC_SHAPE_HINT = (
    "placement-gym needs a static shape for every tensor that flows between ops: export the model "
    "with a fixed batch size (and sequence length), or fix the dynamic dimensions (for example with "
    "onnx.tools.update_model_dims.update_inputs_outputs_dims) and run onnx.shape_inference.infer_shapes"
)


def _itemsize(elem_type: int, what: str) -> float:
    try:
        return _ITEMSIZE[elem_type]
    except KeyError:
        raise ValueError(f"{what} has an unsupported ONNX element type {elem_type}") from None


# --- loading ----------------------------------------------------------------------------------


def _load(model_or_path: onnx.ModelProto | str | Path, name: str | None) -> tuple[onnx.ModelProto, str, str]:
    """The model, its name and the sha256 of its bytes."""
    if isinstance(model_or_path, onnx.ModelProto):
        model = model_or_path
        data = model.SerializeToString()
        label = "the given ModelProto"
        default_name = model.graph.name or "model"
    elif isinstance(model_or_path, (str, Path)):
        path = Path(model_or_path)
        if not path.is_file():
            raise FileNotFoundError(f"{path} does not exist or is not a file (expected an .onnx file)")
        data = read_bytes(path, MAX_ONNX_BYTES, "ONNX file")  # a regular file, bounded: untrusted input
        label = str(path)
        default_name = path.stem
        try:
            # From bytes: external weight files (if any) are not loaded; only their shapes matter.
            model = onnx.load_model_from_string(data)
        except Exception as error:  # protobuf raises DecodeError, or worse on some inputs
            raise ValueError(f"{path} is not an ONNX model: {error}") from None
    else:
        raise TypeError(
            f"expected an onnx.ModelProto or a path to an .onnx file, got {type(model_or_path).__name__}"
        )
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise ValueError(f"{label} is not an ONNX model: it has no IR version or no graph")
    _check_versions(model, label)
    if len(model.graph.node) == 0:
        raise ValueError(f"{label} has no nodes")
    return model, name or default_name, hashlib.sha256(data).hexdigest()


# IR version 3 (onnx 1.0) is the first that names its opsets; the highest IR version and default-domain
# opset are those the installed onnx package knows (its shape inference and checker define them).
MIN_IR_VERSION = 3
MIN_OPSET = 1


def supported_versions() -> tuple[tuple[int, int], tuple[int, int]]:
    """The IR versions and the default-domain opsets the importer reads, each as (lowest, highest)."""
    return (MIN_IR_VERSION, onnx.IR_VERSION), (MIN_OPSET, onnx.defs.onnx_opset_version())


def _check_versions(model: onnx.ModelProto, label: str) -> None:
    """Refuse an IR version or a default-domain opset outside `supported_versions` (a file from a
    newer onnx, or a forged one): shape inference would read its ops by rules that are not theirs."""
    (low_ir, high_ir), (low_opset, high_opset) = supported_versions()
    installed = f"those of the installed onnx {onnx.__version__}"
    if not low_ir <= model.ir_version <= high_ir:
        raise ValueError(f"{label} declares ONNX IR version {model.ir_version}; placement-gym reads IR "
                         f"versions {low_ir} to {high_ir} ({installed})")
    for opset in model.opset_import:
        if opset.domain in DEFAULT_DOMAINS and not low_opset <= opset.version <= high_opset:
            raise ValueError(f"{label} declares opset {opset.version} of the default ONNX domain; "
                             f"placement-gym reads opsets {low_opset} to {high_opset} ({installed})")


def is_constant_node(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a default-domain Constant: a value, not an op of the graph."""
    return node.op_type == "Constant" and node.domain in DEFAULT_DOMAINS


def _constant_node_info(node: onnx.NodeProto) -> TensorInfo | None:
    """Shape and element size of a Constant node's value, read from its attribute."""
    for attr in node.attribute:
        if attr.name == "value":
            return TensorInfo(tuple(attr.t.dims), _ITEMSIZE.get(attr.t.data_type, 4))
        if attr.name == "sparse_value":
            sparse = attr.sparse_tensor
            return TensorInfo(tuple(sparse.dims), _ITEMSIZE.get(sparse.values.data_type, 4))
        if attr.name in ("value_float", "value_int"):
            return TensorInfo((), 4 if attr.name == "value_float" else 8)
        if attr.name in ("value_floats", "value_ints"):
            n = len(attr.floats) if attr.name == "value_floats" else len(attr.ints)
            return TensorInfo((n,), 4 if attr.name == "value_floats" else 8)
    return None


# --- structure --------------------------------------------------------------------------------


# A cycle's message names this many of its ops (a file may make it as long as the graph).
_CYCLE_OPS_SHOWN = 8


def _topological_order(deps: list[list[int]], names: list[str]) -> list[int]:
    """Stable Kahn order: among ready ops, the one earliest in the file goes first."""
    n = len(deps)
    order = stable_topological_order(deps)
    if len(order) < n:
        # Walk predecessors among the unplaced ops until one repeats: it lies on a cycle.
        remaining = set(range(n)) - set(order)
        node = min(remaining)
        seen: dict[int, int] = {}  # op -> its place in the walk
        while node not in seen:
            seen[node] = len(seen)
            node = next(j for j in deps[node] if j in remaining)
        cycle = list(seen)[seen[node]:][::-1]
        path = " -> ".join(shown(names[i]) for i in cycle[:_CYCLE_OPS_SHOWN])
        path += (f" -> {shown(names[cycle[0]])}" if len(cycle) <= _CYCLE_OPS_SHOWN
                 else f" -> ... -> {shown(names[cycle[0]])}: {len(cycle)} ops")
        raise ValueError(
            f"the ONNX graph has a cycle through op {shown(names[node])} ({path}); "
            "a model graph must be acyclic"
        )
    return order


def onnx_ops(graph: onnx.GraphProto) -> tuple[list[onnx.NodeProto], list[str]]:
    """The ops of an ONNX graph, its non-Constant nodes in file order, and the name each gets in
    `OpGraph.op_names`: the node's name, or ``{op_type}_{its index in the file}`` when it has none,
    made unique with ``_1``, ``_2``, ... suffixes. The one naming rule of the importer and of the
    real-hardware program (`placement_gym.real.program`), which finds each op's node by it."""
    ops: list[onnx.NodeProto] = []
    names: list[str] = []
    seen: set[str] = set()
    # Per name, the suffix to try next: the names taken only grow, so a suffix tried once stays taken
    # (without it, 100,000 nodes of one name would try 5 billion names).
    next_suffix: dict[str, int] = {}
    for i, node in enumerate(graph.node):
        if is_constant_node(node):
            continue
        base = node.name or f"{node.op_type}_{i}"
        candidate, k = base, next_suffix.get(base, 1)
        if candidate in seen:
            candidate = f"{base}_{k}"
        while candidate in seen:
            candidate, k = f"{base}_{k + 1}", k + 1
        next_suffix[base] = k
        seen.add(candidate)
        ops.append(node)
        names.append(candidate)
    return ops, names


# --- shapes -----------------------------------------------------------------------------------


# Constant folding for shape inference only: ONNX's data propagation does not follow every op
# (ConstantOfShape, Range, ... in TorchScript exports), so a shape computed from constants can stay
# unknown. Nodes whose inputs are all known small values are evaluated with onnx.reference and
# replaced by Constant nodes in the copy given to shape inference; the ops themselves stay ops.
_FOLD_MAX_ELEMENTS = 1 << 16
_NOT_FOLDABLE = frozenset({
    "RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
    "Dropout",
})


def _fold_constant_nodes(nodes: list[onnx.NodeProto], initializers: Iterable[onnx.TensorProto],
                         ) -> tuple[list[onnx.NodeProto], int]:
    """`nodes` (topologically sorted) with constant-valued nodes replaced by Constant nodes."""
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    values: dict[str, np.ndarray] = {}
    for tensor in initializers:
        if tensor.data_location != TensorProto.EXTERNAL and math.prod(tensor.dims) <= _FOLD_MAX_ELEMENTS:
            values[tensor.name] = numpy_helper.to_array(tensor)
    folded: list[onnx.NodeProto] = []
    n_folded = 0
    for node in nodes:
        inputs = [n for n in node.input if n]
        foldable = (
            node.domain in DEFAULT_DOMAINS
            and node.op_type not in _NOT_FOLDABLE
            and all(n in values for n in inputs)
            and not any(subgraphs(attr) for attr in node.attribute)
        )
        results = None
        if foldable:
            try:
                results = ReferenceEvaluator(node).run(None, {n: values[n] for n in inputs})
            except Exception:  # an op the reference runtime lacks: leave it to shape inference
                results = None
        if results is None or any(np.asarray(r).size > _FOLD_MAX_ELEMENTS for r in results):
            folded.append(node)
            continue
        for out, result in zip(node.output, results, strict=False):
            if out:
                array = np.asarray(result)
                values[out] = array
                if node.op_type != "Constant":
                    folded.append(onnx.helper.make_node(
                        "Constant", [], [out], value=numpy_helper.from_array(array, name=out)))
        if node.op_type == "Constant":
            folded.append(node)
        else:
            n_folded += 1
    return folded, n_folded


def _run_inference(model: onnx.ModelProto,
                   ) -> tuple[dict[str, onnx.TypeProto], dict[str, TensorInfo | None], str]:
    """Value types after ONNX shape inference, the static shape of each (`_static_info`, None when
    it has none), and the strict-mode error if strict mode failed."""
    strict_error = ""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as error:  # InferenceError, or a checker error on a malformed model
        strict_error = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        try:
            inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
        except Exception:
            inferred = model
    types: dict[str, onnx.TypeProto] = {}
    static: dict[str, TensorInfo | None] = {}
    graph = inferred.graph
    for values in (graph.input, graph.value_info, graph.output):
        for value in values:
            # Keep the first statically shaped declaration of each value (inputs first: they are given).
            name = value.name
            if name not in types:
                types[name] = value.type
                static[name] = _static_info(value.type)
            elif static[name] is None:
                info = _static_info(value.type)
                if info is not None:
                    types[name], static[name] = value.type, info
    return types, static, strict_error


def _with_nodes(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    del copy.graph.node[:]
    copy.graph.node.extend(nodes)
    return copy


def _infer_shapes(model: onnx.ModelProto, sorted_nodes: list[onnx.NodeProto], needed: Iterable[str],
                  file_sorted: bool) -> tuple[dict[str, onnx.TypeProto], dict[str, TensorInfo | None], str]:
    """Value types of the model (nodes given in topological order), their static shapes, and a
    strict-mode error if any.

    Shape inference walks nodes in file order, so it is given a sorted copy when the file is not
    sorted. When a value in `needed` is left without a static shape, constant-valued nodes are
    folded (see `_fold_constant_nodes`) and inference runs once more.
    """
    base = model if file_sorted else _with_nodes(model, sorted_nodes)
    types, static, strict_error = _run_inference(base)
    if all(static.get(n) is not None for n in needed):
        return types, static, strict_error
    nodes, n_folded = _fold_constant_nodes(sorted_nodes, model.graph.initializer)
    if n_folded == 0:
        return types, static, strict_error
    folded_types, folded_static, folded_error = _run_inference(_with_nodes(model, nodes))
    for name, value_type in folded_types.items():
        if static.get(name) is None:
            types[name], static[name] = value_type, folded_static[name]
    return types, static, strict_error or folded_error


def _describe_type(value_type: onnx.TypeProto | None) -> str:
    if value_type is None:
        return "unknown"
    if not value_type.HasField("tensor_type"):
        return f"a non-tensor type ({value_type.WhichOneof('value')})"
    if not value_type.tensor_type.HasField("shape"):
        return "unknown rank"
    dims = [str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?")
            for d in value_type.tensor_type.shape.dim]
    return "[" + ", ".join(dims) + "]"


def _static_info(value_type: onnx.TypeProto | None) -> TensorInfo | None:
    if value_type is None or not value_type.HasField("tensor_type"):
        return None
    tensor_type = value_type.tensor_type
    if not tensor_type.HasField("shape"):
        return None
    dims: list[int] = []
    for d in tensor_type.shape.dim:
        if not d.HasField("dim_value"):
            return None
        dims.append(int(d.dim_value))
    size = _ITEMSIZE.get(tensor_type.elem_type)
    if size is None:
        return None
    return TensorInfo(tuple(dims), size)


# --- import -----------------------------------------------------------------------------------


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes by name, as ONNX stores them (strings as bytes); subgraphs left out."""
    return {
        attr.name: onnx.helper.get_attribute_value(attr)
        for attr in node.attribute
        if attr.type not in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    }


@dataclass(frozen=True)
class ParameterInfo:
    """One parameter of an imported graph.

    Attributes:
        name: the tensor's name in the file.
        shape: its static shape (declared, stored, or derived from the ops that read it).
        numel, nbytes: its element count and size in bytes.
        source: how it was identified: ``"metadata"``, ``"initializer"``, ``"graph input"`` (by its
            role) or ``"undeclared"`` (read by a node, declared nowhere; shape derived from its role).
        roles: the roles found for it (``"Conv weight"``, ``"LayerNormalization scale"``...).
        trainable: False for non-trainable state (BatchNormalization running statistics), which
            counts with the parameters (see `placement_gym.graph.parameters`).
    """

    name: str
    shape: tuple[int, ...]
    numel: int
    nbytes: float
    source: str
    roles: tuple[str, ...]
    trainable: bool


@dataclass(frozen=True)
class OnnxImport:
    """An imported graph and the account of what the importer took for parameters and data.

    Attributes:
        graph: the `OpGraph`.
        roles: the classification of every tensor read from outside the nodes (`InputRoles`).
        parameters: the parameters the graph's ops read, in order of first use; their bytes sum to
            ``graph.param_bytes.sum()``.
        warnings: the messages of the warnings the import issued with `warnings.warn`.
    """

    graph: OpGraph
    roles: InputRoles
    parameters: tuple[ParameterInfo, ...]
    warnings: tuple[str, ...]

    @property
    def parameter_count(self) -> int:
        return sum(p.numel for p in self.parameters)

    @property
    def parameter_bytes(self) -> float:
        return float(sum(p.nbytes for p in self.parameters))


def graph_from_onnx(model_or_path: onnx.ModelProto | str | Path, name: str | None = None) -> OpGraph:
    """Import an ONNX model (a ModelProto or a path to an .onnx file) as an `OpGraph`.

    Runs ONNX shape inference, requires static shapes for every tensor that flows between ops,
    orders the ops topologically (stable: file order breaks ties) and costs each op with
    `placement_gym.graph.op_costs`. Op types with no cost formula are costed by their bytes and
    reported in one warning; a float input taken for data without a role saying so gets a
    `placement_gym.graph.parameters.DataInputWarning`. ``name`` defaults to the file stem (or the
    graph's name). `import_onnx` also returns which tensors were taken for parameters and why.
    """
    return import_onnx(model_or_path, name, _stacklevel=4).graph


def import_onnx(model_or_path: onnx.ModelProto | str | Path, name: str | None = None, *,
                _stacklevel: int = 3) -> OnnxImport:
    """Import an ONNX model as `graph_from_onnx` does, with the account of its parameters.

    External data files are never read (only shapes matter), so a model whose weights live in a
    missing ``.data`` file still imports. ``name`` defaults to the file stem (or the graph's name).

    Steps: load; classify what the nodes read from outside (`classify_inputs`: data, parameters,
    constants); wire and order the ops (`_wire_ops`); infer shapes (`_tensor_shapes`); number the
    tensors and edges and cost every op (`_assemble`).
    """
    with _no_cycle_collection():
        result, issued = _import(model_or_path, name)
    for message, category in issued:
        warnings.warn(message, category, stacklevel=_stacklevel)
    return result


def import_own_model(model: onnx.ModelProto, name: str) -> OpGraph:
    """The graph of a model the project made itself (a dataset family's), named ``name``. Any warning
    of the import (an op costed without its formula, a float input taken for data without saying so)
    means the maker is broken, so it is a ValueError here rather than a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        imported = import_onnx(model, name)
    if imported.warnings:
        raise ValueError(f"graph {name}: {imported.warnings[0]}")
    return imported.graph


@contextmanager
def _no_cycle_collection() -> Iterator[None]:
    """Python's cycle collector paused: an import builds millions of small tuples, lists and sets
    (none in a reference cycle), and the collector's passes over them cost a third of a large import."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _import(model_or_path: onnx.ModelProto | str | Path, name: str | None,
            ) -> tuple[OnnxImport, list[tuple[str, type[Warning]]]]:
    """`import_onnx`'s work: the import and the warnings it is to issue."""
    model, name, sha256 = _load(model_or_path, name)
    _check_text(model, name)
    graph = model.graph
    initializers = _initializer_infos(graph)
    roles = classify_inputs(model)
    ops, op_names = onnx_ops(graph)
    if not ops:
        raise ValueError(f"ONNX model {name!r} has only Constant nodes: nothing to place")
    constants = _constant_infos(graph, initializers, roles)
    wiring = _wire_ops(graph, ops, op_names, roles, constants)
    shapes = _tensor_shapes(model, roles, wiring, initializers, constants)
    _check_dimensions(wiring, shapes)
    opgraph, parameter_info, no_formula, guessed = _assemble(name, sha256, roles, wiring, shapes)
    issued = _cost_warnings(name, no_formula, guessed) + role_warnings(roles, name)
    # In order of first use: by the owner's topological position, then the owner's input order.
    first_use = dict.fromkeys(t for p in wiring.order for t in wiring.op_inputs[p] if t in parameter_info)
    return OnnxImport(
        graph=opgraph,
        roles=roles,
        parameters=tuple(
            ParameterInfo(
                name=tensor, shape=info.shape, numel=info.numel, nbytes=info.nbytes,
                source=roles.parameters[tensor], roles=roles.parameter_roles.get(tensor, ()),
                trainable=tensor not in roles.state,
            )
            for tensor, info in ((t, parameter_info[t]) for t in first_use)
        ),
        warnings=tuple(message for message, _ in issued),
    ), issued


# --- the steps of import_onnx -------------------------------------------------------------------


def _initializer_infos(graph: onnx.GraphProto) -> dict[str, TensorInfo]:
    """Shape and element size of every (dense or sparse) initializer."""
    initializers: dict[str, TensorInfo] = {}
    for tensor in graph.initializer:
        initializers[tensor.name] = TensorInfo(tuple(tensor.dims), _itemsize(tensor.data_type, tensor.name))
    for sparse in graph.sparse_initializer:
        initializers[sparse.values.name] = TensorInfo(tuple(sparse.dims), _itemsize(sparse.values.data_type,
                                                                                     sparse.values.name))
    return initializers


def _constant_infos(graph: onnx.GraphProto, initializers: dict[str, TensorInfo],
                    roles: InputRoles) -> dict[str, TensorInfo | None]:
    """The constants the ops read (None: shape left to inference): initializers that are no
    parameters, graph inputs and undeclared tensors of no role, and Constant nodes' values."""
    parameters = roles.parameter_names
    constants: dict[str, TensorInfo | None] = {
        n: info for n, info in initializers.items() if n not in parameters
    }
    # Graph inputs read as constants (shape operands, scalars) and undeclared tensors of no role:
    # their shape comes from inference, if any; they are never data or weights.
    for tensor in roles.constants:
        constants.setdefault(tensor, None)
    for node in graph.node:
        if is_constant_node(node):
            constants[node.output[0]] = _constant_node_info(node)
    return constants


@dataclass(frozen=True)
class _Wiring:
    """How the ops (in file order) connect, and their topological order."""

    ops: list[onnx.NodeProto]
    op_names: list[str]
    # Each op's fields read once from the protobuf (a protobuf field read builds new objects every
    # time; at 100,000 ops the repeated reads cost more than shape inference).
    op_types: list[str]
    op_raw_inputs: list[tuple[str, ...]]  # node.input as the file has it ("" for an absent input)
    op_outputs: list[tuple[str, ...]]
    producer: dict[str, int]  # tensor -> the op (file index) that produces it
    op_inputs: list[list[str]]  # distinct inputs per op (explicit, then read by subgraphs)
    order: list[int]  # file indices in topological order
    consumers: dict[str, list[int]]  # consumers of each value, as topological positions
    output_names: list[str]


def _wire_ops(graph: onnx.GraphProto, ops: list[onnx.NodeProto], op_names: list[str], roles: InputRoles,
              constants: dict[str, TensorInfo | None]) -> _Wiring:
    """Producers and readers of every tensor, checked (one producer each, every read and graph output
    produced or given), and the stable topological order (`_topological_order`)."""
    parameters = roles.parameter_names
    op_types = [node.op_type for node in ops]
    op_raw_inputs = [tuple(node.input) for node in ops]
    op_outputs = [tuple(node.output) for node in ops]
    producer: dict[str, int] = {}
    for i, outputs in enumerate(op_outputs):
        for out in outputs:
            if not out:
                continue
            if out in producer or out in constants or out in parameters:
                raise ValueError(f"tensor {out!r} is produced twice (second time by op {op_names[i]!r})")
            producer[out] = i
    known_sources = set(roles.data_inputs) | parameters | set(constants)
    op_inputs: list[list[str]] = []
    deps: list[list[int]] = []
    for i, node in enumerate(ops):
        reads = list(op_raw_inputs[i])
        if node.attribute:
            for attr in node.attribute:
                for sub in subgraphs(attr):
                    reads += outer_scope_inputs(sub)
        distinct = [n for n in dict.fromkeys(reads) if n]
        for n in distinct:
            if n not in producer and n not in known_sources:
                raise ValueError(
                    f"op {op_names[i]!r} ({op_types[i]}) reads tensor {n!r}, which no node produces and "
                    "which is not a graph input or initializer"
                )
        op_inputs.append(distinct)
        deps.append(sorted({producer[n] for n in distinct if n in producer}))
    order = _topological_order(deps, op_names)
    position = [0] * len(ops)
    for k, p in enumerate(order):
        position[p] = k

    output_names = [v.name for v in graph.output]
    for out in output_names:
        if out not in producer and out not in known_sources:
            raise ValueError(f"graph output {out!r} is produced by no node and is not a graph input")
    consumers: dict[str, list[int]] = {}
    for k, p in enumerate(order):
        for n in op_inputs[p]:
            users = consumers.get(n)
            if users is None:
                consumers[n] = [k]
            else:
                users.append(k)
    return _Wiring(ops, op_names, op_types, op_raw_inputs, op_outputs, producer, op_inputs, order, consumers,
                   output_names)


@dataclass(frozen=True)
class _Shapes:
    """Where the shape of each tensor comes from: initializers, constants, shapes derived for
    undeclared weights, and shape inference (its types, their static shapes, and its strict-mode
    error, for messages). ``infos`` is what `value_info` answers, merged once: an import asks for
    every tensor several times."""

    initializers: dict[str, TensorInfo]
    constants: dict[str, TensorInfo | None]
    derived: dict[str, TensorInfo]
    types: dict[str, onnx.TypeProto]
    static: dict[str, TensorInfo | None]
    strict_error: str
    infos: dict[str, TensorInfo | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # Initializers first, then derived shapes, constants' own shapes, then inference.
        infos = dict(self.static)
        for tensor, info in self.constants.items():
            infos[tensor] = info or self.static.get(tensor)
        infos.update(self.derived)
        infos.update(self.initializers)
        object.__setattr__(self, "infos", infos)

    def require_static(self, tensor: str, role: str) -> TensorInfo:
        info = self.static.get(tensor)
        if info is None:
            reason = f" (strict shape inference failed: {self.strict_error})" if self.strict_error else ""
            shape = _describe_type(self.types.get(tensor))
            raise ValueError(
                f"{role} tensor {tensor!r} has no static shape (shape: {shape}){reason}. {_STATIC_SHAPE_HINT}"
            )
        return info

    def value_info(self, tensor: str) -> TensorInfo | None:
        return self.infos.get(tensor)


def _tensor_shapes(model: onnx.ModelProto, roles: InputRoles, wiring: _Wiring,
                   initializers: dict[str, TensorInfo], constants: dict[str, TensorInfo | None]) -> _Shapes:
    """Shape inference on the ops in topological order (`_infer_shapes`), and the shapes of undeclared
    weights derived from the ops that read them (`derive_shapes`)."""
    graph = model.graph
    ops, order = wiring.ops, wiring.order
    file_sorted = order == list(range(len(ops)))
    sorted_nodes = (list(graph.node) if file_sorted
                    else [n for n in graph.node if is_constant_node(n)] + [ops[i] for i in order])
    output_set = set(wiring.output_names)
    needed = list(roles.data_inputs) + [
        out for out in wiring.producer if out in wiring.consumers or out in output_set
    ]
    types, static, strict_error = _infer_shapes(model, sorted_nodes, needed, file_sorted)
    undeclared = [n for n, source in roles.parameters.items() if source == "undeclared"]  # by first read
    derived: dict[str, TensorInfo] = {}
    if undeclared:
        opset = next((o.version for o in model.opset_import if o.domain in DEFAULT_DOMAINS), 1)
        derived = derive_shapes(list(graph.node), {n: roles.undeclared_uses[n] for n in undeclared}, opset,
                                lambda tensor: initializers.get(tensor) or static.get(tensor))
    return _Shapes(initializers, constants, derived, types, static, strict_error)


class _TensorTable:
    """The graph's tensors in the order they are numbered, with producer, bytes and parameter flag."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.producer: list[int] = []
        self.nbytes: list[float] = []
        self.is_parameter: list[bool] = []
        self.index: dict[str, int] = {}

    def add(self, tensor: str, produced_by: int, nbytes: float, is_parameter: bool) -> None:
        self.index[tensor] = len(self.names)
        self.names.append(tensor)
        self.producer.append(produced_by)
        self.nbytes.append(nbytes)
        self.is_parameter.append(is_parameter)


def _assemble(name: str, sha256: str, roles: InputRoles, wiring: _Wiring, shapes: _Shapes,
              ) -> tuple[OpGraph, dict[str, TensorInfo], set[str], set[str]]:
    """The `OpGraph`, the shape of each parameter an op reads, the op types with no cost formula
    costed by their bytes, and those costed as element-wise ops (`op_costs.op_cost`).

    Tensors are numbered data inputs first, then per op in topological order: its outputs that are
    read or are graph outputs, then the parameters it owns that other ops read (a parameter belongs
    to its first consumer). Edges are (tensor, consumer) pairs in the same walk."""
    ops, op_names, order, consumers = wiring.ops, wiring.op_names, wiring.order, wiring.consumers
    output_set = set(wiring.output_names)
    tensors = _TensorTable()
    data_inputs: list[tuple[str, tuple[int, ...]]] = []
    for tensor in roles.data_inputs:
        info = shapes.require_static(tensor, "graph input")
        data_inputs.append((tensor, info.shape))
        tensors.add(tensor, -1, info.nbytes, False)

    parameter_info: dict[str, TensorInfo] = {}
    for tensor in sorted(roles.parameter_names & set(consumers), key=lambda t: consumers[t][0]):
        parameter_info[tensor] = (shapes.initializers.get(tensor) or shapes.derived.get(tensor)
                                  or shapes.require_static(tensor, "parameter"))

    n = len(ops)
    param_bytes = [0.0] * n
    flops = [0.0] * n
    bytes_accessed = [0.0] * n
    category = [0] * n
    edge_tensor: list[int] = []
    edge_dst: list[int] = []
    no_formula: set[str] = set()
    guessed: set[str] = set()
    index = tensors.index
    static = shapes.static
    for k, p in enumerate(order):
        node = ops[p]
        inputs = wiring.op_inputs[p]
        for tensor in inputs:
            if tensor in parameter_info:
                users = consumers[tensor]
                if users[0] == k:  # the owner: first consumer in topological order
                    param_bytes[k] += parameter_info[tensor].nbytes
                    continue
            t = index.get(tensor)
            if t is not None:
                edge_tensor.append(t)
                edge_dst.append(k)
        for out in wiring.op_outputs[p]:
            if out and (out in consumers or out in output_set):
                info = static.get(out) or shapes.require_static(
                    out, f"op {op_names[p]!r} ({wiring.op_types[p]}) output")
                tensors.add(out, k, info.nbytes, False)
        for tensor in inputs:
            if tensor in parameter_info and consumers[tensor][0] == k and len(consumers[tensor]) > 1:
                tensors.add(tensor, k, parameter_info[tensor].nbytes, True)
        flops[k], bytes_accessed[k], category[k], missing, elementwise = _op_cost(
            node, wiring.op_types[p], wiring.op_raw_inputs[p], wiring.op_outputs[p], op_names[p], shapes)
        if missing:
            no_formula.add(missing)
        if elementwise:
            guessed.add(elementwise)

    opgraph = OpGraph(
        name=name,
        op_names=tuple(op_names[p] for p in order),
        op_types=tuple(wiring.op_types[p] for p in order),
        category=np.asarray(category, dtype=np.int8),
        flops=np.asarray(flops, dtype=np.float64),
        bytes_accessed=np.asarray(bytes_accessed, dtype=np.float64),
        param_bytes=np.asarray(param_bytes, dtype=np.float64),
        tensor_names=tuple(tensors.names),
        tensor_producer=np.asarray(tensors.producer, dtype=np.int32),
        tensor_bytes=np.asarray(tensors.nbytes, dtype=np.float64),
        tensor_is_parameter=np.asarray(tensors.is_parameter, dtype=bool),
        tensor_is_output=np.array([t in output_set for t in tensors.names], dtype=bool),
        edge_tensor=np.asarray(edge_tensor, dtype=np.int32),
        edge_dst=np.asarray(edge_dst, dtype=np.int32),
        sha256=sha256,
        data_inputs=tuple(data_inputs),
    )
    return opgraph, parameter_info, no_formula, guessed


def _op_cost(node: onnx.NodeProto, op_type: str, node_inputs: tuple[str, ...], node_outputs: tuple[str, ...],
             op_name: str, shapes: _Shapes) -> tuple[float, float, int, str | None, str | None]:
    """FLOPs, bytes accessed and category index of one op (`op_costs.op_cost`; its op type, inputs and
    outputs as read from ``node``), then its qualified op type when there is no formula for it: in the
    first place when it is costed by its bytes only (0 FLOPs, category other), in the second when it
    is costed as an element-wise op."""
    infos = shapes.infos
    inputs = [infos.get(t) if t else None for t in node_inputs]
    outputs = [infos.get(t) if t else None for t in node_outputs]
    domain = node.domain
    try:
        cost = op_cost(op_type, inputs, outputs, node_attributes(node) if node.attribute else {}, domain)
    except Exception as error:
        raise ValueError(
            f"cannot cost op {op_name!r} ({op_type}) with input shapes "
            f"{[None if i is None else i.shape for i in inputs]}: {error}"
        ) from None
    qualified = op_type if domain in DEFAULT_DOMAINS else f"{domain}.{op_type}"
    if cost is None:
        return 0.0, all_bytes(inputs, outputs, {}), CATEGORY_INDEX["other"], qualified, None
    guessed = None if op_type in COST_RULES else qualified
    return cost.flops, cost.bytes_accessed, CATEGORY_INDEX[cost.category], None, guessed


def _cost_warnings(name: str, no_formula: set[str], guessed: set[str]) -> list[tuple[str, type[Warning]]]:
    """The import's warnings about op types without a cost formula, one per way they were costed."""
    issued: list[tuple[str, type[Warning]]] = []
    if no_formula:
        issued.append((
            f"graph {name!r}: no cost formula for op types {sorted(no_formula)}; these ops are costed by "
            "their bytes only (0 FLOPs, category 'other')", UserWarning))
    if guessed:
        issued.append((
            f"graph {name!r}: no cost formula for op types {sorted(guessed)}; their inputs have the shape "
            "of their one output, so they are costed as element-wise ops (1 FLOP per output element, "
            "category 'elementwise')", UserWarning))
    return issued


# --- what a file may hold -----------------------------------------------------------------------

_TEXT, _MESSAGE = FieldDescriptor.TYPE_STRING, FieldDescriptor.TYPE_MESSAGE
# The importer reads no text of a value's type (element type and dimension sizes only), and types
# are most of the messages of a file: they are not walked.
_UNREAD = onnx.TypeProto.DESCRIPTOR


_FIELD_KINDS: dict[Any, tuple[bool, bool] | None] = {}


def _field_kind(descriptor: Any) -> tuple[bool, bool] | None:
    """(is text, is repeated) of a field the check walks, None for one it skips; cached per field."""
    try:
        return _FIELD_KINDS[descriptor]
    except KeyError:
        walked = descriptor.type in (_TEXT, _MESSAGE) and descriptor.message_type is not _UNREAD
        kind = (descriptor.type == _TEXT, descriptor.is_repeated) if walked else None
        _FIELD_KINDS[descriptor] = kind
        return kind


def _first_non_text(message: Any, path: str) -> tuple[str, bytes] | None:
    """The path and value of the first string field, in ``message`` or the messages it holds (value
    types aside), that is not valid UTF-8: protobuf hands such a (proto2) string back as bytes. The
    path is written only for what is found: a 100,000-node file has a million clean fields."""
    for descriptor, value in message.ListFields():
        kind = _field_kind(descriptor)
        if kind is None:
            continue
        text, repeated = kind
        if text and not repeated:
            if isinstance(value, bytes):
                return f"{path}.{descriptor.name}", value
            continue
        for k, item in enumerate(value if repeated else (value,)):
            if text:
                if isinstance(item, bytes):
                    return f"{path}.{descriptor.name}[{k}]", item
            else:
                found = _first_non_text(item, "")
                if found is not None:
                    return f"{path}.{descriptor.name}" + (f"[{k}]" if repeated else "") + found[0], found[1]
    return None


def _check_text(model: onnx.ModelProto, name: str) -> None:
    """Every text field of ``model`` valid UTF-8, or a ValueError naming the node (or the field)."""
    found = _first_non_text(model, "")
    if found is None:
        return
    path, raw = found
    in_node = re.match(r"\.graph\.node\[(\d+)\]\.", path)
    if in_node:
        i = int(in_node.group(1))
        node = model.graph.node[i]
        label = node.name if isinstance(node.name, str) and node.name else f"#{i}"
        where = f"node {label!r} (number {i} in the file) has {path[in_node.end():]}"
    else:
        where = f"field {path[1:]} is"
    raise ValueError(
        f"ONNX model {name!r}: {where} {raw!r}, which is not valid UTF-8; names, op types and every other "
        "text of an ONNX file must be UTF-8"
    )


def _check_dimensions(wiring: _Wiring, shapes: _Shapes) -> None:
    """Every tensor an op reads or writes with dimensions >= 0 and at most `MAX_TENSOR_BYTES`, or a
    ValueError naming the op and the tensor."""
    infos = shapes.infos
    checked: set[str] = set()  # a tensor's first reader or writer (in this walk) is the one named
    valid: set[tuple[tuple[int, ...], float]] = set()  # shapes and element sizes found within bounds
    for p in wiring.order:
        for role, tensors in (("input", wiring.op_inputs[p]), ("output", wiring.op_outputs[p])):
            for tensor in tensors:
                if tensor in checked:
                    continue
                checked.add(tensor)
                info = infos.get(tensor) if tensor else None
                if info is None or (info.shape, info.itemsize) in valid:
                    continue
                negative = any(d < 0 for d in info.shape)
                if negative or info.numel * info.itemsize > MAX_TENSOR_BYTES:
                    where = (f"op {wiring.op_names[p]!r} ({wiring.op_types[p]}) {role} tensor {tensor!r} "
                             f"has shape {list(info.shape)}")
                    if negative:
                        raise ValueError(f"{where}: every dimension must be an integer >= 0")
                    raise ValueError(f"{where}: more than {MAX_TENSOR_BYTES:g} bytes (the most allowed)")
                valid.add((info.shape, info.itemsize))
