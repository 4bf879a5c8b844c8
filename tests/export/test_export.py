"""The bundled weight-free graphs (graphs/*.onnx + manifest.json) and their regeneration.

Expected parameter counts are the papers' figures (or, for the small models, sums worked out by hand
from the layer sizes each model's docstring documents), never numbers read back from the export code.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from functools import cache

import numpy as np
import onnx
import pytest
from paths import ROOT

from placement_gym.common.extras import install_command
from placement_gym.export import GRAPH_NAMES, MISSING_EXTRA_MESSAGE, PARAMETERS_KEY, SOURCE_KEY, export_graphs

GRAPHS = ROOT / "graphs"
FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
               onnx.TensorProto.BFLOAT16}
EXPECTED_NAMES = {"cifar10_cnn", "cifar10_resnet56", "resnet50", "resnet152", "inception_v3", "bert_base",
                  "bert_large", "rnnlm", "gnmt2", "gnmt4", "gnmt8",
                  "llama2_7b", "llama2_70b", "mixtral_8x7b", "gpt3_175b"}
LLM_NAMES = ("llama2_7b", "llama2_70b", "mixtral_8x7b", "gpt3_175b")

# Published trainable-parameter figures (BatchNorm running statistics are not parameters there).
PAPER_PARAMETERS = {
    "resnet50": 25.6e6,          # He et al. 2016 ResNet-50, the commonly quoted 25.6M
    "resnet152": 60.2e6,         # He et al. 2016 ResNet-152, the commonly quoted 60.2M
    "bert_base": 110e6,          # Devlin et al. 2019, section 3: 110M
    "bert_large": 340e6,         # Devlin et al. 2019, section 3: 340M
    "cifar10_resnet56": 0.85e6,  # He et al. 2016, Table 6: 0.85M
    "inception_v3": 23.8e6,      # Inception-V3 without the auxiliary head
    "llama2_7b": 6.7e9,          # Touvron et al. 2023a (LLaMA), table 2: 6.7B at 32 x 4096, as Llama 2 7B
    "llama2_70b": 70e9,          # Touvron et al. 2023b (Llama 2), table 1: 70B
    "mixtral_8x7b": 47e9,        # Jiang et al. 2024 (Mixtral), section 2: 47B parameters, 13B active
    "gpt3_175b": 175.0e9,        # Brown et al. 2020, table 2.1: 175.0B
}


@cache
def manifest() -> dict:
    return json.loads((GRAPHS / "manifest.json").read_text())


@cache
def load(name: str) -> onnx.ModelProto:
    return onnx.load(GRAPHS / f"{name}.onnx")


def metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {prop.key: prop.value for prop in model.metadata_props}


def parameter_inputs(model: onnx.ModelProto) -> dict[str, list[int]]:
    names = set(json.loads(metadata(model)[PARAMETERS_KEY]))
    return {value.name: [dim.dim_value for dim in value.type.tensor_type.shape.dim]
            for value in model.graph.input if value.name in names}


def trainable_count(model: onnx.ModelProto) -> int:
    return sum(int(np.prod(shape)) for name, shape in parameter_inputs(model).items()
               if not name.endswith(("running_mean", "running_var")))


def consumers(model: onnx.ModelProto, value_name: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if value_name in node.input]


def test_graph_names_and_manifest_list_the_fifteen_graphs():
    assert set(GRAPH_NAMES) == EXPECTED_NAMES
    assert list(manifest()["graphs"]) == sorted(EXPECTED_NAMES)


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_bundled_file_matches_manifest(name):
    entry = manifest()["graphs"][name]
    data = (GRAPHS / entry["file"]).read_bytes()
    assert hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert len(data) < 2_000_000, "weight-free files are small"
    if name in LLM_NAMES:  # 4,096 positions x 64 rotary frequencies would be a 1 MB constant
        assert len(data) < 1_000_000
    model = load(name)
    assert entry["nodes"] == len(model.graph.node)
    assert entry["source"] == metadata(model)[SOURCE_KEY]
    assert entry["parameters"] == sum(int(np.prod(s)) for s in parameter_inputs(model).values())


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_bundled_file_is_valid_and_weight_free(name):
    model = load(name)
    onnx.checker.check_model(model, full_check=True)
    assert not [init.name for init in model.graph.initializer if init.data_type in FLOAT_TYPES]
    meta = metadata(model)
    assert meta[SOURCE_KEY] and "\n" not in meta[SOURCE_KEY]
    parameters = json.loads(meta[PARAMETERS_KEY])
    input_names = [value.name for value in model.graph.input]
    assert parameters and set(parameters) <= set(input_names)
    assert len(set(parameters)) == len(parameters)
    assert all(model.graph.input[input_names.index(p)].type.tensor_type.elem_type in FLOAT_TYPES
               for p in parameters)
    # What is not a parameter is the data the manifest lists, batch first.
    entry = manifest()["graphs"][name]
    data_inputs = {value.name: [dim.dim_value for dim in value.type.tensor_type.shape.dim]
                   for value in model.graph.input if value.name not in set(parameters)}
    assert data_inputs == entry["inputs"]
    assert all(shape[0] == entry["batch"] for shape in data_inputs.values())
    node_names = [node.name for node in model.graph.node]
    assert all(node_names) and len(set(node_names)) == len(node_names)


@pytest.mark.parametrize("name", sorted(EXPECTED_NAMES))
def test_every_value_has_a_static_shape_after_inference(name):
    model = onnx.ModelProto()
    model.CopyFrom(load(name))
    del model.graph.value_info[:]  # re-derive, do not trust what the file carries
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {value.name: value.type.tensor_type for value in
              list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output)}
    shapes.update({init.name: None for init in inferred.graph.initializer})
    for node in inferred.graph.node:
        for output in node.output:
            assert output in shapes, f"{name}: no shape for {output}"
            tensor_type = shapes[output]
            if tensor_type is not None:
                dims = tensor_type.shape.dim
                assert all(dim.HasField("dim_value") and dim.dim_value > 0 for dim in dims), output


@pytest.mark.parametrize("name", sorted(PAPER_PARAMETERS))
def test_parameter_count_is_close_to_the_published_figure(name):
    published = PAPER_PARAMETERS[name]
    assert abs(trainable_count(load(name)) - published) / published < 0.03


def test_cifar10_cnn_parameters_by_hand():
    # TF tutorial layers on 32x32 input: conv5x5 3->64, conv5x5 64->64, fc 8*8*64->384, 384->192, 192->10.
    expected = (5 * 5 * 3 * 64 + 64) + (5 * 5 * 64 * 64 + 64) + (8 * 8 * 64 * 384 + 384) \
        + (384 * 192 + 192) + (192 * 10 + 10)
    assert trainable_count(load("cifar10_cnn")) == expected


def lstm_layer(d_in: int, hidden: int) -> int:
    return 4 * hidden * d_in + 4 * hidden + 4 * hidden * hidden  # input proj (with bias), recurrent proj


def test_unrolled_lstm_weights_are_shared_across_steps():
    # Parameter counts independent of the 20 unrolled steps: one copy of each weight, not one per step.
    vocab, hidden = 40_000, 2048
    rnnlm = load("rnnlm")
    assert trainable_count(rnnlm) == vocab * hidden + 2 * lstm_layer(hidden, hidden) + hidden * vocab + vocab
    steps = manifest()["graphs"]["rnnlm"]["inputs"]["token_ids"][1]
    assert steps == 20
    for layer in (0, 1):
        assert len(consumers(rnnlm, f"cells.{layer}.input_proj.weight")) == steps
        assert len(consumers(rnnlm, f"cells.{layer}.recurrent_proj.weight")) == steps - 1  # zero state first
    assert sum(node.op_type == "LogSoftmax" for node in rnnlm.graph.node) == steps
    assert not any(node.op_type in {"LSTM", "Loop", "Scan"} for node in rnnlm.graph.node)

    gnmt = load("gnmt4")
    assert trainable_count(gnmt) == gnmt_parameters(4)
    tgt_steps = manifest()["graphs"]["gnmt4"]["inputs"]["tgt_ids"][1]
    assert len(consumers(gnmt, "decoder.3.input_proj.weight")) == tgt_steps
    assert len(gnmt.graph.node) < 5000


def gnmt_parameters(layers: int, hidden: int = 1024, vocab: int = 32_000) -> int:
    """Two embeddings, `layers` encoder layers, a decoder whose upper layers also read the attention
    context, additive attention and the output projection."""
    attention = 2 * hidden * hidden + hidden + hidden  # key proj, query proj + bias, score vector
    return 2 * vocab * hidden + layers * lstm_layer(hidden, hidden) + lstm_layer(hidden, hidden) \
        + (layers - 1) * lstm_layer(2 * hidden, hidden) + attention + hidden * vocab + vocab


@pytest.mark.parametrize("layers", [2, 4, 8])
def test_gnmt_graphs_have_their_layer_count(layers):
    name = f"gnmt{layers}"
    model = load(name)
    assert trainable_count(model) == gnmt_parameters(layers)
    stacks = {(m.group(1), int(m.group(2))) for p in parameter_inputs(model)
              if (m := re.match(r"(encoder|decoder)\.(\d+)\.", p))}
    assert stacks == {(stack, i) for stack in ("encoder", "decoder") for i in range(layers)}
    inputs = manifest()["graphs"][name]["inputs"]
    src_steps, tgt_steps = inputs["src_ids"][1], inputs["tgt_ids"][1]
    assert (src_steps, tgt_steps) == (20, 20)
    # One gate Split per layer per step, in the encoder and in the decoder.
    assert sum(node.op_type == "Split" for node in model.graph.node) == layers * (src_steps + tgt_steps)
    assert len(consumers(model, f"decoder.{layers - 1}.input_proj.weight")) == tgt_steps
    assert sum(node.op_type == "LogSoftmax" for node in model.graph.node) == tgt_steps


def bottleneck_resnet_parameters(stages: tuple[int, ...], classes: int = 1000) -> int:
    """He et al. 2016, Table 1: 7x7 stem, bottlenecks (1x1 reduce, 3x3, 1x1 expand x4, each conv with
    BatchNorm scale and shift, no conv bias), a projection shortcut opening each stage, the classifier."""

    def conv_bn(c_in: int, c_out: int, kernel: int) -> int:
        return kernel * kernel * c_in * c_out + 2 * c_out

    total, c_in = conv_bn(3, 64, 7), 64
    for stage, blocks in enumerate(stages):
        width = 64 * 2**stage
        for index in range(blocks):
            total += conv_bn(c_in, width, 1) + conv_bn(width, width, 3) + conv_bn(width, 4 * width, 1)
            if index == 0:  # the shape changes: 4x the channels (first stage) or stride 2 (the others)
                total += conv_bn(c_in, 4 * width, 1)
            c_in = 4 * width
    return total + c_in * classes + classes


@pytest.mark.parametrize("name,stages", [("resnet50", (3, 4, 6, 3)), ("resnet152", (3, 8, 36, 3))])
def test_imagenet_resnets_by_hand(name, stages):
    model = load(name)
    assert trainable_count(model) == bottleneck_resnet_parameters(stages)
    # Depth: the stem, three convolutions per bottleneck and the classifier (projections not counted).
    convs = [node for node in model.graph.node if node.op_type == "Conv"]
    projections = [node for node in convs if ".projection." in node.input[1]]
    assert len(projections) == len(stages)
    assert len(convs) - len(projections) + 1 == 2 + 3 * sum(stages) == int(name.removeprefix("resnet"))
    assert sum(node.op_type == "Gemm" for node in model.graph.node) == 1


def test_resnet152_matches_the_torch_model_and_the_published_figure():
    torch = pytest.importorskip("torch")
    from placement_gym.export.models.resnet import ResNet152

    with torch.device("meta"):
        module = ResNet152()
    torch_count = sum(p.numel() for p in module.parameters())
    assert torch_count == bottleneck_resnet_parameters((3, 8, 36, 3)) == trainable_count(load("resnet152"))
    assert round(torch_count / 1e6, 1) == 60.2


@pytest.mark.parametrize("name", ["cifar10_resnet56", "resnet50", "resnet152", "inception_v3"])
def test_batchnorm_is_not_folded_into_convolutions(name):
    model = load(name)
    convs = [node for node in model.graph.node if node.op_type == "Conv"]
    assert convs
    for conv in convs:
        assert [node.op_type for node in consumers(model, conv.output[0])] == ["BatchNormalization"]


def test_bert_large_attention_scores_exceed_one_12gb_gpu():
    model = onnx.shape_inference.infer_shapes(load("bert_large"))
    shapes = {value.name: [d.dim_value for d in value.type.tensor_type.shape.dim]
              for value in model.graph.value_info}
    softmax = [node for node in model.graph.node if node.op_type == "Softmax"]
    assert len(softmax) == 24
    assert shapes[softmax[0].output[0]] == [16, 16, 512, 512]
    # Scores and their softmax, both kept for the backward pass, in float32.
    saved = sum(4 * np.prod(shapes[node.input[0]]) + 4 * np.prod(shapes[node.output[0]]) for node in softmax)
    assert saved > 12e9


def llama_parameters(layers: int, hidden: int, heads: int, kv_heads: int, ffn: int, vocab: int = 32_000,
                     experts: int = 1) -> int:
    """Touvron et al. 2023: bias-free q and o (hidden x hidden), k and v (hidden x kv_heads * head
    width), SwiGLU's gate, up and down (3 x hidden x ffn, once per expert), two RMSNorm scales per layer;
    an embedding and an untied head (vocab x hidden each), a final RMSNorm. A mixture adds a router
    (hidden x experts) per layer."""
    head = hidden // heads
    attention = 2 * hidden * hidden + 2 * hidden * kv_heads * head
    feed_forward = experts * 3 * hidden * ffn + (hidden * experts if experts > 1 else 0)
    return layers * (attention + feed_forward + 2 * hidden) + 2 * vocab * hidden + hidden


def gpt_parameters(layers: int, hidden: int, vocab: int, positions: int) -> int:
    """GPT-2/3 layers (Radford et al. 2019; Brown et al. 2020): q, k, v, o with biases (4 d^2 + 4 d), an
    MLP of 4 d with biases (8 d^2 + 5 d), two LayerNorms (4 d); token and position tables, the head tied
    to the token table, a final LayerNorm."""
    return layers * (12 * hidden * hidden + 13 * hidden) + (vocab + positions) * hidden + 2 * hidden


@pytest.mark.parametrize("name,expected", [
    ("llama2_7b", llama_parameters(32, 4096, 32, 32, 11_008)),
    ("llama2_70b", llama_parameters(80, 8192, 64, 8, 28_672)),
    ("mixtral_8x7b", llama_parameters(32, 4096, 32, 8, 14_336, experts=8)),
    ("gpt3_175b", gpt_parameters(96, 12_288, 50_257, 2048)),
])
def test_llm_parameters_by_hand(name, expected):
    assert trainable_count(load(name)) == expected
    assert manifest()["graphs"][name]["parameters"] == expected


def test_llm_sequences_batches_and_layers_are_the_papers():
    assert sum((GRAPHS / f"{name}.onnx").stat().st_size for name in LLM_NAMES) < 3_000_000  # weight-free
    inputs = {name: manifest()["graphs"][name]["inputs"]["input_ids"] for name in LLM_NAMES}
    # Llama 2: 4,096-token context (Touvron et al. 2023, table 1); GPT-3: n_ctx 2,048 (table 2.1).
    assert inputs == {"llama2_7b": [1, 4096], "llama2_70b": [1, 4096], "mixtral_8x7b": [1, 4096],
                      "gpt3_175b": [1, 2048]}
    for name, layers, heads in (("llama2_7b", 32, 32), ("llama2_70b", 80, 64), ("mixtral_8x7b", 32, 32),
                                ("gpt3_175b", 96, 96)):
        model = onnx.shape_inference.infer_shapes(load(name))
        shapes = {value.name: [d.dim_value for d in value.type.tensor_type.shape.dim]
                  for value in model.graph.value_info}
        softmax = [node for node in model.graph.node if node.op_type == "Softmax"
                   and shapes[node.output[0]][-1] == inputs[name][1]]
        assert len(softmax) == layers  # one causal, dense attention per layer, at the full sequence
        assert shapes[softmax[0].output[0]] == [1, heads, inputs[name][1], inputs[name][1]]


def test_llama2_7b_training_step_does_not_fit_one_h100():
    """fp32 weights, gradients and Adam's two moments: 16 bytes per parameter, 108 GB before any
    activation, over one 80 GB GPU; a placement there is infeasible, not an error."""
    import placement_gym as pg

    task = pg.get_task("llama2_7b", "h100x8", "train_step")
    gpu = task.cluster.device_names.index("gpu:0")
    placement = np.full(task.n_forward, gpu)
    static = task.static_memory(placement)[gpu]
    assert static == 16 * llama_parameters(32, 4096, 32, 32, 11_008)
    assert static > task.cluster.memory_capacity[gpu]
    result = pg.simulate(task, placement)
    assert not result.feasible and result.peak_memory[gpu] > static


def test_llama2_70b_shares_each_key_value_head_among_eight_query_heads():
    shapes = parameter_inputs(load("llama2_70b"))
    assert shapes["layers.0.attention.query.weight"] == [8192, 64 * 128]
    for projection in ("key", "value"):
        assert shapes[f"layers.0.attention.{projection}.weight"] == [8192, 8 * 128]
    seven = parameter_inputs(load("llama2_7b"))
    assert seven["layers.0.attention.key.weight"] == [4096, 4096]  # no GQA at 7B


def test_mixtral_experts_are_separate_ops_behind_a_top2_router():
    model = load("mixtral_8x7b")
    shapes = parameter_inputs(model)
    initializers = {init.name: onnx.numpy_helper.to_array(init) for init in model.graph.initializer}
    topk = [node for node in model.graph.node if node.op_type == "TopK"]
    assert len(topk) == 32 and all(initializers[node.input[1]].tolist() == [2] for node in topk)
    for layer in (0, 31):
        prefix = f"layers.{layer}.feed_forward"
        assert shapes[f"{prefix}.router.weight"] == [4096, 8]
        readers = {}
        for expert in range(8):
            for part, shape in (("gate", [4096, 14_336]), ("up", [4096, 14_336]), ("down", [14_336, 4096])):
                weight = f"{prefix}.experts.{expert}.{part}.weight"
                assert shapes[weight] == shape
                (node,) = consumers(model, weight)  # one MatMul, its own op
                assert node.op_type == "MatMul"
                readers[node.name] = expert
        assert len(readers) == 8 * 3  # no op reads two experts' weights


def test_gpt3_head_is_tied_and_positions_are_learned():
    model = load("gpt3_175b")
    shapes = parameter_inputs(model)
    assert shapes["token_embedding.weight"] == [50_257, 12_288]
    assert shapes["position_embedding.weight"] == [2048, 12_288]
    assert len(consumers(model, "token_embedding.weight")) == 2  # the lookup and the logits
    assert sum(node.op_type == "LayerNormalization" for node in model.graph.node) == 2 * 96 + 1
    assert sum(node.op_type == "Gelu" for node in model.graph.node) == 96


def test_llama_rotary_angles_stay_ops():
    for name in ("llama2_7b", "llama2_70b", "mixtral_8x7b"):
        model = load(name)
        assert {"Range", "Cos", "Sin"} <= {node.op_type for node in model.graph.node}
        constants = [node.attribute[0].t for node in model.graph.node if node.op_type == "Constant"]
        assert max(int(np.prod(tensor.dims)) for tensor in constants) <= 1024


def test_fold_limit_must_be_positive():
    pytest.importorskip("onnxscript")
    import onnx_ir

    from placement_gym.export.weight_free import make_weight_free

    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])
    graph = onnx.helper.make_graph([onnx.helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                                   [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])])
    model = onnx_ir.serde.deserialize_model(onnx.helper.make_model(graph))
    with pytest.raises(ValueError, match="fold_limit must be a positive number of elements"):
        make_weight_free(model, "test", fold_limit=0)


def test_importing_export_package_does_not_import_torch():
    code = "import sys, placement_gym.export; assert 'torch' not in sys.modules, 'torch imported'"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unknown_graph_name_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="unknown graph.*resnet51.*known graphs"):
        export_graphs(["resnet51"], out_dir=tmp_path, progress=False)


def test_missing_torch_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` raise ImportError
    with pytest.raises(ImportError, match="export extra") as error:
        export_graphs(["cifar10_cnn"], out_dir=tmp_path, progress=False)
    assert MISSING_EXTRA_MESSAGE in str(error.value) and install_command("export") in str(error.value)


def test_reexport_is_byte_identical(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    result = export_graphs(["cifar10_cnn"], out_dir=tmp_path, progress=False)
    bundled = manifest()["graphs"]["cifar10_cnn"]
    assert result["graphs"]["cifar10_cnn"] == bundled
    assert hashlib.sha256((tmp_path / "cifar10_cnn.onnx").read_bytes()).hexdigest() == bundled["sha256"]
    assert json.loads((tmp_path / "manifest.json").read_text()) == {"graphs": {"cifar10_cnn": bundled}}


def _tiny_models():
    """Small instances of every model family, with (example inputs, input names)."""
    import torch

    from placement_gym.export.models.bert import Bert, BertConfig
    from placement_gym.export.models.cifar10_cnn import Cifar10Cnn
    from placement_gym.export.models.lstm import GNMT, RNNLM
    from placement_gym.export.models.resnet import ResNet50, ResNetCifar

    generator = torch.Generator().manual_seed(0)

    def ids(vocab, *shape):
        return torch.randint(0, vocab, shape, generator=generator)

    def images(*shape):
        return torch.randn(*shape, generator=generator)

    return {
        "cnn": (Cifar10Cnn(image_size=8), (images(2, 3, 8, 8),), ["images"]),
        "resnet_cifar8": (ResNetCifar(depth=8), (images(2, 3, 16, 16),), ["images"]),
        "resnet_bottleneck": (ResNet50(num_classes=5, stages=(1, 1)), (images(2, 3, 32, 32),), ["images"]),
        "bert": (Bert(BertConfig(layers=2, hidden=16, heads=2, ffn=32, vocab=50, max_positions=8)),
                 (ids(50, 2, 5),), ["input_ids"]),
        "rnnlm": (RNNLM(vocab=30, hidden=8, layers=2), (ids(30, 2, 3),), ["token_ids"]),
        "gnmt": (GNMT(src_vocab=30, tgt_vocab=20, hidden=8, layers=4), (ids(30, 2, 4), ids(20, 2, 3)),
                 ["src_ids", "tgt_ids"]),
    }


@pytest.mark.slow
def test_weight_free_graphs_compute_what_the_torch_models_compute():
    """Feeding the torch weights to the weight-free graph reproduces the torch outputs (small instances)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    from placement_gym.export.onnx_export import export_module

    torch.manual_seed(0)
    for label, (module, inputs, input_names) in _tiny_models().items():
        with torch.no_grad():
            for name, tensor in module.state_dict().items():
                if tensor.is_floating_point():
                    # Random weights and BatchNorm statistics (variances kept positive).
                    tensor.copy_(torch.rand_like(tensor) + 0.5 if name.endswith("running_var")
                                 else torch.randn_like(tensor) * 0.3)
            module.eval()
            expected = module(*inputs)
        model = export_module(module, inputs, input_names, f"test {label}")
        state = module.state_dict()
        feeds = {name: state[name].numpy() for name in json.loads(metadata(model)[PARAMETERS_KEY])}
        feeds.update({name: tensor.numpy() for name, tensor in zip(input_names, inputs)})
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        got = session.run(None, feeds)
        expected = expected if isinstance(expected, tuple) else (expected,)
        assert len(got) == len(expected), label
        for actual, reference in zip(got, expected):
            np.testing.assert_allclose(actual, reference.numpy(), rtol=1e-4, atol=1e-5, err_msg=label)


@pytest.mark.slow
def test_unfolded_rotary_tables_compute_what_the_torch_model_computes():
    """A small Llama exported with a fold limit below its rotary table (so Range, Mul, Cos, Sin stay ops)
    gives the torch outputs."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    ort = pytest.importorskip("onnxruntime")
    from placement_gym.export.models.llama import Llama, LlamaConfig
    from placement_gym.export.onnx_export import export_module

    torch.manual_seed(0)
    module = Llama(LlamaConfig(layers=2, hidden=16, heads=4, kv_heads=2, vocab=50, ffn=24))
    with torch.no_grad():
        for tensor in module.state_dict().values():
            tensor.copy_(torch.randn_like(tensor) * 0.3)
        module.eval()
        ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))
        expected = module(ids)
    model = export_module(module, (ids,), ["input_ids"], "test small llama", fold_limit=4)
    assert {"Range", "Cos", "Sin"} <= {node.op_type for node in model.graph.node}
    state = module.state_dict()
    feeds = {name: state[name].numpy() for name in json.loads(metadata(model)[PARAMETERS_KEY])}
    feeds["input_ids"] = ids.numpy()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, feeds)
    np.testing.assert_allclose(got, expected.numpy(), rtol=1e-4, atol=1e-5)
