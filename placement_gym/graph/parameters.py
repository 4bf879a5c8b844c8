"""Which tensors an ONNX graph reads are parameters, which are data inputs and which are constants.

A training step costs gradients, optimizer state and an update op for every parameter, so a weight
taken for data is a silently wrong training cost. The rules, in order:

1. ``metadata_props["placement_gym.parameters"]`` (a JSON list of names), when present, decides:
   those tensors are the parameters, every other graph input is data, every initializer a constant.
   The bundled graphs carry it.
2. Otherwise a float initializer with two or more elements is a parameter (weights stored in the
   file, inline or in an external data file, whose absence does not matter: only shapes are read),
   unless it is read only as a shape, bounds or state operand (Resize's scales, Clip's bounds, a
   recurrent op's zero initial state). A single-element one is a constant (an epsilon, GELU's 0.5,
   attention's 1/sqrt(d)): an optimiser often shares one such scalar across layers, and as a shared
   parameter it would add a fake edge from the first layer to every other. Integer and bool
   initializers are constants. So is a float initializer of two or more dimensions whose stored
   elements all hold one value and that only element-wise ops read (T5's all-zero position bias
   ``zeros`` [1, 8, 64, 64], added to the attention scores; a mask of ones): a tensor the exporter
   computed, not a trained weight, since training makes a weight's elements differ; what a weight
   slot or a matrix product reads, a normalisation's scale and a bias (ones and zeros when fresh,
   1-D) stay parameters whatever their values. The one case it takes wrongly, a
   learned tensor still at a constant initial value (an untrained model's zero position
   embedding), is named in a warning that says how to list it. Only inline values are read (an
   external data file never is).
3. A graph input, or a tensor a node reads that the file neither declares nor produces (what
   ``torch.onnx.export(dynamo=True, export_params=False)`` writes), is classified by the role its
   value plays where it meets the computation:

   - data flows forward from the integer and bool graph inputs (ids, masks) and from float inputs
     found in an *activation* slot: the input of a Conv, ConvTranspose, Gemm, normalisation, pooling
     or recurrent op (or its initial state), when the value there is computed from that one
     undecided input; failing that, the first operand of the first MatMul or Einsum that no data
     reaches yet (``x @ W`` is how layers are written);
   - a value computed only from undecided inputs and constants (through Transpose, Reshape, Cast,
     Slice, Concat or any other op: a weight is often reshaped, transposed, split or cast before
     use) that reaches a *weight* slot makes those inputs parameters: the weight and bias of Conv,
     ConvTranspose and Gemm, the scale and bias of a normalisation op, the table of a Gather on
     axis 0 (an embedding), an LSTM/GRU/RNN's W, R, B (and P), PRelu's slope; or any operand of an
     op whose other operand is reached by data (a MatMul weight, a bias added to a MatMul's output,
     a position embedding, a class token, a layer scale). A weight in a weight slot does not pass
     on to the op's output: a Conv's output is its input's, not its weight's;
   - a tensor read only as a shape, axes, bounds or indices operand (Reshape's shape, Slice's
     starts, Clip's bounds...) is a constant, and so is an undeclared tensor found in an
     activation slot (exporters declare every data input: it is a folded constant);
   - a float input found in both kinds of slot is data. A float input found in neither is taken
     for data, with a `DataInputWarning` naming it, unless it is the graph's only data input.

   Data is decided in time linear in the graph; which inputs a weight slot's value is computed from
   is found by walking back through the ops that compute it, capped at `_WORK_PER_READ` steps per
   tensor read (a graph past the cap is a `RoleAnalysisLimitError` saying to use rule 1).

   A weight used by several ops (tied embeddings) is one tensor, so it counts once. A
   single-element float tensor in a weight role is a constant, as in rule 2. The shapes of
   undeclared weights come from `placement_gym.graph.undeclared_weights`.

BatchNormalization's running mean and variance are non-trainable state (torch buffers), not
parameters, but they are resident in device memory like weights; they count with the parameters,
as in the bundled graphs, and are reported as state (``trainable=False``). A training step then
gives them gradient and optimizer memory they do not have: at most 3x their size, which is 0.2% of
ResNet-50's parameters. Other float buffers a graph reads (a causal mask) are indistinguishable
from parameters in a file and count the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import NamedTuple

import onnx
from onnx import TensorProto

from placement_gym.common.untrusted import parse_json
from placement_gym.graph.ordering import stable_topological_order

PARAMETERS_METADATA_KEY = "placement_gym.parameters"

_DEFAULT_DOMAINS = ("", "ai.onnx")
_MICROSOFT = "com.microsoft"

_FLOAT_TYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE}
    | {getattr(TensorProto, n) for n in ("FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ")
       if hasattr(TensorProto, n)}
)


class DataInputWarning(UserWarning):
    """A float graph input with a static shape was taken for data without a role saying so."""


# --- slot roles -------------------------------------------------------------------------------

_WEIGHT, _STATE, _ACTIVATION, _SHAPE, _INDEX, _OPERAND, _FIRST_OPERAND = (
    "weight", "state", "activation", "shape", "index", "operand", "first operand")

# Per op type, the role of the inputs that have one (index -> (kind, label)). Any other input is an
# _OPERAND: a weight when another operand of the op is reached by data, neutral otherwise. Data
# flows through every kind of slot but _SHAPE (a shape operand decides sizes, not values); an
# _INDEX slot (ids, or constant indices that select from an activation) never makes a weight.
_Slots = dict[int, tuple[str, str]]
_CONV: _Slots = {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "weight"), 2: (_WEIGHT, "bias")}
_NORM: _Slots = {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "scale"), 2: (_WEIGHT, "bias")}
_RECURRENT: _Slots = {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "W"), 2: (_WEIGHT, "R"), 3: (_WEIGHT, "B"),
                      4: (_SHAPE, "sequence_lens"), 5: (_ACTIVATION, "initial state"),
                      6: (_ACTIVATION, "initial state"), 7: (_WEIGHT, "P")}
_POOL: _Slots = {0: (_ACTIVATION, "input")}
_REDUCE: _Slots = {1: (_SHAPE, "axes")}
_MATMUL: _Slots = {0: (_FIRST_OPERAND, "first operand")}

_DEFAULT_SLOTS: dict[str, _Slots] = {
    "Conv": _CONV, "ConvTranspose": _CONV, "ConvInteger": {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "weight")},
    "DeformConv": {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "weight"), 3: (_WEIGHT, "bias")},
    "Gemm": {0: (_ACTIVATION, "input A"), 1: (_WEIGHT, "weight"), 2: (_WEIGHT, "bias")},
    "MatMul": _MATMUL, "MatMulInteger": _MATMUL, "Einsum": _MATMUL,
    "BatchNormalization": {**_NORM, 3: (_STATE, "running mean"), 4: (_STATE, "running variance")},
    "LayerNormalization": _NORM, "GroupNormalization": _NORM, "InstanceNormalization": _NORM,
    "RMSNormalization": {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "scale")},
    "LpNormalization": _POOL, "LRN": _POOL, "MeanVarianceNormalization": _POOL,
    "LSTM": _RECURRENT, "GRU": _RECURRENT, "RNN": _RECURRENT,
    "PRelu": {1: (_WEIGHT, "slope")},
    "MaxPool": _POOL, "AveragePool": _POOL, "LpPool": _POOL, "GlobalAveragePool": _POOL,
    "GlobalMaxPool": _POOL, "GlobalLpPool": _POOL, "MaxRoiPool": _POOL,
    "Resize": {0: (_ACTIVATION, "input"), 1: (_SHAPE, "roi"), 2: (_SHAPE, "scales"), 3: (_SHAPE, "sizes")},
    "Upsample": {0: (_ACTIVATION, "input"), 1: (_SHAPE, "scales")},
    "GatherElements": {1: (_INDEX, "indices")}, "GatherND": {1: (_INDEX, "indices")},
    "Reshape": {1: (_SHAPE, "shape")}, "Expand": {1: (_SHAPE, "shape")}, "Tile": {1: (_SHAPE, "repeats")},
    "Slice": {1: (_SHAPE, "starts"), 2: (_SHAPE, "ends"), 3: (_SHAPE, "axes"), 4: (_SHAPE, "steps")},
    "Unsqueeze": {1: (_SHAPE, "axes")}, "Squeeze": {1: (_SHAPE, "axes")}, "Split": {1: (_SHAPE, "split")},
    "Pad": {1: (_SHAPE, "pads"), 2: (_SHAPE, "constant_value"), 3: (_SHAPE, "axes")},
    "Clip": {1: (_SHAPE, "min"), 2: (_SHAPE, "max")}, "TopK": {1: (_SHAPE, "k")},
    "CumSum": {1: (_SHAPE, "axis")}, "Trilu": {1: (_SHAPE, "k")},
    "Dropout": {1: (_SHAPE, "ratio"), 2: (_SHAPE, "training_mode")},
    "OneHot": {1: (_SHAPE, "depth"), 2: (_SHAPE, "values")},
    "ConstantOfShape": {0: (_SHAPE, "shape")}, "Range": {0: (_SHAPE, "start"), 1: (_SHAPE, "limit"),
                                                         2: (_SHAPE, "delta")},
    "Shape": {0: (_SHAPE, "input")}, "Size": {0: (_SHAPE, "input")},
    "EyeLike": {0: (_SHAPE, "input")}, "RandomNormalLike": {0: (_SHAPE, "input")},
    "RandomUniformLike": {0: (_SHAPE, "input")},
    **{op: _REDUCE for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
}
# onnxruntime's fused ops, as transformer optimisers write them.
_MICROSOFT_SLOTS: dict[str, _Slots] = {
    "SkipLayerNormalization": {0: (_ACTIVATION, "input"), 1: (_ACTIVATION, "skip"), 2: (_WEIGHT, "gamma"),
                               3: (_WEIGHT, "beta"), 4: (_WEIGHT, "bias")},
    "SkipSimplifiedLayerNormalization": {0: (_ACTIVATION, "input"), 1: (_ACTIVATION, "skip"),
                                         2: (_WEIGHT, "gamma"), 3: (_WEIGHT, "bias")},
    "SimplifiedLayerNormalization": {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "scale")},
    "LayerNormalization": _NORM,
    "EmbedLayerNormalization": {0: (_ACTIVATION, "input_ids"), 1: (_ACTIVATION, "segment_ids"),
                                2: (_WEIGHT, "word embedding"), 3: (_WEIGHT, "position embedding"),
                                4: (_WEIGHT, "segment embedding"), 5: (_WEIGHT, "gamma"),
                                6: (_WEIGHT, "beta")},
    "Attention": {0: (_ACTIVATION, "input"), 1: (_WEIGHT, "weights"), 2: (_WEIGHT, "bias")},
    "BiasGelu": {1: (_WEIGHT, "bias")}, "FastGelu": {1: (_WEIGHT, "bias")},
    "FusedMatMul": _MATMUL,
}


def _slot_roles(node: onnx.NodeProto) -> _Slots:
    if node.domain in _DEFAULT_DOMAINS:
        slots = _DEFAULT_SLOTS.get(node.op_type, {})
        if node.op_type == "Gather":
            axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
            # An embedding looks up rows (axis 0); a Gather on another axis selects from an activation.
            return {0: (_WEIGHT, "table"), 1: (_INDEX, "indices")} if axis == 0 else {1: (_INDEX, "indices")}
        return slots
    if node.domain == _MICROSOFT:
        return _MICROSOFT_SLOTS.get(node.op_type, {})
    return {}


def subgraphs(attr: onnx.AttributeProto) -> list[onnx.GraphProto]:
    """The graphs an attribute holds (the bodies of If, Loop and Scan)."""
    if attr.type == onnx.AttributeProto.GRAPH:
        return [attr.g]
    if attr.type == onnx.AttributeProto.GRAPHS:
        return list(attr.graphs)
    return []


def outer_scope_inputs(graph: onnx.GraphProto) -> list[str]:
    """Names a subgraph (If/Loop/Scan body) reads from the enclosing graph, in first-use order."""
    defined = {v.name for v in graph.input} | {t.name for t in graph.initializer}
    defined |= {t.values.name for t in graph.sparse_initializer}
    used: list[str] = []
    for node in graph.node:
        reads = list(node.input)
        for attr in node.attribute:
            for sub in subgraphs(attr):
                reads += outer_scope_inputs(sub)
        used += [n for n in reads if n and n not in defined]
        defined.update(node.output)
    return list(dict.fromkeys(used))


class _Read(NamedTuple):
    """One input of one node: the tensor's name and the role of its slot."""

    name: str
    kind: str
    label: str


