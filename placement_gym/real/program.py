"""A graph's ops as torch calls: the program the real-hardware executor runs, built from the ONNX model
the graph was imported from.

`build_program` finds each op's node by the importer's op names (`placement_gym.graph.onnx_import.
onnx_ops`), reads its attributes and the source of every input (a data input, a parameter the op owns,
a constant, or a tensor an earlier op produced or a shared parameter), and trains exactly the
parameters the importer counts. `make_parameters` and `make_inputs` give the seeded random weights and
data (the same for every placement), `call_op` runs one op's torch function (`placement_gym.real.ops`),
and `run_reference_forward` runs the whole graph op by op on the CPU: the outputs any placement's
forward must reproduce. `placement_gym.real.executor` runs a program under a placement;
`placement_gym.real.measure` times its ops one by one.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from placement_gym.graph.bundled import bundled_onnx_file
from placement_gym.graph.onnx_import import import_onnx, is_constant_node, node_attributes, onnx_ops
from placement_gym.graph.opgraph import OpGraph
from placement_gym.task.compiled import Task


class UnsupportedOpError(NotImplementedError, ValueError):
    """A graph has an op the torch executor cannot run (an op type without a torch function, an
    attribute combination it refuses, another domain, control flow). The message is one line naming
    the op and its node. A ValueError too, so that the command line reports it as bad input (exit
    code 2, one line) and code that catches bad graphs catches it."""


def model_source(source: Any) -> onnx.ModelProto | str | Path | None:
    """The ONNX model behind the graph argument a task was built from (what `get_task` and the envs
    take as ``graph``): ``source`` itself when it is a ModelProto or the path of an existing file;
    None for anything else (a bundled graph's name, an `OpGraph`, a `Task`), whose model
    `load_model` finds on its own or asks for."""
    if isinstance(source, onnx.ModelProto):
        return source
    if isinstance(source, (str, Path)) and Path(source).is_file():
        return source
    return None


def load_model(graph: OpGraph, model: onnx.ModelProto | str | Path | None) -> onnx.ModelProto:
    """The ONNX model `graph` was imported from: ``model`` if given, else the bundled file."""
    if isinstance(model, onnx.ModelProto):
        return model
    if model is not None:
        path = Path(model)
        if not path.is_file():
            raise FileNotFoundError(
                f"{path} does not exist or is not a file (expected the graph's .onnx file)"
            )
        return onnx.load(str(path))
    bundled = bundled_onnx_file(graph)
    if bundled is not None:
        return onnx.load(str(bundled))
    raise ValueError(
        f"graph {graph.name!r} is not a bundled graph (or its sha256 differs from the bundled file): pass "
        "model= (the ONNX file or ModelProto the graph was imported from) to run it on real devices"
    )


def unsupported_ops(nodes: list[onnx.NodeProto], opset: int) -> list[str]:
    """One line per op of ``nodes`` that the torch executor cannot run: the node's name, its type and why."""
    from placement_gym.real.ops import unsupported_reason

    problems = []
    for node in nodes:
        if node.domain not in ("", "ai.onnx"):
            reason = f"domain {node.domain!r}: only default-domain ONNX ops run on the torch executor"
        elif any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
            reason = "a subgraph: control flow is not supported by the torch executor"
        else:
            attrs = {**_torch_attributes(node), "_opset": opset, "_n_outputs": len(node.output)}
            reason = unsupported_reason(node.op_type, attrs)
        if reason:
            problems.append(f"op {node.name!r} ({node.op_type}): {reason}")
    return problems


def _op_nodes(graph: OpGraph, model: onnx.ModelProto) -> list[onnx.NodeProto]:
    """The node of each op of `graph`, found by the importer's op names (`onnx_ops`)."""
    ops, names = onnx_ops(model.graph)
    by_name = dict(zip(names, ops, strict=True))
    missing = [name for name in graph.op_names if name not in by_name]
    if missing or len(by_name) != graph.n_ops:
        raise ValueError(
            f"the ONNX model does not match graph {graph.name!r}: {len(by_name)} ops in the model, "
            f"{graph.n_ops} in the graph, ops not found: {missing[:5]}"
        )
    nodes = [by_name[name] for name in graph.op_names]
    for node, op_type in zip(nodes, graph.op_types, strict=True):
        if node.op_type != op_type:
            raise ValueError(f"the ONNX model does not match graph {graph.name!r}: op {node.name!r} has a "
                             f"different type ({node.op_type} in the model, {op_type} in the graph)")
    return nodes


def _torch_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """`node_attributes` with strings decoded, as the torch functions of `placement_gym.real.ops`
    read them; a subgraph (control flow) is refused."""
    if any(attr.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for attr in node.attribute):
        raise NotImplementedError(f"op {node.name!r} ({node.op_type}) has a subgraph: control flow "
                                  "is not supported by the torch executor")
    return {name: value.decode() if isinstance(value, bytes) else value
            for name, value in node_attributes(node).items()}


@dataclass
class Program:
    """A graph's ops as torch calls: per op its node, attributes and where each input comes from."""

    graph: OpGraph
    op_types: list[str]
    attrs: list[dict[str, Any]]
    sources: list[list[tuple[str, str] | None]]  # per op input: (kind, name); kind data|param|const|tensor
    outputs: list[list[str]]  # per op: output names ("" for an omitted output)
    owned: list[list[str]]  # per op: the parameters it owns
    shared: dict[str, int]  # shared parameter -> owner op
    parameter_shapes: dict[str, tuple[int, ...]]
    parameter_order: list[str]
    data_shapes: dict[str, tuple[int, ...]]
    data_types: dict[str, int]
    constants: dict[str, np.ndarray]
    const_overrides: dict[tuple[int, int], np.ndarray]
    output_names: list[str]
    consumers: dict[str, list[int]] = field(default_factory=dict)  # produced tensor -> consumer ops
    int_bounds: dict[str, int] = field(default_factory=dict)  # integer data input -> exclusive upper bound


def check_runnable(model: onnx.ModelProto, name: str) -> None:
    """Raise `UnsupportedOpError` (one line: the first op the torch executor cannot run, its node and
    why, and how many more) when ``model`` (of graph ``name``) has such an op; `build_program` calls it."""
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    problems = unsupported_ops(onnx_ops(model.graph)[0], opset)
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise UnsupportedOpError(f"graph {name!r} cannot run on the torch executor: {problems[0]}{more}")


def build_program(graph: OpGraph, model: onnx.ModelProto, batch: int | None) -> Program:
    """Match the model's nodes to the graph's ops. An op the torch executor cannot run (by its type,
    domain or attributes: `unsupported_ops`) raises `UnsupportedOpError` here, before any weight is
    made; a problem only the input values show is reported when the op runs (the placement is
    infeasible, not a crash)."""
    nodes = _op_nodes(graph, model)
    check_runnable(model, graph.name)
    g = model.graph
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13)
    initializers = {t.name: t for t in g.initializer}
    inputs = {v.name: v for v in g.input}
    # The importer's own account (metadata, initializers, roles of graph inputs, shapes of undeclared
    # weights), so that a real step trains exactly the parameters the cost model counts.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # given once already, when the graph was loaded
        imported_shapes = {p.name: p.shape for p in import_onnx(model, name=graph.name).parameters}
    parameters = set(imported_shapes)
    constants: dict[str, np.ndarray] = {
        name: numpy_helper.to_array(t) for name, t in initializers.items() if name not in parameters
    }
    for node in g.node:
        if is_constant_node(node):
            from placement_gym.real.ops import OP_TABLE

            constants[node.output[0]] = OP_TABLE["Constant"]([], _torch_attributes(node)).numpy()
    data_shapes = {name: tuple(shape) for name, shape in graph.data_inputs}
    data_types = {name: inputs[name].type.tensor_type.elem_type for name in data_shapes}

    original_batch = None
    if batch is not None:
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise ValueError(f"batch must be a positive integer or None, got {batch!r}")
        leading = {shape[0] for shape in data_shapes.values() if shape}
        if len(leading) != 1:
            raise ValueError(f"graph {graph.name!r}: cannot change the batch, its data inputs do not "
                             f"share one leading dimension ({dict(data_shapes)})")
        original_batch = leading.pop()
        if batch > original_batch:
            raise ValueError(f"batch {batch} is larger than the graph's batch {original_batch}: only a "
                             "smaller batch is supported")
        data_shapes = {name: (int(batch), *shape[1:]) for name, shape in data_shapes.items()}

    def parameter_shape(name: str) -> tuple[int, ...]:
        if name in imported_shapes:
            return imported_shapes[name]
        if name in initializers:
            return tuple(initializers[name].dims)
        dims = inputs[name].type.tensor_type.shape.dim
        if not all(d.HasField("dim_value") for d in dims):
            raise ValueError(f"parameter {name!r} has no static shape")
        return tuple(int(d.dim_value) for d in dims)

    op_types, attrs, sources, outputs, owned = [], [], [], [], []
    owner: dict[str, int] = {}
    shared: dict[str, int] = {}
    overrides: dict[tuple[int, int], np.ndarray] = {}
    consumers: dict[str, list[int]] = {}
    produced: set[str] = set()
    int_bounds: dict[str, int] = {}
    parameter_shapes: dict[str, tuple[int, ...]] = {}
    for k, node in enumerate(nodes):
        op_attrs = _torch_attributes(node)
        op_attrs["_opset"] = opset
        op_attrs["_n_outputs"] = len(node.output)
        op_types.append(node.op_type)
        attrs.append(op_attrs)
        op_sources: list[tuple[str, str] | None] = []
        op_owned: list[str] = []
        for i, name in enumerate(node.input):
            if not name:
                op_sources.append(None)
            elif name in data_shapes:
                op_sources.append(("data", name))
            elif name in parameters:
                if name not in owner:
                    owner[name] = k
                    op_owned.append(name)
                    parameter_shapes[name] = parameter_shape(name)
                if owner[name] == k:
                    op_sources.append(("param", name))
                else:
                    shared[name] = owner[name]
                    op_sources.append(("tensor", name))
                    consumers.setdefault(name, []).append(k)
            elif name in constants:
                op_sources.append(("const", name))
                if (original_batch is not None and node.op_type == "Reshape" and i == 1
                        and constants[name].size and int(constants[name].reshape(-1)[0]) == original_batch):
                    # A shape that starts with the batch (x.view(batch, ...)) follows the smaller batch.
                    value = constants[name].copy().reshape(-1)
                    value[0] = batch
                    overrides[(k, i)] = value
            elif name in produced:
                op_sources.append(("tensor", name))
                if k not in consumers.setdefault(name, []):
                    consumers[name].append(k)
            else:
                raise ValueError(f"op {node.name!r} reads {name!r}, which is neither produced before it, a "
                                 "data input, a parameter nor a constant")
            if node.op_type == "Gather" and i == 1 and name in data_shapes and node.input[0] in parameters:
                axis = op_attrs.get("axis", 0)
                size = parameter_shape(node.input[0])[axis]
                int_bounds[name] = min(int_bounds.get(name, size), size)
        for name in node.output:
            if name:
                produced.add(name)
        sources.append(op_sources)
        outputs.append(list(node.output))
        owned.append(op_owned)
    order = [name for k in range(len(nodes)) for name in owned[k]]
    return Program(
        graph=graph, op_types=op_types, attrs=attrs, sources=sources, outputs=outputs, owned=owned,
        shared=shared, parameter_shapes=parameter_shapes, parameter_order=order, data_shapes=data_shapes,
        data_types=data_types, constants=constants, const_overrides=overrides,
        output_names=[v.name for v in g.output], consumers=consumers, int_bounds=int_bounds,
    )


