"""Graph families: each makes an `OpGraph` from a few parameters and a seed, deterministically.

Synthetic families (numpy only, milliseconds a graph):

* ``regal``: random computation graphs in the manner of REGAL's procedurally generated ones (a DAG in
  which each op reads one to three of the ops shortly before it, op kinds drawn from matmul, conv,
  element-wise, normalisation and reduction with sizes drawn log-uniformly). Parameters: ``ops``.
* ``enas-conv``: convolutional networks of ENAS-style cells, as Placeto's cifar10 family: a stem
  convolution, then ``cells`` cells of ``nodes`` nodes each (reduction cells, halving the image and
  doubling the channels, at a third and two thirds of the depth); a node adds two branches, each a
  choice among 3x3 and 5x5 convolutions, separable convolutions, max and average pooling and the
  identity applied to an earlier node or to one of the two previous cells' outputs; a cell
  concatenates its unused nodes and reduces them with a 1x1 convolution; every convolution is
  ReLU, convolution, batch normalisation. CIFAR images (32 x 32). Parameters: ``cells``, ``nodes``,
  ``channels``, ``batch``.
* ``enas-rnn``: recurrent language models of ENAS-style cells, as Placeto's ptb family: each of
  ``steps`` time steps embeds a token, runs a cell of ``nodes`` nodes (each a matmul of an earlier node
  and an activation; the cell's output averages its unused nodes) and a softmax over a 10,000-word
  vocabulary. Parameters: ``nodes``, ``hidden``, ``steps``, ``batch``.

The choices inside a graph (edges, kinds, operations) come from a generator seeded with the graph's
seed; the same parameters and seed give the same graph, bit for bit (`OpGraph.content_sha256`).

Architecture families (`placement_gym.datasets.architectures`: ResNet, Inception, EfficientNet, ConvNeXt,
U-Net, ViT, BERT, GPT-2, Llama, mixture of experts, T5, RNNLM, GNMT, Whisper) export a plain-torch model
per graph: seconds a graph, so a dataset caches what they build; their seed plays no part.

Unrolled families (`placement_gym.datasets.unrolled`: ``gnmt-tf``, ``rnnlm-tf``) write GNMT and RNNLM at
TensorFlow's granularity, 14 element-wise ops an LSTM cell, with ``onnx.helper`` (no torch) and import
them: up to 100,000 ops and more a graph, cached as the architectures are. Parameters: ``layers``,
``hidden``, ``steps``, ``batch``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from placement_gym.datasets.architectures import ARCHITECTURES, architecture_builder, worker_setup
from placement_gym.datasets.builder import GraphBuilder
from placement_gym.graph.opgraph import OpGraph


@dataclass(frozen=True)
class Family:
    """A graph family: ``build(params, seed, name)`` and what it is; ``worker_setup``: what a process
    that builds its graphs runs first."""

    name: str
    kind: str  # "synthetic", "architecture" (exported from torch) or "unrolled" (written with onnx.helper)
    description: str
    build: Callable[[dict[str, Any], int, str], OpGraph]
    worker_setup: Callable[[], None] | None = None

    @property
    def cached(self) -> bool:
        """Whether a dataset keeps the graphs it built (an export takes seconds; a synthetic graph is
        rebuilt faster than it is read)."""
        return self.kind in ("architecture", "unrolled")

    @property
    def needs_torch(self) -> bool:
        """Whether building a graph exports a torch model (the export extra)."""
        return self.kind == "architecture"


def _log_uniform(rng: np.random.Generator, low: float, high: float) -> float:
    return float(np.exp(rng.uniform(np.log(low), np.log(high))))


# --- regal ------------------------------------------------------------------------------------------

# (op type, category, share of ops)
_REGAL_KINDS = (("MatMul", "matmul", 0.35), ("Conv", "conv", 0.2), ("Add", "elementwise", 0.25),
                ("LayerNormalization", "normalization", 0.12), ("ReduceMean", "reduction", 0.08))


def regal_graph(params: dict[str, Any], seed: int, name: str) -> OpGraph:
    rng = np.random.default_rng(seed)
    n_ops = int(params["ops"])
    window = int(rng.integers(4, 33))
    kinds = rng.choice(len(_REGAL_KINDS), size=n_ops, p=[share for *_, share in _REGAL_KINDS])
    builder = GraphBuilder(name)
    outputs = [builder.data_input("input", _log_uniform(rng, 1e3, 1e6))]
    for i in range(n_ops):
        op_type, category, _ = _REGAL_KINDS[int(kinds[i])]
        earlier = outputs[max(0, len(outputs) - window):]
        k = min(int(rng.integers(1, 4)), len(earlier))
        reads = sorted(earlier[int(j)] for j in rng.permutation(len(earlier))[:k])
        elements = _log_uniform(rng, 1e3, 1e6)
        if category in ("matmul", "conv"):
            depth = _log_uniform(rng, 32, 1024)
            flops = 2.0 * elements * depth * (9.0 if category == "conv" else 1.0)
            param_elements = depth * _log_uniform(rng, 32, 1024) if rng.random() < 0.5 else 0.0
        else:
            flops = elements * (5.0 if category == "normalization" else 1.0)
            param_elements = 0.0
        outputs.append(builder.add(f"op{i}", op_type, category, reads, elements, flops, param_elements))
    return builder.build()


# --- enas-conv ----------------------------------------------------------------------------------------

_CONV_CHOICES = ("conv3x3", "conv5x5", "sep3x3", "sep5x5", "maxpool", "avgpool", "identity")


class _ConvNet:
    """Costs of the ENAS conv cells' operations on ``batch`` images."""

    def __init__(self, builder: GraphBuilder, batch: int) -> None:
        self.b, self.batch = builder, batch

    def conv(self, name: str, x: int, size: int, c_in: int, c_out: int, k: int, stride: int = 1,
             depthwise: bool = False) -> int:
        """ReLU, convolution, batch normalisation; the output tensor."""
        out = size // stride
        elements_in = self.batch * size * size * c_in
        elements = self.batch * out * out * c_out
        relu = self.b.add(f"{name}/relu", "Relu", "elementwise", [x], elements_in, elements_in)
        if depthwise:  # a k x k depthwise then a 1x1 pointwise convolution
            mid = self.batch * out * out * c_in
            dw = self.b.add(f"{name}/depthwise", "Conv", "conv", [relu], mid, 2.0 * mid * k * k, c_in * k * k)
            conv = self.b.add(f"{name}/pointwise", "Conv", "conv", [dw], elements, 2.0 * elements * c_in,
                              c_in * c_out)
        else:
            conv = self.b.add(f"{name}/conv", "Conv", "conv", [relu], elements,
                              2.0 * elements * c_in * k * k, c_in * c_out * k * k)
        return self.b.add(f"{name}/bn", "BatchNormalization", "normalization", [conv], elements,
                          4.0 * elements, 2 * c_out)

    def pool(self, name: str, op_type: str, x: int, size: int, channels: int, stride: int) -> int:
        out = size // stride
        elements = self.batch * out * out * channels
        return self.b.add(f"{name}/pool", op_type, "reduction", [x], elements, 9.0 * elements)


