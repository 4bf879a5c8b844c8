"""Fine-grained unrolled LSTM graphs "as TensorFlow would see them": GNMT and RNNLM with every LSTM cell
of every layer and time step spelled out as the element-wise ops of a TensorFlow 1.x ``BasicLSTMCell``
(Concat of input and state, MatMul, bias Add, Split into four gates, the forget bias Add, three Sigmoid,
two Tanh, three Mul and the state Add: 14 ops a cell), written directly with ``onnx.helper`` (no torch:
an export of 100,000 ops would take many minutes) and imported with `placement_gym.graph.onnx_import`.

Mirhoseini et al. (ICLR 2018) placed TensorFlow graphs of NMT with 2, 4 and 8 layers, graphs of over
80,000 ops; GDP (Zhou et al. 2019) held out an 8-layer GNMT of over 50,000 nodes (docs/references.md).
A forward graph here becomes a training task of about twice its ops and one more per weight-owning op
(`placement_gym.task.compiled`).

Structure (the same construction as `placement_gym.export.models.lstm`, cell by cell, at TensorFlow's
granularity): ``gnmt`` has an encoder and a decoder of ``layers`` LSTM layers of ``hidden`` units over
``steps`` source and ``steps`` target tokens, residual connections from the third layer up (Wu et al.
2016), additive attention (Bahdanau et al. 2015) queried by the bottom decoder layer at every target step
over all encoder outputs and fed with the layer's input to every upper decoder layer, and at every target
step a projection to the vocabulary and a log-softmax. ``rnnlm`` is a stack of ``layers`` LSTM layers
over ``steps`` tokens with a projection and log-softmax at every step (Zaremba et al. 2014). States start
at zero, as in `placement_gym.export.models.lstm`: the first step of a layer reads a zero state (its
Concat takes a zero constant), so every step has the same 14 ops.

Weights are graph inputs without values (weight-free, as the bundled graphs are), listed as parameters
in the file's metadata (`placement_gym.graph.parameters.PARAMETERS_METADATA_KEY`) and shared by every
time step, as TensorFlow shares a cell's variables.
"""

from __future__ import annotations

import json
from typing import Any

import onnx
from onnx import TensorProto, helper

from placement_gym.graph.onnx_import import import_own_model
from placement_gym.graph.opgraph import OpGraph
from placement_gym.graph.parameters import PARAMETERS_METADATA_KEY

OPSET = 17
# TensorFlow's BasicLSTMCell adds 1.0 to the forget gate's pre-activation (its forget_bias default).
FORGET_BIAS = 1.0