# --- weights and inputs -----------------------------------------------------------------------------


def _fan_in(op_type: str, attrs: dict[str, Any], index: int, shape: tuple[int, ...]) -> int:
    if op_type == "Gemm" and index == 1:
        return shape[1] if attrs.get("transB", 0) else shape[0]
    if op_type == "MatMul" and len(shape) >= 2:
        return shape[-2]
    return max(1, math.prod(shape[1:]))


def make_parameters(program: Program, seed: int) -> dict[str, Any]:
    """Random CPU weights (float32), the same for every placement: one generator, a fixed order.

    Scales keep activations of deep graphs finite: weights ~ N(0, 1/fan_in); biases and shifts
    N(0, 0.02^2); normalisation scales and variances around 1 (variances positive).
    """
    import torch

    generator = torch.Generator().manual_seed(int(seed))
    roles: dict[str, tuple[str, int, dict[str, Any]]] = {}
    for k, sources in enumerate(program.sources):
        for i, source in enumerate(sources):
            if source and source[0] == "param" and source[1] not in roles:
                roles[source[1]] = (program.op_types[k], i, program.attrs[k])
    weights: dict[str, torch.Tensor] = {}
    for name in program.parameter_order:
        shape = program.parameter_shapes[name]
        op_type, index, attrs = roles[name]
        noise = torch.randn(shape, generator=generator)
        if op_type == "BatchNormalization" and index in (1, 4):
            value = 1.0 + 0.1 * noise.abs() if index == 4 else 1.0 + 0.1 * noise
        elif op_type == "LayerNormalization" and index == 1:
            value = 1.0 + 0.1 * noise
        elif len(shape) <= 1:
            value = 0.02 * noise
        elif op_type == "Gather" and index == 0:
            value = 0.1 * noise
        else:
            value = noise / math.sqrt(_fan_in(op_type, attrs, index, shape))
        weights[name] = value
    return weights