def _node_reads(node: onnx.NodeProto) -> list[_Read]:
    slots = _slot_roles(node)
    reads = []
    for i, name in enumerate(node.input):
        if name:
            kind, label = slots.get(i, (_OPERAND, "operand"))
            reads.append(_Read(name, kind, label))
    if node.attribute:
        for attr in node.attribute:  # what a control-flow body reads is an operand of the node
            for sub in subgraphs(attr):
                reads += [_Read(name, _OPERAND, "operand") for name in outer_scope_inputs(sub)]
    return reads


# --- the result -------------------------------------------------------------------------------


@dataclass(frozen=True)
class InputRoles:
    """What each tensor a graph reads from outside its nodes is, and how that was decided.

    Attributes:
        method: ``"metadata"`` (the placement-gym metadata key listed the parameters) or
            ``"roles"`` (initializers and the role analysis of the module docstring).
        parameters: parameter name -> how it was identified: ``"metadata"``, ``"initializer"``,
            ``"graph input"`` or ``"undeclared"`` (read by a node, declared nowhere in the file).
        parameter_roles: parameter name -> the roles found for it, such as ``"Conv weight"`` or
            ``"BatchNormalization running mean"`` (empty for metadata and role-less initializers).
        state: the parameters whose every role is non-trainable state (running statistics).
        data_inputs: data input name -> why it is data (``"Conv input"``, ``"integer or bool input
            (ids, indices, mask)"``, ``"no role found"``...), in graph-input order.
        constants: graph inputs and undeclared tensors read as constants -> why.
        unsure_data: the float data inputs with a static shape that no role marked as data (each
            gets a `DataInputWarning`).
        undeclared_uses: undeclared parameter -> the (node index, input index) pairs that read it,
            from which `placement_gym.graph.undeclared_weights` derives its shape.
        notes: facts about the file worth a user's attention (one line each; warned on import).
        undetermined: what matters to a training step's cost that the file cannot tell (one line
            each; shown by ``placement-gym graphs --info``, `undetermined_lines`, not warned on
            import, as it holds for every file of its kind).
    """

    method: str
    parameters: dict[str, str]
    parameter_roles: dict[str, tuple[str, ...]]
    state: frozenset[str]
    data_inputs: dict[str, str]
    constants: dict[str, str]
    unsure_data: tuple[str, ...]
    undeclared_uses: dict[str, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    undetermined: tuple[str, ...] = ()

    @property
    def parameter_names(self) -> set[str]:
        return set(self.parameters)

    def warning_messages(self) -> list[str]:
        """The warnings loading this graph gives (also shown by ``placement-gym graphs --info``)."""
        return ([_unsure_data_message(self.unsure_data)] if self.unsure_data else []) + list(self.notes)


def _unsure_data_message(names: tuple[str, ...]) -> str:
    listed = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return (
        f"float graph input(s) {listed} with a static shape were taken for data: no op reads them as an "
        "activation (a Conv, Gemm, normalisation or pooling input) or as a weight. If they are weights, list "
        f"every parameter in metadata_props[{PARAMETERS_METADATA_KEY!r}] (a JSON list of names)"
    )


# --- the analysis -----------------------------------------------------------------------------


def _declared_numel(value: onnx.ValueInfoProto) -> int | None:
    tensor_type = value.type.tensor_type
    if not tensor_type.HasField("shape") or not all(d.HasField("dim_value") for d in tensor_type.shape.dim):
        return None
    return math.prod(int(d.dim_value) for d in tensor_type.shape.dim)


def metadata_parameters(model: onnx.ModelProto) -> list[str] | None:
    """The parameter names listed in the placement-gym metadata key, or None when it is absent."""
    for prop in model.metadata_props:
        if prop.key == PARAMETERS_METADATA_KEY:
            # The model is a user's file: its metadata is parsed as strictly as any file they hand us.
            names = parse_json(prop.value, f"metadata {PARAMETERS_METADATA_KEY!r}", max_depth=2)
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"metadata {PARAMETERS_METADATA_KEY!r} must be a JSON list of tensor names")
            return names
    return None


