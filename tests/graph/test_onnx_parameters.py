"""Which inputs of a user's ONNX model are parameters: weight-free exports cost what the model trains.

Six small architectures written in plain torch are exported with `torch.onnx.export`, with and
without their weights; the parameters the importer finds are compared with each other and with
``sum(p.numel() for p in model.parameters())``.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto

from placement_gym.cli import main
from placement_gym.graph.onnx_import import import_onnx
from placement_gym.graph.parameters import DataInputWarning

torch = pytest.importorskip("torch")
nn = torch.nn


# --- the architectures ------------------------------------------------------------------------


class CNNWithBatchNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(4, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU())
        self.head = nn.Linear(6 * 4 * 4, 5)

    def forward(self, x):
        return self.head(self.features(x).flatten(1))


class ResNetBlock(nn.Module):
    """A basic block with a strided projection shortcut (He et al. 2016)."""

    def __init__(self, channels: int = 4, out: int = 6) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(channels, out, 3, stride=2, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out)
        self.conv2 = nn.Conv2d(out, out, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out)
        self.shortcut = nn.Sequential(nn.Conv2d(channels, out, 1, stride=2, bias=False), nn.BatchNorm2d(out))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


class LSTMTagger(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(11, 4)
        self.lstm = nn.LSTM(4, 5, num_layers=2, batch_first=True)
        self.out = nn.Linear(5, 3)

    def forward(self, ids):
        hidden, _ = self.lstm(self.embed(ids))
        return self.out(hidden)


class TransformerEncoder(nn.Module):
    """Token embedding + a learned position tensor (added, as ViT does) + two post-LN layers."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(13, 8)
        self.position = nn.Parameter(torch.zeros(1, 6, 8))
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        self.layers = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(8)

    def forward(self, ids):
        return self.norm(self.layers(self.embed(ids) + self.position))