def make_inputs(program: Program, seed: int, microbatch: int = 0) -> dict[str, Any]:
    """Random CPU data inputs: floats N(0, 1), integers uniform in [0, bound) (bound: the table a
    Gather indexes with them, else 2). ``microbatch``: which micro-batch of a pipelined step (each has
    its own data; micro-batch 0's is that of a step without micro-batches)."""
    import torch

    from placement_gym.real.ops import ONNX_TO_TORCH_DTYPE

    if isinstance(microbatch, bool) or not isinstance(microbatch, (int, np.integer)) or microbatch < 0:
        raise ValueError(f"microbatch must be an integer >= 0, got {microbatch!r}")
    stream = int(seed) + 1 if microbatch == 0 else int(
        np.random.SeedSequence([int(seed), int(microbatch)]).generate_state(1)[0])
    generator = torch.Generator().manual_seed(stream)
    values: dict[str, torch.Tensor] = {}
    for name, shape in program.data_shapes.items():
        dtype = ONNX_TO_TORCH_DTYPE.get(program.data_types[name], torch.float32)
        if dtype.is_floating_point:
            values[name] = torch.randn(shape, generator=generator).to(dtype)
        else:
            bound = program.int_bounds.get(name, 2)
            values[name] = torch.randint(0, bound, shape, generator=generator).to(dtype)
    return values