def _from_metadata(model: onnx.ModelProto, names: list[str]) -> InputRoles:
    graph = model.graph
    initializers = {t.name for t in graph.initializer} | {t.values.name for t in graph.sparse_initializer}
    graph_inputs = list(dict.fromkeys(v.name for v in graph.input))
    declared = initializers.union(graph_inputs)
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise ValueError(
            f"metadata {PARAMETERS_METADATA_KEY!r} names {len(unknown)} tensors that are neither "
            f"graph inputs nor initializers, e.g. {unknown[:3]}"
        )
    listed = set(names)
    return InputRoles(
        method="metadata",
        parameters={n: "metadata" for n in dict.fromkeys(names)},
        parameter_roles={},
        state=frozenset(),
        data_inputs={n: "not listed in the metadata" for n in graph_inputs
                     if n not in listed and n not in initializers},
        constants={},
        unsure_data=(),
    )


def _node_order(outputs: list[tuple[str, ...]], reads: list[list[_Read]]) -> list[int]:
    """Nodes (given by their outputs and reads) in a topological order (file order breaks ties);
    nodes on a cycle go last, in file order (the importer reports the cycle)."""
    producer = {out: i for i, outs in enumerate(outputs) for out in outs}
    deps = [{producer[r.name] for r in rs if r.name in producer} - {i} for i, rs in enumerate(reads)]
    order = stable_topological_order(deps)
    if len(order) == len(outputs):
        return order
    placed = set(order)
    return order + [i for i in range(len(outputs)) if i not in placed]