class _Writer:
    """Nodes, weight inputs and constants of one graph, named uniquely."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.weights: list[onnx.ValueInfoProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.data: list[onnx.ValueInfoProto] = []

    def op(self, op_type: str, inputs: list[str], name: str, n_outputs: int = 1, **attrs: Any) -> list[str]:
        outputs = [name] if n_outputs == 1 else [f"{name}:{i}" for i in range(n_outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=name, **attrs))
        return outputs

    def one(self, op_type: str, inputs: list[str], name: str, **attrs: Any) -> str:
        return self.op(op_type, inputs, name, **attrs)[0]

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        self.weights.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape)))
        return name

    def constant(self, name: str, data_type: int, shape: tuple[int, ...], values: list | bytes) -> str:
        raw = isinstance(values, bytes)  # raw little-endian bytes (the zero state)
        self.initializers.append(helper.make_tensor(name, data_type, list(shape), values, raw=raw))
        return name

    def data_input(self, name: str, data_type: int, shape: tuple[int, ...]) -> str:
        self.data.append(helper.make_tensor_value_info(name, data_type, list(shape)))
        return name

    def model(self, name: str, outputs: list[tuple[str, tuple[int, ...]]]) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name, self.data + self.weights,
            [helper.make_tensor_value_info(o, TensorProto.FLOAT, list(shape)) for o, shape in outputs],
            self.initializers,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        names = json.dumps([w.name for w in self.weights])
        model.metadata_props.add(key=PARAMETERS_METADATA_KEY, value=names)
        return model


class _Cells:
    """LSTM layers whose weights are shared by every step: ``cell`` writes one step of one layer."""

    def __init__(self, w: _Writer, batch: int, hidden: int) -> None:
        self.w, self.batch, self.hidden = w, batch, hidden
        self.split = w.constant("gate_sizes", TensorProto.INT64, (4,), [hidden] * 4)
        self.forget_bias = w.constant("forget_bias", TensorProto.FLOAT, (), [FORGET_BIAS])
        self.zero = w.constant("zero_state", TensorProto.FLOAT, (batch, hidden), bytes(4 * batch * hidden))
        self.layers: dict[str, tuple[str, str]] = {}

    def define(self, layer: str, d_in: int) -> None:
        h = self.hidden
        self.layers[layer] = (self.w.weight(f"{layer}/kernel", (d_in + h, 4 * h)),
                              self.w.weight(f"{layer}/bias", (4 * h,)))

    def cell(self, layer: str, step: int, x: str, state: tuple[str, str] | None) -> tuple[str, str]:
        w, (kernel, bias) = self.w, self.layers[layer]
        p = f"{layer}/t{step}"
        h_prev, c_prev = state if state is not None else (self.zero, self.zero)
        joined = w.one("Concat", [x, h_prev], f"{p}/concat", axis=1)
        gates = w.one("Add", [w.one("MatMul", [joined, kernel], f"{p}/matmul"), bias], f"{p}/bias_add")
        i, j, f, o = w.op("Split", [gates, self.split], f"{p}/split", n_outputs=4, axis=1)
        forget = w.one("Sigmoid", [w.one("Add", [f, self.forget_bias], f"{p}/forget_bias")], f"{p}/sigmoid_f")
        kept = w.one("Mul", [c_prev, forget], f"{p}/mul_c")
        new = w.one("Mul", [w.one("Sigmoid", [i], f"{p}/sigmoid_i"), w.one("Tanh", [j], f"{p}/tanh_j")],
                    f"{p}/mul_ij")
        c = w.one("Add", [kept, new], f"{p}/new_c")
        squashed = w.one("Tanh", [c], f"{p}/tanh_c")
        h = w.one("Mul", [squashed, w.one("Sigmoid", [o], f"{p}/sigmoid_o")], f"{p}/new_h")
        return h, c


def _embed(w: _Writer, ids: str, table: str, step: int, prefix: str) -> str:
    index = w.constant(f"{prefix}/index_t{step}", TensorProto.INT64, (), [step])
    tokens = w.one("Gather", [ids, index], f"{prefix}/tokens_t{step}", axis=0)  # ids are (steps, batch)
    return w.one("Gather", [table, tokens], f"{prefix}/embed_t{step}", axis=0)


def _output(w: _Writer, h: str, projection: str, step: int) -> str:
    logits = w.one("MatMul", [h, projection], f"output/logits_t{step}")
    return w.one("LogSoftmax", [logits], f"output/log_softmax_t{step}", axis=1)


def _check_sizes(kind: str, layers: int, hidden: int, steps: int, batch: int, vocab: int) -> None:
    if layers < 1 or hidden < 1 or steps < 1 or batch < 1 or vocab < 1:
        raise ValueError(f"{kind} needs layers, hidden, steps, batch and vocab >= 1, got {layers}, {hidden}, "
                         f"{steps}, {batch}, {vocab}")


def gnmt_model(layers: int, hidden: int, steps: int, batch: int, vocab: int = 32_000,
               name: str = "gnmt") -> onnx.ModelProto:
    """The unrolled GNMT of the module docstring as an ONNX model (weight-free)."""
    _check_sizes("gnmt", layers, hidden, steps, batch, vocab)
    w = _Writer()
    src = w.data_input("src_ids", TensorProto.INT64, (steps, batch))
    tgt = w.data_input("tgt_ids", TensorProto.INT64, (steps, batch))
    src_table = w.weight("encoder/embedding", (vocab, hidden))
    tgt_table = w.weight("decoder/embedding", (vocab, hidden))
    cells = _Cells(w, batch, hidden)
    for k in range(layers):
        cells.define(f"encoder/l{k}", hidden)
        cells.define(f"decoder/l{k}", hidden if k == 0 else 2 * hidden)  # upper layers also read the context
    memory_w = w.weight("attention/memory_kernel", (hidden, hidden))
    query_w = w.weight("attention/query_kernel", (hidden, hidden))
    score_v = w.weight("attention/v", (hidden, 1))
    projection = w.weight("output/kernel", (hidden, vocab))
    axes = w.constant("attention/axes", TensorProto.INT64, (1,), [1])

    states: list[tuple[str, str] | None] = [None] * layers
    tops: list[str] = []
    for t in range(steps):
        x = _embed(w, src, src_table, t, "encoder")
        for k in range(layers):
            h, c = cells.cell(f"encoder/l{k}", t, x, states[k])
            states[k] = (h, c)
            x = w.one("Add", [x, h], f"encoder/l{k}/t{t}/residual") if k >= 2 else h
        tops.append(w.one("Unsqueeze", [x, axes], f"encoder/top_t{t}"))
    # (batch, steps, hidden)
    memory = w.one("Concat", tops, "encoder/memory", axis=1) if steps > 1 else tops[0]
    keys = w.one("MatMul", [memory, memory_w], "attention/keys")
    outputs: list[tuple[str, tuple[int, ...]]] = []
    for t in range(steps):  # the decoder starts from the encoder's final states
        x = _embed(w, tgt, tgt_table, t, "decoder")
        h, c = cells.cell("decoder/l0", t, x, states[0])
        states[0] = (h, c)
        p = f"attention/t{t}"
        query = w.one("Unsqueeze", [w.one("MatMul", [h, query_w], f"{p}/query"), axes], f"{p}/query_3d")
        energy = w.one("Tanh", [w.one("Add", [keys, query], f"{p}/add")], f"{p}/tanh")
        weights = w.one("Softmax", [w.one("MatMul", [energy, score_v], f"{p}/score")], f"{p}/softmax", axis=1)
        context = w.one("ReduceSum", [w.one("Mul", [weights, memory], f"{p}/weighted"), axes], f"{p}/context",
                        keepdims=0)
        x = h
        for k in range(1, layers):
            joined = w.one("Concat", [x, context], f"decoder/l{k}/t{t}/with_context", axis=1)
            h, c = cells.cell(f"decoder/l{k}", t, joined, states[k])
            states[k] = (h, c)
            x = w.one("Add", [x, h], f"decoder/l{k}/t{t}/residual") if k >= 2 else h
        outputs.append((_output(w, x, projection, t), (batch, vocab)))
    return w.model(name, outputs)


def rnnlm_model(layers: int, hidden: int, steps: int, batch: int, vocab: int = 10_000,
                name: str = "rnnlm") -> onnx.ModelProto:
    """The unrolled RNN language model of the module docstring as an ONNX model (weight-free)."""
    _check_sizes("rnnlm", layers, hidden, steps, batch, vocab)
    w = _Writer()
    ids = w.data_input("token_ids", TensorProto.INT64, (steps, batch))
    table = w.weight("embedding", (vocab, hidden))
    cells = _Cells(w, batch, hidden)
    for k in range(layers):
        cells.define(f"l{k}", hidden)
    projection = w.weight("output/kernel", (hidden, vocab))
    states: list[tuple[str, str] | None] = [None] * layers
    outputs: list[tuple[str, tuple[int, ...]]] = []
    for t in range(steps):
        x = _embed(w, ids, table, t, "input")
        for k in range(layers):
            x, c = cells.cell(f"l{k}", t, x, states[k])
            states[k] = (x, c)
        outputs.append((_output(w, x, projection, t), (batch, vocab)))
    return w.model(name, outputs)


_MODELS = {"gnmt": gnmt_model, "rnnlm": rnnlm_model}


def unrolled_builder(kind: str):
    """``build(params, seed, name)`` of the ``kind`` family (``gnmt`` or ``rnnlm``): the model written and
    imported; a ValueError when the import warns (the family would be broken)."""
    make = _MODELS[kind]

    def build(params: dict[str, Any], seed: int, name: str) -> OpGraph:
        model = make(int(params["layers"]), int(params["hidden"]), int(params["steps"]), int(params["batch"]),
                     name=name)
        return import_own_model(model, name)

    return build