def call_op(program: Program, k: int, args: list[Any]) -> tuple[Any, ...]:
    """The outputs of op ``k``'s torch function on ``args``; an op type without one, or one that gives
    fewer outputs than the graph reads, raises NotImplementedError (the executor reports it as an
    infeasible placement)."""
    return op_results(program, k, op_function(program, k)(args, program.attrs[k]))


def op_function(program: Program, k: int) -> Any:
    """Op ``k``'s torch function (`placement_gym.real.ops.OP_TABLE`); NotImplementedError if its type
    has none."""
    from placement_gym.real.ops import OP_TABLE

    fn = OP_TABLE.get(program.op_types[k])
    if fn is None:
        raise NotImplementedError(
            f"op type {program.op_types[k]} has no torch function in placement_gym.real.ops.OP_TABLE"
        )
    return fn


def last_read_output(program: Program, k: int) -> int:
    """The highest index of op ``k``'s outputs that a later op or the graph's outputs read (-1: none)."""
    return max((i for i, name in enumerate(program.outputs[k]) if name and (
        name in program.consumers or name in program.output_names)), default=-1)


def op_results(program: Program, k: int, result: Any, last_read: int | None = None) -> tuple[Any, ...]:
    """Op ``k``'s torch function's ``result`` as a tuple of outputs; NotImplementedError when it has
    fewer than the graph reads. ``last_read``: `last_read_output` of the op, when already known."""
    results = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    needed = last_read_output(program, k) if last_read is None else last_read
    if needed >= len(results):
        raise NotImplementedError(f"{program.op_types[k]}: output {needed} is used but the torch function "
                                  f"gives only {len(results)} output(s)")
    return results


def constant_tensor(program: Program, k: int, i: int, name: str, device: Any) -> Any:
    """Constant input ``i`` (named ``name``) of op ``k`` as a tensor for torch ``device``; integer
    constants stay on the CPU (see `placement_gym.real.ops`)."""
    import torch

    value = program.const_overrides.get((k, i), program.constants[name])
    tensor = torch.from_numpy(np.array(value, copy=True))
    if tensor.is_floating_point() and device.type != "cpu":
        tensor = tensor.to(device)
    return tensor


def reference_arguments(
    program: Program,
    k: int,
    data: Mapping[str, Any],
    weights: Mapping[str, Any],
    values: Mapping[str, Any],
    constant: Callable[[int, str], Any],
) -> list[Any]:
    """The arguments of op ``k`` in a single-device pass: data inputs, parameters, the values of
    earlier ops (a shared parameter read from its owner is the parameter itself), and for a
    constant slot ``constant(slot index, constant name)``."""
    args: list[Any] = []
    for i, source in enumerate(program.sources[k]):
        if source is None:
            args.append(None)
        elif source[0] == "data":
            args.append(data[source[1]])
        elif source[0] == "param":
            args.append(weights[source[1]])
        elif source[0] == "const":
            args.append(constant(i, source[1]))
        else:
            args.append(values[source[1]] if source[1] in values else weights[source[1]])
    return args


def run_reference_forward(task: Task, seed: int = 0, model: onnx.ModelProto | str | Path | None = None,
                          batch: int | None = None) -> dict[str, Any]:
    """Graph outputs (name -> CPU tensor) of a plain single-device, op-by-op forward of the task's graph
    with the weights and inputs `placement_gym.real.executor.Executor` uses for the same ``seed`` and
    ``batch``."""
    import torch

    program = build_program(task.graph, load_model(task.graph, model), batch)
    weights = make_parameters(program, seed)
    data = make_inputs(program, seed)
    cpu = torch.device("cpu")
    values: dict[str, Any] = {}
    with torch.no_grad():
        for k in range(len(program.sources)):
            def constant(i, name, k=k):
                return constant_tensor(program, k, i, name, cpu)

            args = reference_arguments(program, k, data, weights, values, constant)
            for name, result in zip(program.outputs[k], call_op(program, k, args), strict=False):
                if name:
                    values[name] = result
    return {name: values[name] for name in program.output_names if name in values}