_NO_SOURCES: frozenset[str] = frozenset()

# Deciding what is data takes time linear in the graph (`_Analysis.decide_data`). Finding which
# inputs a weight slot's value is computed from walks back through the ops that compute it, and a
# file can make every one of many slots read a value computed from thousands of inputs: that walk
# is capped at this many steps per tensor read, plus a floor for small graphs (real models need one
# or two: a weight is read directly or through a Transpose or a Cast), and a graph past the cap is
# refused with the way around the analysis (the metadata list).
_WORK_PER_READ = 8
_WORK_FLOOR = 1 << 18


class RoleAnalysisLimitError(ValueError):
    """A graph whose role analysis would take more work than `_WORK_PER_READ` steps per read."""


def _capped(merged: frozenset[str]) -> frozenset[str]:
    """At most two of ``merged``: enough to tell none, exactly one and several apart."""
    if len(merged) <= 2:
        return merged
    iterator = iter(merged)
    return frozenset((next(iterator), next(iterator)))


class _Analysis:
    """Forward data reachability and weight-role evidence over one graph (rule 3 of the module)."""

    def __init__(self, nodes: list[onnx.NodeProto], candidates: Iterable[str], fixed: Iterable[str]) -> None:
        self.nodes = nodes
        self.reads = [_node_reads(node) for node in nodes]
        self.outputs = [tuple(out for out in node.output if out) for node in nodes]
        self.order = _node_order(self.outputs, self.reads)
        # Per node: the reads values flow through (all but shape operands), and those of them that
        # pass their sources on (weights and state do not).
        self.flowing = [tuple(r.name for r in reads if r.kind != _SHAPE) for reads in self.reads]
        self.passing = [tuple(r.name for r in reads if r.kind not in (_SHAPE, _WEIGHT, _STATE))
                        for reads in self.reads]
        self.candidates = set(candidates)  # undecided: data, parameter or constant
        self.fixed = set(fixed)  # parameters already (initializers): sources of weight values only
        self.producer = {out: i for i in self.order for out in self.outputs[i]}
        self.flowing_readers: dict[str, list[int]] = {}
        for i, names in enumerate(self.flowing):
            for name in dict.fromkeys(names):
                self.flowing_readers.setdefault(name, []).append(i)
        self.reached_nodes: set[int] = set()  # by `_reach`
        self.work_left = _WORK_FLOOR + _WORK_PER_READ * sum(len(reads) for reads in self.reads)

    def _spend(self, steps: int) -> None:
        self.work_left -= steps
        if self.work_left < 0:
            raise RoleAnalysisLimitError(
                "telling parameters from data takes more than "
                f"{_WORK_PER_READ} steps per tensor read in this graph (values computed from very many "
                "undecided inputs at once); list every parameter in "
                f"metadata_props[{PARAMETERS_METADATA_KEY!r}] (a JSON list of names) to skip the analysis")

    def decide_data(self, data: set[str]) -> tuple[dict[str, str], set[str]]:
        """The candidates that are data, each with its evidence (rule 3: an activation slot, else the
        first operand of the first MatMul/Einsum that no data reaches yet), given the integer and
        bool inputs ``data``; in time linear in the graph.

        Only whether a value is computed from none, one or several undecided inputs matters here, and
        that does not change for a value no data reaches as more inputs are found to be data. So the
        activation evidence is read once, and each tie, in topological order, adds the candidates
        behind it, which data then reaches: no value is walked twice. Returns the evidence and the
        values data reaches in the end."""
        reached: set[str] = set()
        few = self._few_candidates(data)
        self._reach(reached, data)
        evidence: dict[str, str] = {}
        for i in self.order:
            for r in self.reads[i]:
                if r.kind == _ACTIVATION and r.name not in reached and len(few.get(r.name, ())) == 1:
                    (name,) = few[r.name]
                    evidence.setdefault(name, f"{self.nodes[i].op_type} {r.label}")
        self._reach(reached, evidence)
        for i in self.order:
            if not self._is_tie(i, reached, few):
                continue
            reads = self.reads[i]
            # x @ W is how layers are written: the first operand is the activation; when it is a stored
            # weight (W @ x), the undecided operands are the data.
            chosen = self._candidates_behind([reads[0].name], reached, few) or self._candidates_behind(
                [r.name for r in reads[1:]], reached, few)
            node = self.nodes[i]
            evidence.update({n: f"activation operand of {node.op_type} {node.name or '(unnamed)'!r}"
                             for n in chosen})
            self._reach(reached, chosen)
        return evidence, reached

    def _few_candidates(self, data: set[str]) -> dict[str, frozenset[str]]:
        """Per value no data reaches, up to two of the candidates it is computed from (`_capped`)."""
        few = {n: frozenset({n}) for n in self.candidates - data}
        reached = set(data)
        for i in self.order:
            if any(name in reached for name in self.flowing[i]):
                reached.update(self.outputs[i])
                continue
            merged = _NO_SOURCES
            for name in self.passing[i]:
                merged = _capped(merged | few.get(name, _NO_SOURCES))
            if merged:
                for out in self.outputs[i]:
                    few[out] = merged
        return few

    def _reach(self, reached: set[str], names: Iterable[str]) -> None:
        """Add to ``reached`` the values data reaches from ``names`` (each node visited once)."""
        stack = [n for n in names if n not in reached]
        reached.update(stack)
        while stack:
            for i in self.flowing_readers.get(stack.pop(), ()):
                if i in self.reached_nodes:
                    continue
                self.reached_nodes.add(i)
                new = [out for out in self.outputs[i] if out not in reached]
                reached.update(new)
                stack += new

    def _is_tie(self, i: int, reached: set[str], few: dict[str, frozenset[str]]) -> bool:
        """Whether node ``i`` is a MatMul/Einsum no data reaches whose first operand is undecided and
        some operand of which is computed from candidates."""
        reads = self.reads[i]
        if not reads or reads[0].kind != _FIRST_OPERAND or reads[0].name in reached:
            return False
        if any(name in reached for name in self.flowing[i]):
            return False
        return any(r.name not in reached and few.get(r.name) for r in reads)

    def _candidates_behind(self, names: list[str], reached: set[str], few: dict[str, frozenset[str]],
                           ) -> set[str]:
        """The candidates the values ``names`` are computed from (through values no data reaches)."""
        found: set[str] = set()
        seen: set[str] = set()
        stack = [n for n in names if n not in reached and few.get(n)]
        while stack:
            name = stack.pop()
            if name in seen:
                continue
            seen.add(name)
            i = self.producer.get(name)
            if i is None:
                if name in self.candidates:
                    found.add(name)
                continue
            stack += [n for n in self.passing[i] if n not in reached and n not in seen and few.get(n)]
        return found

    def weight_evidence(self, reached: set[str]) -> dict[str, list[tuple[str, str]]]:
        """Per candidate or initializer: the weight roles (kind, label) of the slots its values reach
        while no data reaches them (a weight slot, or an operand of an op that data reaches)."""
        weights: dict[str, list[tuple[str, str]]] = {}
        for i in self.order:
            node = self.nodes[i]
            op_reached = any(name in reached for name in self.flowing[i])
            for r in self.reads[i]:
                if r.name in reached:
                    continue
                if r.kind in (_WEIGHT, _STATE):
                    role = (r.kind, f"{node.op_type} {r.label}")
                elif r.kind in (_OPERAND, _FIRST_OPERAND) and op_reached:
                    role = (_WEIGHT, f"{node.op_type} operand")
                else:
                    continue
                for name in self._sources(r.name, reached):
                    weights.setdefault(name, []).append(role)
        return weights

    def _sources(self, name: str, reached: set[str]) -> set[str]:
        """The candidates and initializers value ``name`` is computed from, through values no data
        reaches; a weight in a weight slot does not pass on (a Conv's output comes from its input)."""
        found: set[str] = set()
        seen = {name}
        stack = [name]
        while stack:
            value = stack.pop()
            i = self.producer.get(value)
            if i is None:
                if value in self.candidates or value in self.fixed:
                    found.add(value)
                continue
            self._spend(1 + len(self.passing[i]))
            new = [n for n in dict.fromkeys(self.passing[i]) if n not in reached and n not in seen]
            seen.update(new)
            stack += new
        return found

    def direct_kinds(self, reached: set[str]) -> dict[str, set[str]]:
        """Per tensor, the kinds of slots that read it directly (an operand of an op no data reaches
        is "neutral")."""
        direct: dict[str, set[str]] = {}
        for i in self.order:
            op_reached = any(name in reached for name in self.flowing[i])
            for r in self.reads[i]:
                kind = r.kind if r.kind != _OPERAND or op_reached else "neutral"
                kinds = direct.get(r.name)
                if kinds is None:
                    direct[r.name] = {kind}
                else:
                    kinds.add(kind)
        return direct