def enas_conv_graph(params: dict[str, Any], seed: int, name: str) -> OpGraph:
    rng = np.random.default_rng(seed)
    cells, nodes = int(params["cells"]), int(params["nodes"])
    channels, batch = int(params["channels"]), int(params["batch"])
    builder = GraphBuilder(name)
    net = _ConvNet(builder, batch)
    size = 32
    image = builder.data_input("images", batch * 3 * size * size)
    stem = net.conv("stem", image, size, 3, channels, 3)
    previous = [(stem, size, channels), (stem, size, channels)]  # the two previous cells' outputs
    reductions = {cells // 3, 2 * cells // 3} - {0}
    for c in range(cells):
        reduce = c in reductions
        c_out = previous[-1][2] * (2 if reduce else 1)
        out_size = previous[-1][1] // (2 if reduce else 1)
        # the cell's inputs, brought to its input size and channels
        inputs = []
        for j, (tensor, in_size, in_channels) in enumerate(previous):
            stride = in_size // previous[-1][1]
            if stride > 1 or in_channels != previous[-1][2]:
                tensor = net.conv(f"cell{c}/in{j}", tensor, in_size, in_channels, previous[-1][2], 1, stride)
            inputs.append(tensor)
        states = list(inputs)
        size_of = [previous[-1][1]] * 2
        used = set()
        for n in range(nodes):
            branches = []
            for side in range(2):
                source = int(rng.integers(0, len(states)))
                used.add(source)
                choice = _CONV_CHOICES[int(rng.integers(0, len(_CONV_CHOICES)))]
                stride = 2 if (reduce and source < 2) else 1
                x, in_size, label = states[source], size_of[source], f"cell{c}/node{n}/{side}"
                c_in = c_out if source >= 2 else previous[-1][2]  # nodes have the cell's channels
                if choice.startswith(("conv", "sep")):
                    k = 3 if choice.endswith("3x3") else 5
                    separable = choice.startswith("sep")
                    branches.append(net.conv(label, x, in_size, c_in, c_out, k, stride, separable))
                elif choice == "identity" and stride == 1 and c_in == c_out:
                    branches.append(x)
                elif choice == "identity":  # a shape change needs a 1x1 convolution
                    branches.append(net.conv(label, x, in_size, c_in, c_out, 1, stride))
                else:
                    pooled = net.pool(label, "MaxPool" if choice == "maxpool" else "AveragePool", x, in_size,
                                      c_in, stride)
                    branches.append(pooled if c_in == c_out else
                                    net.conv(label + "/proj", pooled, in_size // stride, c_in, c_out, 1))
            elements = batch * out_size * out_size * c_out
            states.append(builder.add(f"cell{c}/node{n}/add", "Add", "elementwise", branches, elements,
                                      elements))
            size_of.append(out_size)
        loose = [states[i] for i in range(2, len(states)) if i not in used] or [states[-1]]
        elements = batch * out_size * out_size * c_out * len(loose)
        concat = builder.add(f"cell{c}/concat", "Concat", "data_movement", loose, elements, 0.0)
        out = net.conv(f"cell{c}/reduce", concat, out_size, c_out * len(loose), c_out, 1)
        previous = [previous[-1], (out, out_size, c_out)]
    tensor, size, c_last = previous[-1]
    pooled = builder.add("head/pool", "GlobalAveragePool", "reduction", [tensor], batch * c_last,
                         batch * c_last * size * size)
    logits = builder.add("head/fc", "Gemm", "matmul", [pooled], batch * 10, 2.0 * batch * c_last * 10,
                         c_last * 10 + 10)
    builder.add("head/softmax", "Softmax", "normalization", [logits], batch * 10, 5.0 * batch * 10)
    return builder.build()


# --- enas-rnn -----------------------------------------------------------------------------------------

_ACTIVATIONS = (("Tanh", 1.0), ("Relu", 1.0), ("Sigmoid", 4.0), ("Identity", 0.0))
VOCABULARY = 10_000


def enas_rnn_graph(params: dict[str, Any], seed: int, name: str) -> OpGraph:
    rng = np.random.default_rng(seed)
    nodes, hidden = int(params["nodes"]), int(params["hidden"])
    steps, batch = int(params["steps"]), int(params["batch"])
    # The cell's wiring is drawn once and shared by every step, as a cell is.
    sources = [int(rng.integers(0, n + 1)) for n in range(nodes)]  # 0: the cell's input; k: node k - 1
    activations = [_ACTIVATIONS[int(rng.integers(0, len(_ACTIVATIONS)))] for _ in range(nodes)]
    loose = sorted(set(range(1, nodes + 1)) - set(sources)) or [nodes]
    builder = GraphBuilder(name)
    tokens = builder.data_input("tokens", batch * steps)
    state = builder.data_input("h0", batch * hidden)
    elements = batch * hidden
    for t in range(steps):
        embed = builder.add(f"t{t}/embed", "Gather", "data_movement", [tokens], elements, 0.0,
                            VOCABULARY * hidden if t == 0 else 0.0)
        x = builder.add(f"t{t}/input", "MatMul", "matmul", [embed, state], elements,
                        2.0 * elements * 2 * hidden, 2 * hidden * hidden if t == 0 else 0.0)
        values = [x]
        for n, (source, (activation, per_element)) in enumerate(zip(sources, activations)):
            product = builder.add(f"t{t}/node{n}/matmul", "MatMul", "matmul", [values[source]], elements,
                                  2.0 * elements * hidden, hidden * hidden if t == 0 else 0.0)
            values.append(builder.add(f"t{t}/node{n}/{activation.lower()}", activation, "elementwise",
                                      [product], elements, per_element * elements))
        state = builder.add(f"t{t}/mean", "Mean", "elementwise", [values[k] for k in loose], elements,
                            elements * len(loose))
        logits = builder.add(f"t{t}/logits", "MatMul", "matmul", [state], batch * VOCABULARY,
                             2.0 * batch * hidden * VOCABULARY, hidden * VOCABULARY if t == 0 else 0.0)
        builder.add(f"t{t}/softmax", "LogSoftmax", "normalization", [logits], batch * VOCABULARY,
                    5.0 * batch * VOCABULARY)
    return builder.build()


def _unrolled(kind: str) -> Callable[[dict[str, Any], int, str], OpGraph]:
    """`placement_gym.datasets.unrolled.unrolled_builder` of ``kind``, its module (which imports onnx, a
    second or more) imported when a graph is built, not when the families are listed."""

    def build(params: dict[str, Any], seed: int, name: str) -> OpGraph:
        from placement_gym.datasets.unrolled import unrolled_builder

        return unrolled_builder(kind)(params, seed, name)

    return build


FAMILIES: dict[str, Family] = {
    family.name: family
    for family in (
        Family("regal", "synthetic", "random computation graphs (REGAL-style procedural DAGs)", regal_graph),
        Family("enas-conv", "synthetic", "ENAS-style convolutional cells on CIFAR (Placeto's cifar10 family)",
               enas_conv_graph),
        Family("enas-rnn", "synthetic", "ENAS-style recurrent cells, a PTB language model (Placeto's ptb "
               "family)", enas_rnn_graph),
        *(Family(name, "architecture", description, architecture_builder(name), worker_setup)
          for name, (description, _) in ARCHITECTURES.items()),
        Family("gnmt-tf", "unrolled", "GNMT unrolled at TensorFlow's granularity: 14 element-wise ops an "
               "LSTM cell, attention at every target step (placement_gym.datasets.unrolled)",
               _unrolled("gnmt")),
        Family("rnnlm-tf", "unrolled", "RNN language model unrolled at TensorFlow's granularity "
               "(placement_gym.datasets.unrolled)", _unrolled("rnnlm")),
    )
}
