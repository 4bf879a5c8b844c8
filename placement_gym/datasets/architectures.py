"""Graph families of real architectures: each graph is a plain-torch model of `placement_gym.export.models`
built on the meta device (no weights, no network) at one point of its family's grid and exported as the
bundled graphs are (`placement_gym.export.onnx_export.export_module`: weight-free ONNX by torch's dynamo
exporter, then `placement_gym.graph.onnx_import`).

A family maps its parameters (whole numbers: depth, width, heads, batch, sequence length...) to a model
and its example inputs (`ModelSpec`). Exporting takes seconds (about a second plus 5 to 10 ms an op on
one core), so `placement_gym.datasets.dataset.Dataset` caches what it built (`placement_gym.graph.stored`).
torch is imported only when a graph is exported: reading a cached graph needs numpy alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from placement_gym.graph.opgraph import OpGraph

Inputs = tuple[tuple[str, tuple[int, ...], str], ...]  # (name, shape, "float32" | "int64")


@dataclass(frozen=True)
class ModelSpec:
    """A model to export: ``build()`` makes the torch module (called on the meta device); ``inputs`` are
    its data inputs."""

    build: Callable[[], Any]
    inputs: Inputs


def require_export_extra(purpose: str) -> None:
    """A one-line ImportError naming the export extra when torch or onnxscript is missing."""
    try:
        import onnxscript  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        # Imported here, as onnx below: importing onnx costs a second, and most commands build no graph.
        from placement_gym.common.extras import install_command
        from placement_gym.export import MISSING_EXTRA_MESSAGE

        raise ImportError(f"{purpose}: {MISSING_EXTRA_MESSAGE}: {install_command('export')}") from None


def export_graph(spec: ModelSpec, name: str) -> OpGraph:
    """The `OpGraph` of ``spec``'s model, named ``name``; a ValueError when the import costs an op
    without its formula or takes a float input for data without saying so (the family is broken)."""
    require_export_extra(f"building graph {name}")
    import torch

    from placement_gym.export.onnx_export import export_module
    from placement_gym.graph.onnx_import import import_own_model

    dtypes = {"float32": torch.float32, "int64": torch.int64}
    with torch.device("meta"):
        module = spec.build()
    example = tuple(torch.empty(shape, dtype=dtypes[dtype], device="meta") for _, shape, dtype in spec.inputs)
    model = export_module(module, example, [input_name for input_name, _, _ in spec.inputs], name)
    return import_own_model(model, name)


def worker_setup() -> None:
    """Each worker process of a build exports on one thread: the cores are shared among the workers."""
    try:
        import torch
    except ImportError:
        return  # the graph that needs it says so, naming the extra
    torch.set_num_threads(1)


# --- the families: parameters -> model ------------------------------------------------------------------

def _ids(*names_and_shapes: tuple[str, tuple[int, ...]]) -> Inputs:
    return tuple((name, shape, "int64") for name, shape in names_and_shapes)


def _images(batch: int, size: int, channels: int = 3) -> Inputs:
    return (("images", (batch, channels, size, size), "float32"),)


def resnet(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.resnet import ResNetCifar
    return ModelSpec(lambda: ResNetCifar(depth=p["depth"], widen=p["widen"]), _images(p["batch"], 32))


def inception(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.inception import InceptionV3
    return ModelSpec(lambda: InceptionV3(depth=p["depth"], width=p["width"] / 100),
                     _images(p["batch"], p["image"]))


def efficientnet(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.efficientnet import EfficientNet
    return ModelSpec(lambda: EfficientNet(depth=p["depth"] / 100, width=p["width"] / 100),
                     _images(p["batch"], p["image"]))


def convnext(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.convnext import ConvNeXt
    d = p["depth"]
    return ModelSpec(lambda: ConvNeXt(depths=(d, d, 3 * d, d), width=p["width"]),
                     _images(p["batch"], p["image"]))


def unet(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.unet import UNet
    return ModelSpec(lambda: UNet(levels=p["levels"], width=p["width"], convs=p["convs"]),
                     _images(p["batch"], p["image"]))


def vit(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.vit import ViT, ViTConfig
    config = ViTConfig(p["layers"], p["hidden"], p["heads"], image=p["image"])
    return ModelSpec(lambda: ViT(config), _images(p["batch"], p["image"]))


def bert(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.bert import Bert, BertConfig
    config = BertConfig(p["layers"], p["hidden"], p["heads"], 4 * p["hidden"])
    return ModelSpec(lambda: Bert(config), _ids(("input_ids", (p["batch"], p["seq"]))))


def gpt2(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.gpt2 import GPT2, GPT2Config
    config = GPT2Config(p["layers"], p["hidden"], p["heads"])
    return ModelSpec(lambda: GPT2(config), _ids(("input_ids", (p["batch"], p["seq"]))))


def llama(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.llama import Llama, LlamaConfig
    config = LlamaConfig(p["layers"], p["hidden"], p["heads"], p["kv_heads"])
    return ModelSpec(lambda: Llama(config), _ids(("input_ids", (p["batch"], p["seq"]))))


def moe(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.llama import LlamaConfig
    from placement_gym.export.models.moe import MoEConfig, moe_decoder
    base = LlamaConfig(p["layers"], p["hidden"], p["heads"], p["kv_heads"])
    config = MoEConfig(base, p["experts"], p["top_k"])
    return ModelSpec(lambda: moe_decoder(config), _ids(("input_ids", (p["batch"], p["seq"]))))


def t5(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.t5 import T5, T5Config
    config = T5Config(p["layers"], p["hidden"], p["heads"], 4 * p["hidden"])
    return ModelSpec(lambda: T5(config), _ids(("src_ids", (p["batch"], p["seq"])),
                                              ("tgt_ids", (p["batch"], max(1, p["seq"] // 4)))))


def rnnlm(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.lstm import RNNLM
    return ModelSpec(lambda: RNNLM(vocab=10_000, hidden=p["hidden"], layers=p["layers"]),
                     _ids(("token_ids", (p["batch"], p["steps"]))))


def gnmt(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.lstm import GNMT
    return ModelSpec(lambda: GNMT(src_vocab=32_000, tgt_vocab=32_000, hidden=p["hidden"], layers=p["layers"]),
                     _ids(("src_ids", (p["batch"], p["steps"])), ("tgt_ids", (p["batch"], p["steps"]))))


def whisper(p: dict[str, int]) -> ModelSpec:
    from placement_gym.export.models.whisper import WhisperConfig, WhisperEncoder
    config = WhisperConfig(p["layers"], p["hidden"], p["heads"])
    mel = (p["batch"], config.mels, p["frames"])
    return ModelSpec(lambda: WhisperEncoder(config), (("mel", mel, "float32"),))


# name -> (what it is, parameters -> model)
ARCHITECTURES: dict[str, tuple[str, Callable[[dict[str, int]], ModelSpec]]] = {
    "resnet": ("ResNet-(6n+2) and wide ResNets (WRN-d-k) on CIFAR images (He et al. 2016; Zagoruyko & "
               "Komodakis 2016)", resnet),
    "inception": ("Inception-V3 (Szegedy et al. 2016), its module counts and channel widths scaled",
                  inception),
    "efficientnet": ("MobileNet / EfficientNet-style: inverted residual MBConv blocks with depthwise "
                     "separable convolutions and squeeze-and-excitation, EfficientNet's compound scaling",
                     efficientnet),
    "convnext": ("ConvNeXt (Liu et al. 2022): 7x7 depthwise convolutions, LayerNorm, inverted MLPs",
                 convnext),
    "unet": ("U-Net (Ronneberger et al. 2015): encoder, decoder, skip connections", unet),
    "vit": ("Vision Transformer (Dosovitskiy et al. 2021), 16x16 patches", vit),
    "bert": ("BERT-style post-LN encoder (Devlin et al. 2019)", bert),
    "gpt2": ("GPT-2-style pre-LN causal decoder with a tied head (Radford et al. 2019)", gpt2),
    "llama": ("Llama-style decoder: RMSNorm, SwiGLU, rotary embeddings, grouped-query attention", llama),
    "moe": ("mixture-of-experts decoder: router, top-k capacity dispatch, each expert its own SwiGLU ops",
            moe),
    "t5": ("T5-style encoder-decoder with relative position buckets (Raffel et al. 2020)", t5),
    "rnnlm": ("unrolled LSTM language model, PTB vocabulary (Zaremba et al. 2014; Mirhoseini et al. 2017)",
              rnnlm),
    "gnmt": ("GNMT-style unrolled LSTM translation with attention (Wu et al. 2016; Mirhoseini et al. 2018)",
             gnmt),
    "whisper": ("Whisper-style speech encoder: convolutions over log-Mel frames, pre-LN Transformer "
                "(Radford et al. 2022)", whisper),
}


def architecture_builder(family: str) -> Callable[[dict[str, Any], int, str], OpGraph]:
    """``build(params, seed, name)`` of ``family``: the exported graph (the seed plays no part)."""
    make = ARCHITECTURES[family][1]

    def build(params: dict[str, Any], seed: int, name: str) -> OpGraph:
        require_export_extra(f"building graph {name}")  # before the model's module imports torch
        return export_graph(make(params), name)

    return build