def classify_inputs(model: onnx.ModelProto) -> InputRoles:
    """Decide, for every tensor the graph reads from outside its nodes, whether it is a parameter,
    a data input or a constant (rules in the module docstring). Reads only structure and declared
    shapes, never tensor values."""
    listed = metadata_parameters(model)
    if listed is not None:
        return _from_metadata(model, listed)
    graph = model.graph
    nodes = list(graph.node)
    initializer_types = {t.name: (t.data_type, math.prod(t.dims)) for t in graph.initializer}
    initializers = {t.name: t for t in graph.initializer}
    for sparse in graph.sparse_initializer:
        initializer_types[sparse.values.name] = (sparse.values.data_type, math.prod(sparse.dims))
    fixed = {n for n, (dtype, numel) in initializer_types.items() if dtype in _FLOAT_TYPES and numel > 1}
    inputs = {v.name: v for v in graph.input if v.name not in initializer_types}
    analysis = _Analysis(nodes, [], fixed)
    produced = {out for outs in analysis.outputs for out in outs}
    read_names = list(dict.fromkeys(r.name for reads in analysis.reads for r in reads))
    undeclared = [n for n in read_names
                  if n not in produced and n not in initializer_types and n not in inputs]
    float_inputs = {n for n, v in inputs.items() if v.type.tensor_type.elem_type in _FLOAT_TYPES}
    analysis.candidates = float_inputs | set(undeclared)

    data = {n for n in inputs if n not in float_inputs}
    evidence_of_data, reached = analysis.decide_data(data)
    data |= set(evidence_of_data)
    weights = analysis.weight_evidence(reached)
    direct = analysis.direct_kinds(reached)  # of the final reach, as the rules below read it

    why_data: dict[str, str] = {}
    parameters: dict[str, str] = {}
    roles: dict[str, tuple[str, ...]] = {}
    constants: dict[str, str] = {}
    unsure: list[str] = []
    undeclared_set = set(undeclared)
    for name in list(inputs) + undeclared:
        only_shape = direct.get(name, set()) <= {_SHAPE, "neutral"} and _SHAPE in direct.get(name, set())
        if name in data and name not in analysis.candidates:  # integer or bool input
            if only_shape:
                constants[name] = "read only as a shape, axes or bounds operand"
            else:
                why_data[name] = "integer or bool input (ids, indices, mask)"
        elif name in data and name in undeclared_set:
            # Exporters declare every data input; an undeclared tensor in an activation slot is a
            # constant the exporter folded (a zero initial state) and then dropped with the weights.
            constants[name] = f"undeclared, read as {evidence_of_data[name]}: a constant of unknown value"
        elif name in data:
            why_data[name] = evidence_of_data[name]
        elif name in weights:
            numel = _declared_numel(inputs[name]) if name in inputs else None
            if numel == 1:
                constants[name] = "a single-element float tensor: a constant, like a scalar initializer"
                continue
            parameters[name] = "undeclared" if name in undeclared_set else "graph input"
            roles[name] = tuple(dict.fromkeys(label for _, label in weights[name]))
        elif name in undeclared_set:
            constants[name] = ("read only as a shape, axes or bounds operand" if only_shape
                               else "no role found: taken for a constant of unknown value")
        elif only_shape:
            constants[name] = "read only as a shape, axes or bounds operand"
        else:
            why_data[name] = "no role found"
            if _declared_numel(inputs[name]) is not None:
                unsure.append(name)
    if len(why_data) == 1 and unsure:
        # A graph's only data input is the data by elimination (a model reads at least one).
        why_data[unsure[0]] = "the graph's only data input"
        unsure = []
    uniform: list[str] = []
    for name in (n for n in initializer_types if n in fixed):  # file order, for stable reports
        if direct.get(name) and direct[name] <= {_SHAPE, _INDEX, _ACTIVATION}:
            # Resize's scales, Clip's bounds, a zero initial state: values, not weights.
            constants[name] = "float initializer read only as a shape, bounds or state operand"
            continue
        value = None if _weight_slot_reads(weights, name) else _uniform_value(initializers[name])
        if value is not None:
            constants[name] = (f"float initializer whose every element holds the same value ({value:g}), "
                               "read only by element-wise ops: a computed buffer, not a trained weight")
            uniform.append(name)
            continue
        parameters[name] = "initializer"
        roles[name] = tuple(dict.fromkeys(label for _, label in weights.get(name, [])))
    state = frozenset(n for n in parameters if n in weights and all(k == _STATE for k, _ in weights[n]))
    undeclared_parameters = [n for n, source in parameters.items() if source == "undeclared"]
    undeclared_uses = _uses(nodes, analysis.order, undeclared_parameters)
    ordered = {n: parameters[n] for n in read_names if n in parameters}
    ordered.update({n: s for n, s in parameters.items() if n not in ordered})
    return InputRoles(
        method="roles",
        parameters=ordered,
        parameter_roles=roles,
        state=state,
        data_inputs={n: why_data[n] for n in inputs if n in why_data},
        constants=constants,
        unsure_data=tuple(unsure),
        undeclared_uses=undeclared_uses,
        notes=tuple(_uniform_notes(uniform) + _exporter_notes(nodes)),
        undetermined=tuple(_batch_norm_unknown(nodes)),
    )


