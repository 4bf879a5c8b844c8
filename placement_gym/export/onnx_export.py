"""Regenerate the bundled weight-free ONNX graphs (`graphs/*.onnx`) and `graphs/manifest.json`.

Exporter choice: `torch.onnx.export(..., dynamo=True)` (torch.export + onnxscript). It traces with fake
tensors, so models are built on the `meta` device: no weight memory and no real forward pass (BERT-large
at batch 16 x 512 would take minutes of CPU in the TorchScript exporter, which runs the model).
Its graphs are static-shaped, carry the parameter names of the torch modules (`layers.3.attention.query.
weight`) and, after the shape-only folding done in `weight_free`, read as plain ops (Conv,
BatchNormalization, Gemm, MatMul, LayerNormalization, Softmax...). `optimize=False` is passed on
purpose: the exporter's optimiser would fold BatchNorm into Conv, which is wrong for a training graph.

torch is imported only inside functions: `import placement_gym.export` works without it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import onnx

from placement_gym.common.extras import install_command
from placement_gym.export.weight_free import PARAMETERS_KEY, make_weight_free

REPO_GRAPHS_DIR = Path(__file__).resolve().parents[2] / "graphs"
MANIFEST_NAME = "manifest.json"
OPSET = 20  # Gelu and LayerNormalization are plain ONNX ops at opset 20.
# The largest constant (elements) folding may make in the long-sequence LLM graphs: their rotary angle
# tables (4,096 positions x 64 frequencies) stay ops (Range, Mul, Cos, Sin) rather than 1 MB constants.
LLM_FOLD_LIMIT = 1024
MISSING_EXTRA_MESSAGE = "the export extra is needed"  # followed by `install_command("export")`


@dataclass(frozen=True)
class GraphSpec:
    """One bundled graph: how to build it, its data inputs and what to say about it."""

    name: str
    build: Callable[[], Any]  # () -> torch.nn.Module, built on the meta device
    inputs: tuple[tuple[str, tuple[int, ...], str], ...]  # (name, shape, "float32" | "int64")
    source: str
    description: str
    fold_limit: int | None = None  # see `make_weight_free`; None: onnxscript's default

    @property
    def batch(self) -> int:
        return self.inputs[0][1][0]


def _cifar10_cnn() -> Any:
    from placement_gym.export.models.cifar10_cnn import Cifar10Cnn
    return Cifar10Cnn()


def _resnet56() -> Any:
    from placement_gym.export.models.resnet import ResNetCifar
    return ResNetCifar(depth=56)


def _resnet50() -> Any:
    from placement_gym.export.models.resnet import ResNet50
    return ResNet50()


def _resnet152() -> Any:
    from placement_gym.export.models.resnet import ResNet152
    return ResNet152()


def _inception_v3() -> Any:
    from placement_gym.export.models.inception import InceptionV3
    return InceptionV3()


def _bert_base() -> Any:
    from placement_gym.export.models.bert import BERT_BASE, Bert
    return Bert(BERT_BASE)


def _bert_large() -> Any:
    from placement_gym.export.models.bert import BERT_LARGE, Bert
    return Bert(BERT_LARGE)


def _rnnlm() -> Any:
    from placement_gym.export.models.lstm import RNNLM
    return RNNLM(vocab=40_000, hidden=2048, layers=2)


def _llama2_7b() -> Any:
    from placement_gym.export.models.llama import Llama, LlamaConfig
    # Touvron et al. 2023 (Llama 2), section 2.2: LLaMA's architecture (LLaMA paper, table 2: 32 layers
    # of 4,096, 32 heads; FFN 11,008 by the 8/3 rule; vocab 32,000), GQA only at 34B and 70B. RMSNorm
    # eps 1e-5 and rotary base 10,000 are LlamaConfig's defaults, the released model's params.
    return Llama(LlamaConfig(layers=32, hidden=4096, heads=32, kv_heads=32))


def _llama2_70b() -> Any:
    from placement_gym.export.models.llama import Llama, LlamaConfig
    # Llama 2 70B: 80 layers of 8,192, 64 query heads sharing 8 key/value heads (GQA, Llama 2 paper
    # section 2.2 and appendix A.2.1), FFN 28,672 (the released model's params: 1.3 x the 8/3 rule,
    # rounded up to a multiple of 4,096), vocab 32,000.
    return Llama(LlamaConfig(layers=80, hidden=8192, heads=64, kv_heads=8, ffn=28_672))


def _mixtral_8x7b() -> Any:
    from placement_gym.export.models.llama import LlamaConfig
    from placement_gym.export.models.moe import MoEConfig, moe_decoder
    # Jiang et al. 2024 (Mixtral of Experts), table 1: 32 layers, dim 4,096, 32 heads, 8 KV heads,
    # hidden_dim 14,336, vocab 32,000, 8 experts, top-2; rope_theta 1e6 (the released model's params).
    # Capacity factor 1.0: Mixtral routes without dropping tokens, and a static graph needs a fixed
    # buffer per expert; at 1.0 each expert's buffer holds the balanced share, 2 x tokens / 8, so the
    # experts do the FLOPs of the top-2 routing (1.25 would add a quarter of expert compute).
    base = LlamaConfig(layers=32, hidden=4096, heads=32, kv_heads=8, ffn=14_336, rope_base=1e6)
    return moe_decoder(MoEConfig(base, experts=8, top_k=2, capacity_factor=1.0))


def _gpt3_175b() -> Any:
    from placement_gym.export.models.gpt2 import GPT2, GPT2Config
    # Brown et al. 2020 (GPT-3), table 2.1: 96 layers, d_model 12,288, 96 heads of 128, d_ff = 4 x
    # d_model, n_ctx 2,048; GPT-2's architecture and vocabulary (50,257), its tied head included.
    return GPT2(GPT2Config(layers=96, hidden=12_288, heads=96, max_positions=2048))


def _gnmt(layers: int) -> Callable[[], Any]:
    def build() -> Any:
        from placement_gym.export.models.lstm import GNMT
        return GNMT(src_vocab=32_000, tgt_vocab=32_000, hidden=1024, layers=layers)
    return build


def _gnmt_spec(layers: int) -> GraphSpec:
    """gnmt2, gnmt4, gnmt8: the 2-, 4- and 8-layer NMT of Mirhoseini et al. 2018, one construction."""
    residuals = "no residual connections" if layers <= 2 else "residuals from layer 3"
    # The 2-layer NMT is the 2017 paper's, reused in 2018; the 2018 paper adds 4 and 8 layers. gnmt4's
    # text ("2017/2018") is kept as first bundled, so that its file stays byte-identical.
    papers = "Mirhoseini et al. 2018" if layers == 8 else "Mirhoseini et al. 2017/2018"
    return GraphSpec(
        f"gnmt{layers}", _gnmt(layers), (("src_ids", (128, 20), "int64"), ("tgt_ids", (128, 20), "int64")),
        f"GNMT-style NMT (Wu et al. 2016; {papers}): {layers}+{layers} LSTM layers of "
        "1024, attention, vocab 32k, batch 128, 20 source and 20 target steps",
        f"Unrolled {layers}-layer LSTM encoder and decoder, additive attention from the bottom decoder "
        f"layer, {residuals}, per-step logits + log-softmax.",
    )


_SPECS: tuple[GraphSpec, ...] = (
    GraphSpec(
        "bert_base", _bert_base, (("input_ids", (16, 128), "int64"),),
        "Devlin et al. 2019 BERT-base encoder (12x768, 12 heads, FFN 3072, vocab 30522), batch 16, seq 128",
        "BERT-base: embeddings + LayerNorm, 12 post-LN Transformer layers, pooler; token ids in.",
    ),
    GraphSpec(
        "bert_large", _bert_large, (("input_ids", (16, 512), "int64"),),
        "Devlin et al. 2019 BERT-large encoder (24x1024, 16 heads, FFN 4096, vocab 30522), batch 16, seq 512",
        "BERT-large: embeddings + LayerNorm, 24 post-LN Transformer layers, pooler; its training step "
        "does not fit one 12 GB GPU.",
    ),
    GraphSpec(
        "cifar10_cnn", _cifar10_cnn, (("images", (128, 3, 32, 32), "float32"),),
        "TensorFlow CIFAR-10 tutorial convnet (Spotlight, Gao et al. 2018 benchmark), batch 128, 32x32",
        "conv5x5-64, maxpool, LRN, conv5x5-64, LRN, maxpool, fc384, fc192, linear 10.",
    ),
    GraphSpec(
        "cifar10_resnet56", _resnet56, (("images", (128, 3, 32, 32), "float32"),),
        "He et al. 2016 ResNet-56 for CIFAR-10 (3 stages x 9 basic blocks, 16/32/64 ch), batch 128",
        "ResNet-56 with option-A (identity, zero-padded) shortcuts, BatchNorm unfused.",
    ),
    _gnmt_spec(2),
    _gnmt_spec(4),
    _gnmt_spec(8),
    GraphSpec(
        "inception_v3", _inception_v3, (("images", (32, 3, 299, 299), "float32"),),
        "Szegedy et al. 2016 Inception-V3 (no auxiliary head), ImageNet, batch 32, 299x299",
        "Inception-V3: stem, 3x35x35, reduction, 4x17x17, reduction, 2x8x8 modules, BatchNorm unfused.",
    ),
    GraphSpec(
        "resnet50", _resnet50, (("images", (32, 3, 224, 224), "float32"),),
        "He et al. 2016 ResNet-50 (ImageNet, bottleneck 3-4-6-3), batch 32, 224x224",
        "ResNet-50 with projection shortcuts, BatchNorm unfused.",
    ),
    GraphSpec(
        "resnet152", _resnet152, (("images", (32, 3, 224, 224), "float32"),),
        "He et al. 2016 ResNet-152 (ImageNet, bottleneck 3-8-36-3; Mirhoseini et al. 2018 benchmark), "
        "batch 32, 224x224",
        "ResNet-152 with projection shortcuts, BatchNorm unfused.",
    ),
    GraphSpec(
        "gpt3_175b", _gpt3_175b, (("input_ids", (1, 2048), "int64"),),
        "Brown et al. 2020 GPT-3 175B (table 2.1: 96x12288, 96 heads, FFN 4x, n_ctx 2048, vocab 50257, "
        "learned positions, tied head; dense attention in every layer where the paper alternates dense and "
        "locally banded sparse), batch 1 = one 2048-token sequence per micro-batch (the paper's 3.2M-token "
        "batch is about 1,560 of them)",
        "GPT-3 175B: token + learned position embeddings, 96 pre-LN layers (causal dense attention, GELU "
        "MLP), final LayerNorm, tied head; its training step needs several 8-GPU nodes.",
    ),
    GraphSpec(
        "llama2_70b", _llama2_70b, (("input_ids", (1, 4096), "int64"),),
        "Touvron et al. 2023 Llama 2 70B (80x8192, 64 heads, 8 KV heads (GQA), FFN 28672, vocab 32000), "
        "batch 1 = one 4096-token sequence per micro-batch (the paper's 4M-token batch is about 1,000 of "
        "them)",
        "Llama-2 70B: RMSNorm, grouped-query attention with rotary embeddings, SwiGLU, untied head; its "
        "training step fits no single 8-GPU node.",
        LLM_FOLD_LIMIT,
    ),
    GraphSpec(
        "llama2_7b", _llama2_7b, (("input_ids", (1, 4096), "int64"),),
        "Touvron et al. 2023 Llama 2 7B (32x4096, 32 heads, no GQA, FFN 11008, vocab 32000), batch 1 = one "
        "4096-token sequence per micro-batch (the paper's 4M-token batch is about 1,000 of them)",
        "Llama-2 7B: RMSNorm, multi-head attention with rotary embeddings, SwiGLU, untied head.",
        LLM_FOLD_LIMIT,
    ),
    GraphSpec(
        "mixtral_8x7b", _mixtral_8x7b, (("input_ids", (1, 4096), "int64"),),
        "Jiang et al. 2024 Mixtral 8x7B (32x4096, 32 heads, 8 KV heads, 8 SwiGLU experts of 14336, top-2, "
        "vocab 32000), sequence 4096 (of the paper's 32k context), capacity factor 1.0, batch 1 = one "
        "sequence per micro-batch",
        "Mixtral 8x7B: Llama-style layers whose feed-forward is a router, top-2 dispatch to 8 expert "
        "SwiGLUs (each its own ops, placeable apart) and a weighted combine.",
        LLM_FOLD_LIMIT,
    ),
    GraphSpec(
        "rnnlm", _rnnlm, (("token_ids", (64, 20), "int64"),),
        "RNN language model (Zaremba et al. 2014; Mirhoseini et al. 2017 benchmark): 2 LSTM layers of 2048, "
        "vocab 40k, batch 64, 20 unrolled steps",
        "Unrolled 2-layer LSTM language model: embedding, per-step cells, per-step logits + log-softmax.",
    ),
)

GRAPH_SPECS: dict[str, GraphSpec] = {spec.name: spec for spec in _SPECS}
GRAPH_NAMES: tuple[str, ...] = tuple(sorted(GRAPH_SPECS))


def _require_export_extra() -> None:
    try:
        import onnxscript  # noqa: F401
        import torch  # noqa: F401
    except ImportError as error:
        raise ImportError(f"{MISSING_EXTRA_MESSAGE}: {install_command('export')}") from error


def _example_inputs(spec: GraphSpec) -> tuple[Any, ...]:
    import torch

    dtypes = {"float32": torch.float32, "int64": torch.int64}
    return tuple(torch.empty(shape, dtype=dtypes[dtype], device="meta") for _, shape, dtype in spec.inputs)


def export_graph(name: str) -> onnx.ModelProto:
    """Build graph `name` from its plain-torch definition and return it in weight-free ONNX form."""
    if name not in GRAPH_SPECS:
        raise ValueError(f"unknown graph {name!r}; known graphs: {', '.join(GRAPH_NAMES)}")
    _require_export_extra()
    import torch

    spec = GRAPH_SPECS[name]
    with torch.device("meta"):
        model = spec.build()
    return export_module(model, _example_inputs(spec), [input_name for input_name, _, _ in spec.inputs],
                         spec.source, fold_limit=spec.fold_limit)


def export_module(model: Any, example_inputs: tuple[Any, ...], input_names: Sequence[str],
                  source: str, fold_limit: int | None = None) -> onnx.ModelProto:
    """Export a torch module (in eval mode) to weight-free ONNX; inputs may be `meta` tensors.

    Shapes are fixed to those of `example_inputs`. The module's parameters and buffers become graph
    inputs named as in its `state_dict`. `fold_limit`: the largest constant (elements) that folding may
    make, as in `make_weight_free`.
    """
    _require_export_extra()
    import logging

    import torch

    model.eval()
    exporter_logger = logging.getLogger("torch.onnx")
    previous_level = exporter_logger.level
    exporter_logger.setLevel(logging.ERROR)  # silences "torchvision is not installed" notices
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                model, tuple(example_inputs), dynamo=True, optimize=False, opset_version=OPSET,
                input_names=list(input_names), verbose=False,
            )
    finally:
        exporter_logger.setLevel(previous_level)
    return make_weight_free(program.model, source, fold_limit)


def parameter_count(model: onnx.ModelProto) -> int:
    """Number of weight elements: the product of the shapes of the inputs listed as parameters."""
    names = set(json.loads(_metadata(model)[PARAMETERS_KEY]))
    total = 0
    for value in model.graph.input:
        if value.name in names:
            count = 1
            for dim in value.type.tensor_type.shape.dim:
                count *= dim.dim_value
            total += count
    return total


def _metadata(model: onnx.ModelProto) -> dict[str, str]:
    return {prop.key: prop.value for prop in model.metadata_props}


def _manifest_entry(spec: GraphSpec, model: onnx.ModelProto, data: bytes) -> dict[str, Any]:
    parameters = set(json.loads(_metadata(model)[PARAMETERS_KEY]))
    inputs = {
        value.name: [dim.dim_value for dim in value.type.tensor_type.shape.dim]
        for value in model.graph.input if value.name not in parameters
    }
    return {
        "file": f"{spec.name}.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "source": spec.source,
        "batch": spec.batch,
        "inputs": inputs,
        "nodes": len(model.graph.node),
        "parameters": parameter_count(model),
        "description": spec.description,
    }


def _manifest_json(manifest: dict[str, Any]) -> str:
    """Indented JSON with each shape on one line ("images": [128, 3, 32, 32])."""
    text = json.dumps(manifest, indent=2)
    return re.sub(r"\[\s*(\d+(?:,\s*\d+)*)\s*\]",
                  lambda match: "[" + ", ".join(re.split(r",\s*", match.group(1))) + "]", text) + "\n"


def load_manifest(out_dir: str | Path = REPO_GRAPHS_DIR) -> dict[str, Any]:
    """The manifest in `out_dir`, or an empty one when there is none yet."""
    path = Path(out_dir) / MANIFEST_NAME
    if not path.exists():
        return {"graphs": {}}
    return json.loads(path.read_text())


def export_graphs(
    names: Sequence[str] | None = None, out_dir: str | Path = REPO_GRAPHS_DIR, progress: bool = True
) -> dict[str, Any]:
    """Export `names` (default: all of GRAPH_NAMES) into `out_dir` and update its manifest.json.

    Entries of graphs not exported this time are kept from the existing manifest. Returns the manifest.
    """
    selected = list(GRAPH_NAMES if names is None else names)
    unknown = [name for name in selected if name not in GRAPH_SPECS]
    if unknown:
        raise ValueError(f"unknown graph(s) {', '.join(unknown)}; known graphs: {', '.join(GRAPH_NAMES)}")
    _require_export_extra()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    manifest = load_manifest(out)
    for name in selected:
        start = time.perf_counter()
        model = export_graph(name)
        data = model.SerializeToString(deterministic=True)
        (out / f"{name}.onnx").write_bytes(data)
        manifest["graphs"][name] = _manifest_entry(GRAPH_SPECS[name], model, data)
        if progress:
            entry = manifest["graphs"][name]
            print(f"{name}: {entry['nodes']} nodes, {entry['parameters']:,} parameters, "
                  f"{len(data) / 1e6:.2f} MB, {time.perf_counter() - start:.1f} s", flush=True)
    manifest["graphs"] = dict(sorted(manifest["graphs"].items()))
    (out / MANIFEST_NAME).write_text(_manifest_json(manifest))
    return manifest