class TiedDecoder(nn.Module):
    """A GPT-style pre-LN decoder block whose output projection is the token embedding (tied)."""

    def __init__(self, vocab: int = 17, width: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Embedding(6, width)
        self.block = nn.TransformerEncoderLayer(width, 2, 16, dropout=0.0, batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.embed.weight
        self.register_buffer("causal_mask", torch.triu(torch.full((6, 6), float("-inf")), 1))

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        hidden = self.block(self.embed(ids) + self.position(positions), src_mask=self.causal_mask)
        return self.lm_head(self.norm(hidden))


class DepthwiseSeparableCNN(nn.Module):
    """MobileNet-style: a full conv, then a depthwise 3x3 (groups = channels) and a pointwise 1x1."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 6, 3, padding=1), nn.BatchNorm2d(6), nn.ReLU6(),
            nn.Conv2d(6, 6, 3, padding=1, groups=6, bias=False), nn.BatchNorm2d(6), nn.ReLU6(),
            nn.Conv2d(6, 8, 1, bias=False), nn.BatchNorm2d(8), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(8, 4))

    def forward(self, x):
        return self.net(x)


ARCHITECTURES = {
    "cnn_bn": (CNNWithBatchNorm, lambda: torch.zeros(2, 3, 8, 8)),
    "resnet_block": (ResNetBlock, lambda: torch.zeros(2, 4, 8, 8)),
    "lstm": (LSTMTagger, lambda: torch.zeros(2, 6, dtype=torch.long)),
    "transformer_encoder": (TransformerEncoder, lambda: torch.zeros(2, 6, dtype=torch.long)),
    "tied_decoder": (TiedDecoder, lambda: torch.zeros(2, 6, dtype=torch.long)),
    "depthwise_separable": (DepthwiseSeparableCNN, lambda: torch.zeros(2, 3, 8, 8)),
}
CONV_NETS = ("cnn_bn", "resnet_block", "depthwise_separable")


def build(name: str) -> nn.Module:
    """The model with seeded, distinct random weights (exporters merge initializers of equal values,
    such as the identical layers nn.TransformerEncoder deep-copies) in training mode."""
    torch.manual_seed(0)
    model = ARCHITECTURES[name][0]()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_()
    return model.train()


def export(model: nn.Module, name: str, path: Path, **options) -> Path:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (ARCHITECTURES[name][1](),), str(path), **options)
    return path


def n_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def n_float_buffers(model: nn.Module) -> int:
    """BatchNorm running statistics and the decoder's causal mask: float tensors of the model that
    are not torch parameters. A file cannot tell them from weights; they count with the parameters
    (their memory is resident like a weight's), the running statistics as non-trainable state."""
    return sum(b.numel() for b in model.buffers() if b.is_floating_point())


def load(path: Path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", DataInputWarning)
        # The default exporter folds BatchNorm; the import says so (checked where it matters).
        warnings.filterwarnings("ignore", message=".*folded BatchNormalization")
        return import_onnx(path)


_CACHE: dict[tuple, Path] = {}


def exported(tmp_path_factory, name: str, **options) -> Path:
    """Each export once per test session (the dynamo exporter takes about a second)."""
    key = (name, tuple(sorted(options.items())))
    if key not in _CACHE:
        folder = tmp_path_factory.mktemp(name)
        _CACHE[key] = export(build(name), name, folder / "model.onnx", **options)
    return _CACHE[key]


# The legacy (TorchScript) exporter in training mode keeps BatchNormalization as an op (in eval
# mode it folds it into the convolution) and, without constant folding, keeps each weight under its
# torch name, transposes as Transpose ops and a tied weight as one tensor.
# torch.onnx.export's default since torch 2.9 (the ONNX program from torch.export, optimised), pinned
# so that the tests mean the same on any torch the test extra allows.
DEFAULT_EXPORTER = {"dynamo": True}
LEGACY_TRAINING = {"dynamo": False, "training": torch.onnx.TrainingMode.TRAINING,
                   "do_constant_folding": False}


@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_weight_free_export_has_the_parameters_of_the_model(tmp_path_factory, name):
    model = build(name)
    with_weights = load(exported(tmp_path_factory, name, export_params=True, **LEGACY_TRAINING))
    weight_free = load(exported(tmp_path_factory, name, export_params=False, **LEGACY_TRAINING))
    expected = n_parameters(model) + n_float_buffers(model)
    assert weight_free.parameter_count == with_weights.parameter_count == expected
    # The two files are the same graph: every cost is the same, not only the total.
    a, b = weight_free.graph, with_weights.graph
    assert np.array_equal(a.param_bytes, b.param_bytes) and np.array_equal(a.flops, b.flops)
    assert a.param_bytes.sum() == 4 * expected
    assert [shape for _, shape in a.data_inputs] == [tuple(ARCHITECTURES[name][1]().shape)]
    state = {p.name for p in weight_free.parameters if not p.trainable}
    running = {n for n, _ in model.named_buffers() if "running_" in n}
    assert state == running  # running statistics are reported as non-trainable state
    assert {p.source for p in weight_free.parameters} == {"graph input"}


def test_tied_embedding_counts_once_and_is_shared(tmp_path_factory):
    result = load(exported(tmp_path_factory, "tied_decoder", export_params=False, **LEGACY_TRAINING))
    (table,) = [p for p in result.parameters if p.name == "embed.weight"]
    assert table.shape == (17, 8)
    assert {"Gather table", "MatMul operand"} <= set(table.roles)
    g = result.graph
    tensor = g.tensor_names.index("embed.weight")
    assert g.tensor_is_parameter[tensor]  # owned by the embedding, sent to the output projection
    assert [g.op_types[d] for d in g.edge_dst[g.edge_tensor == tensor]] == ["Transpose"]


def folded_batch_norm_parameters(model: nn.Module) -> int:
    """Parameters the default exporter's optimiser removes by folding each BatchNorm into the conv
    before it: the BatchNorm's scale and shift (2C) and the conv's bias, if any, become one new
    conv bias (C); the running statistics disappear."""
    removed = 0
    modules = list(model.modules())
    for conv, bn in zip(modules, modules[1:]):
        if isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
            conv_bias = conv.bias.numel() if conv.bias is not None else 0
            removed += 2 * bn.num_features + conv_bias - bn.num_features
    return removed


@pytest.mark.slow
@pytest.mark.parametrize("name", CONV_NETS)
def test_default_exporter_without_weights_costs_like_with_weights(tmp_path_factory, name):
    # torch 2.13's default exporter (dynamo=True, optimize=True) with export_params=False writes
    # nodes that read weights the file does not declare (the ONNX checker rejects it); their shapes
    # follow from the convolutions and Gemm that read them.
    with_weights = load(exported(tmp_path_factory, name, export_params=True, **DEFAULT_EXPORTER))
    weight_free_file = exported(tmp_path_factory, name, export_params=False, **DEFAULT_EXPORTER)
    weight_free = load(weight_free_file)
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(onnx.load(weight_free_file))
    model = build(name)
    assert with_weights.parameter_count == n_parameters(model) - folded_batch_norm_parameters(model)
    assert weight_free.parameter_count == with_weights.parameter_count
    assert {p.source for p in weight_free.parameters} == {"undeclared"}
    assert np.array_equal(weight_free.graph.param_bytes, with_weights.graph.param_bytes)
    # Folding BatchNorm makes it an inference graph: the import says so.
    with pytest.warns(UserWarning, match="folded BatchNormalization into the preceding ops"):
        import_onnx(weight_free_file)


# What the default exporter stores beyond the model's parameters, when nothing is folded away.
DEFAULT_EXPORTER_EXTRA = {
    # The gates of W, R and B are reordered into new tensors of the same sizes; the zero initial
    # state it adds reaches the LSTM only as an initial state, so it is a constant, not a weight.
    "lstm": lambda model: 0,
    # Each Linear weight is stored transposed: a new tensor, same size.
    "transformer_encoder": lambda model: 0,
    # The causal mask buffer counts with the parameters (as in every file: see n_float_buffers), and
    # the optimiser stores the tied weight's transpose as a second initializer (17 x 8) that nothing
    # in the file links to the embedding table: the one over-count the importer cannot see.
    "tied_decoder": lambda model: n_float_buffers(model) + 17 * 8,
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(DEFAULT_EXPORTER_EXTRA))
def test_default_exporter_without_weights_refuses_what_it_cannot_size(tmp_path_factory, name):
    model = build(name)
    with_weights = load(exported(tmp_path_factory, name, export_params=True, **DEFAULT_EXPORTER))
    assert with_weights.parameter_count == n_parameters(model) + DEFAULT_EXPORTER_EXTRA[name](model)
    # Without weights, an embedding table's vocabulary size (or a bias added element-wise) appears
    # nowhere in the file: refuse, naming the tensors and the way to export a loadable file.
    path = exported(tmp_path_factory, name, export_params=False, **DEFAULT_EXPORTER)
    refusal = r"neither contains nor declares.*'[^']*embed[^']*'.*export_params=True"
    with pytest.raises(ValueError, match=refusal):
        import_onnx(path)


def test_missing_external_data_file_still_loads(tmp_path_factory, tmp_path):
    # The default exporter writes weights to model.onnx.data; only their shapes are needed.
    source = exported(tmp_path_factory, "cnn_bn", export_params=True, **DEFAULT_EXPORTER)
    data = source.with_name(source.name + ".data")
    assert data.is_file()
    path = tmp_path / "model.onnx"
    path.write_bytes(source.read_bytes())  # the .data file is not copied: it is missing here
    external = [t.name for t in onnx.load(path, load_external_data=False).graph.initializer
                if t.data_location == TensorProto.EXTERNAL]
    assert "features.0.weight" in external
    with pytest.raises(Exception):  # noqa: B017 - onnx's error type varies across versions
        onnx.load(path)
    missing, present = load(path), load(source)
    assert missing.parameter_count == present.parameter_count > 0
    assert missing.parameter_count == n_parameters(build("cnn_bn")) - folded_batch_norm_parameters(
        build("cnn_bn"))
    assert {p.source for p in missing.parameters} == {"initializer"}


def test_info_command_json_and_text(tmp_path_factory, capsys):
    path = exported(tmp_path_factory, "cnn_bn", export_params=False, **LEGACY_TRAINING)
    model = build("cnn_bn")
    assert main(["graphs", "--info", str(path), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    params = info["parameters"]
    assert params["count"] == n_parameters(model) + n_float_buffers(model)
    assert params["bytes"] == 4 * params["count"]
    assert params["identified_by"] == "roles" and params["sources"] == {"graph input": 13}
    assert params["non_trainable_count"] == n_float_buffers(model)  # the running statistics
    by_name = {p["name"]: p for p in params["list"]}
    assert by_name["features.0.weight"]["roles"] == ["Conv weight"]
    assert by_name["features.0.weight"]["shape"] == [4, 3, 3, 3]
    assert by_name["features.1.running_mean"]["trainable"] is False
    assert by_name["head.weight"]["roles"] == ["Gemm weight"]
    assert info["data_inputs"] == [{"name": "input.1", "shape": [2, 3, 8, 8], "reason": "Conv input"}]
    assert info["ops"] == 9 and info["op_types"]["BatchNormalization"] == 2 and info["warnings"] == []

    assert main(["graphs", "--info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "parameters: 855 in 13 tensors, 3,420 bytes" in out
    assert "input.1 [2, 3, 8, 8] (Conv input)" in out
    assert "features.0.weight" in out and "Conv weight" in out and "non-trainable" in out


def test_info_command_reports_what_it_cannot_load(tmp_path_factory, capsys):
    path = exported(tmp_path_factory, "lstm", export_params=False, **DEFAULT_EXPORTER)
    assert main(["graphs", "--info", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "'embed.weight' (read by Gather" in err and "export_params=True" in err


def test_real_mode_trains_the_parameters_the_importer_found(tmp_path):
    # The torch executor takes the importer's account, so a real step updates what the cost model
    # counts. (Legacy exporter in eval mode: BatchNorm folded into the convolutions, ops it runs.)
    from placement_gym.real.devices import virtual_cpu_cluster
    from placement_gym.real.executor import Executor
    from placement_gym.task.compiled import make_task

    model = build("depthwise_separable").eval()
    path = export(model, "depthwise_separable", tmp_path / "model.onnx", export_params=False, dynamo=False)
    result = load(path)
    assert {p.source for p in result.parameters} == {"graph input"} and result.parameter_count > 0
    task = make_task(result.graph, virtual_cpu_cluster(2), "train_step")
    executor = Executor(task, {"cpu:0": "cpu", "cpu:1": "cpu"}, seed=0, model=onnx.load(path))
    run = executor.run(np.arange(result.graph.n_ops) % 2, warmup=0, repeats=1)
    assert run.feasible, run.error
    assert {name: tuple(w.shape) for name, w in executor.parameters.items()} == {
        p.name: p.shape for p in result.parameters}