def _uses(nodes: list[onnx.NodeProto], order: list[int], names: list[str],
          ) -> dict[str, tuple[tuple[int, int], ...]]:
    """Per tensor of ``names`` (in that order), the (node index, input index) pairs that read it,
    nodes in ``order``."""
    uses: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    for i in order:
        for j, name in enumerate(nodes[i].input):
            if name in uses:
                uses[name].append((i, j))
    return {n: tuple(places) for n, places in uses.items()}


_PRODUCT_OPS = frozenset({"MatMul", "MatMulInteger", "Einsum", "FusedMatMul"})


def _weight_slot_reads(weights: dict[str, list[tuple[str, str]]], name: str) -> set[str]:
    """The weight roles of ``name`` that a computed buffer does not play: a named weight or state
    slot (a Conv weight, a normalisation's scale, an embedding table) or an operand of a matrix
    product (``x @ W``); what is left is an operand of an element-wise op (added, multiplied)."""
    return {label for _, label in weights.get(name, [])
            if not label.endswith(" operand") or label.split(" ", 1)[0] in _PRODUCT_OPS}


# Above this many elements an initializer's values are not compared (a uniform tensor that large
# is implausible, and comparing costs a copy of its bytes).
_UNIFORM_MAX_ELEMENTS = 1 << 24


def _uniform_value(tensor: onnx.TensorProto) -> float | None:
    """The one value every element of ``tensor`` holds, when it has two or more dimensions, its
    values are stored inline and all equal; None otherwise (values in an external file are unknown)."""
    numel = math.prod(tensor.dims)
    if len(tensor.dims) < 2 or numel < 2 or numel > _UNIFORM_MAX_ELEMENTS:
        return None
    if tensor.data_location == TensorProto.EXTERNAL:
        return None
    if tensor.raw_data:
        raw = tensor.raw_data
        size = len(raw) // numel
        if size == 0 or len(raw) != size * numel or raw != raw[:size] * numel:
            return None
    elif not (tensor.float_data or tensor.double_data or tensor.int32_data):
        return None
    from onnx import numpy_helper

    values = numpy_helper.to_array(tensor)
    first = values.flat[0]
    if not (values == first).all():  # typed fields, or equal bytes decoded (NaN compares unequal)
        return None
    return float(first)


def _uniform_notes(names: list[str]) -> list[str]:
    if not names:
        return []
    listed = ", ".join(repr(n) for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return [f"float initializer(s) {listed} hold one value in every element and only element-wise ops read "
            "them: taken for constants (a buffer such as T5's zero position bias), with no gradient or "
            "optimizer state. If one is a learned tensor still at its initial value, list every parameter in "
            f"metadata_props[{PARAMETERS_METADATA_KEY!r}] (a JSON list of names)"]


_CONV_TYPES = frozenset({"Conv", "ConvTranspose"})
_FOLD_RULE_KEY = "pkg.onnxscript.rewriter.rule_name"


def _exporter_notes(nodes: list[onnx.NodeProto]) -> list[str]:
    """What an exporter's optimiser did that changes a training step's cost (from node metadata: the
    rewriter's rule name)."""
    rules = {prop.value for node in nodes for prop in node.metadata_props if prop.key == _FOLD_RULE_KEY}
    if any("FuseBatchNorm" in rule for rule in rules):
        return ["the exporter's optimiser folded BatchNormalization into the preceding ops "
                "(torch.onnx.export optimize=True): this is an inference graph, without the "
                "BatchNormalization ops and parameters a training step runs; export with optimize=False "
                "(or dynamo=False, training=torch.onnx.TrainingMode.TRAINING) to cost training"]
    return []


def _batch_norm_unknown(nodes: list[onnx.NodeProto]) -> list[str]:
    """Whether BatchNormalization may have been folded away where the file cannot say.

    The graph alone has no sound sign of folding: a convolution with a bias and no
    BatchNormalization after it is both what folding leaves and what a model without BatchNorm is.
    So when the file has convolutions, no BatchNormalization op and no exporter metadata at all
    (commonly stripped by later tools, and never written by the TorchScript exporter), it cannot
    tell; with the dynamo exporter's metadata present, `_exporter_notes` can."""
    types = {node.op_type for node in nodes if node.domain in _DEFAULT_DOMAINS}
    metadata = any(prop.key.startswith("pkg.") for node in nodes for prop in node.metadata_props)
    if types & _CONV_TYPES and "BatchNormalization" not in types and not metadata:
        return ["cannot tell whether BatchNormalization was folded into the convolutions: the file has "
                "convolutions, no BatchNormalization op and no exporter metadata to say. If the model has "
                "BatchNorm, this is an inference graph that costs less than a training step; export it "
                "with torch.onnx.export(..., optimize=False) or dynamo=False, "
                "training=torch.onnx.TrainingMode.TRAINING to cost training"]
    return []


def role_warnings(roles: InputRoles, graph_name: str) -> list[tuple[str, type[Warning]]]:
    """The warnings of `InputRoles.warning_messages` as the importer issues them, each message
    naming the graph: a `DataInputWarning` for float inputs taken for data without a role, a
    UserWarning for each note."""
    issued: list[tuple[str, type[Warning]]] = []
    if roles.unsure_data:
        issued.append((f"graph {graph_name!r}: {_unsure_data_message(roles.unsure_data)}", DataInputWarning))
    issued += [(f"graph {graph_name!r}: {note}", UserWarning) for note in roles.notes]
    return issued
