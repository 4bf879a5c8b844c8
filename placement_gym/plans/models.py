"""Transformer models by configuration: the sizes a parallel plan is priced from.

A `TransformerModel` is the configuration of one of the model zoo's plain-torch families
(`placement_gym.export.models`): ``gpt`` (GPT-2/3 and Megatron's GPT: LayerNorm, multi-head attention,
a GeLU MLP four times the width, dropout, tied embeddings), ``llama`` (RMSNorm, grouped-query attention
with rotary embeddings, a SwiGLU MLP, no dropout, untied head) and ``moe`` (a Llama whose MLP is a
mixture of SwiGLU experts with top-k routing, as Mixtral). Its layer is the same sequence of ops as the
family's torch module (`placement_gym.plans.layer`), sized by configuration, so a model of hundreds of
layers is priced from one layer's ops without building its graph.

`model_from_spec` reads a named preset (`MODEL_PRESETS`, with the source of each configuration) or a
configuration written ``family:key=value,...`` (``gpt:layers=96,hidden=12288,heads=96,seq=2048,
vocab=51200``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

FAMILIES = ("gpt", "llama", "moe")

# Largest accepted sizes: far above any published model (a bound on what a command line can ask for).
SIZE_LIMITS = {
    "layers": 4096,
    "hidden": 131_072,
    "heads": 1024,
    "kv_heads": 1024,
    "ffn": 1_048_576,
    "vocab": 4_194_304,
    "seq": 1_048_576,
    "experts": 1024,
    "top_k": 64,
}


def llama_ffn(hidden: int, multiple: int = 256) -> int:
    """Llama's feed-forward width: 8/3 of the width, rounded up to a multiple of ``multiple`` (as
    `placement_gym.export.models.llama.llama_ffn`, which needs torch to import)."""
    width = int(2 * 4 * hidden / 3)
    return multiple * ((width + multiple - 1) // multiple)


@dataclass(frozen=True)
class TransformerModel:
    """A decoder of ``layers`` identical layers, ``hidden`` wide, ``heads`` query heads and ``kv_heads``
    key/value heads (grouped-query attention where fewer), an MLP ``ffn`` wide (``experts`` of them with
    ``top_k`` routing for ``moe``), a ``vocab``-token embedding, trained on sequences of ``seq`` tokens.
    ``ffn`` 0 takes the family's rule (4 x hidden for gpt, `llama_ffn` otherwise); ``kv_heads`` 0 takes
    ``heads``."""

    family: str
    layers: int
    hidden: int
    heads: int
    seq: int
    vocab: int
    kv_heads: int = 0
    ffn: int = 0
    experts: int = 1
    top_k: int = 1
    name: str = ""

    def __post_init__(self) -> None:
        if self.family not in FAMILIES:
            raise ValueError(f"model family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        for key, limit in SIZE_LIMITS.items():
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or not (0 <= value <= limit):
                raise ValueError(f"model {key} must be an integer from 0 to {limit:,}, got {value!r}")
        for key in ("layers", "hidden", "heads", "seq", "vocab", "experts", "top_k"):
            if getattr(self, key) < 1:
                raise ValueError(f"model {key} must be at least 1, got {getattr(self, key)}")
        if self.hidden % self.heads:
            raise ValueError(f"model hidden {self.hidden} does not divide into {self.heads} heads")
        if self.heads % self.key_value_heads:
            raise ValueError(f"model heads {self.heads} do not divide into {self.key_value_heads} kv_heads")
        if self.family == "gpt" and self.kv_heads not in (0, self.heads):
            raise ValueError("model family gpt has multi-head attention: kv_heads must equal heads")
        if (self.experts > 1 or self.top_k > 1) and self.family != "moe":
            raise ValueError(f"model family {self.family} has one MLP: experts and top_k are for moe")
        if self.top_k > self.experts:
            raise ValueError(f"model top_k {self.top_k} exceeds its {self.experts} experts")

    @property
    def key_value_heads(self) -> int:
        return self.kv_heads or self.heads

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def ffn_width(self) -> int:
        if self.ffn:
            return self.ffn
        return 4 * self.hidden if self.family == "gpt" else llama_ffn(self.hidden)

    @property
    def gated(self) -> bool:
        """A SwiGLU MLP (three matrices: gate, up, down) rather than GeLU's two."""
        return self.family != "gpt"

    @property
    def dropout(self) -> bool:
        """Dropout after attention and after the MLP, as Megatron's GPT trains (Llama trains without)."""
        return self.family == "gpt"

    @property
    def tied_embeddings(self) -> bool:
        return self.family == "gpt"

    def attention_parameters(self) -> int:
        kv = self.key_value_heads * self.head_dim
        return self.hidden * (self.hidden + 2 * kv) + self.hidden * self.hidden

    def expert_parameters(self) -> int:
        """The weights of one MLP (one expert of a mixture)."""
        return (3 if self.gated else 2) * self.hidden * self.ffn_width

    def layer_parameters(self) -> int:
        """Every weight of one layer: attention, MLP (all experts, and the router), two norms."""
        router = self.hidden * self.experts if self.family == "moe" else 0
        return (
            self.attention_parameters() + self.experts * self.expert_parameters() + router + 2 * self.hidden
        )

    def embedding_parameters(self) -> int:
        """The token embedding, the final norm and (untied) the output head."""
        head = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + self.hidden + head

    def parameters(self) -> int:
        return self.layers * self.layer_parameters() + self.embedding_parameters()

    def active_parameters(self) -> int:
        """The weights one token passes through: ``top_k`` experts of a mixture, not all of them."""
        inactive = (self.experts - self.top_k) * self.expert_parameters()
        return self.parameters() - self.layers * inactive

    def training_flops_per_token(self) -> float:
        """Model FLOPs of one trained token as Megatron-LM counts them (Narayanan et al. 2021, eq. 3):
        forward and backward (3 x 2 FLOPs a weight) of every matrix product a token passes through
        (attention, ``top_k`` experts and the router, the output head; not the embedding lookup or the
        norms) plus the attention scores and context over the whole sequence (3 x 4 x seq x hidden a
        layer, no causal saving). The MFU of a plan divides these by the GPUs' peak."""
        router = self.hidden * self.experts if self.family == "moe" else 0
        per_layer = self.attention_parameters() + self.top_k * self.expert_parameters() + router
        matrices = self.layers * per_layer + self.vocab * self.hidden
        return 6.0 * matrices + 12.0 * self.layers * self.seq * self.hidden

    def describe(self) -> str:
        experts = f", {self.experts} experts top-{self.top_k}" if self.family == "moe" else ""
        return (
            f"{self.name or self.family}: {self.layers} layers x {self.hidden}, {self.heads} heads "
            f"({self.key_value_heads} kv), ffn {self.ffn_width}{experts}, vocab {self.vocab}, "
            f"sequence {self.seq}; {self.parameters() / 1e9:,.1f}B parameters"
        )


# Named configurations: those of the published rows (REFERENCE: Korthikanti et al. 2022 Table 5; the Llama 2
# paper's Table 1 and model cards; the Llama 3 report; Mixtral's paper, Jiang et al. 2024; GPT-3, Brown
# et al. 2020; Megatron-LM's 530B and 1T GPTs, Narayanan et al. 2021).
# name: family, layers, hidden, heads, kv_heads, ffn, experts, top_k, seq, vocab (0: the family's rule)
_PRESET_SIZES: dict[str, tuple[str, int, int, int, int, int, int, int, int, int]] = {
    "gpt-22b": ("gpt", 48, 6144, 64, 0, 0, 1, 1, 2048, 51200),
    "gpt3-175b": ("gpt", 96, 12288, 96, 0, 0, 1, 1, 2048, 51200),
    "gpt-530b": ("gpt", 105, 20480, 128, 0, 0, 1, 1, 2048, 51200),
    "gpt-1t": ("gpt", 128, 25600, 160, 0, 0, 1, 1, 2048, 51200),
    "llama2-7b": ("llama", 32, 4096, 32, 0, 0, 1, 1, 4096, 32000),
    "llama2-13b": ("llama", 40, 5120, 40, 0, 0, 1, 1, 4096, 32000),
    "llama2-70b": ("llama", 80, 8192, 64, 8, 28672, 1, 1, 4096, 32000),
    "llama3-405b": ("llama", 126, 16384, 128, 8, 53248, 1, 1, 8192, 128256),
    "mixtral-8x7b": ("moe", 32, 4096, 32, 8, 14336, 8, 2, 4096, 32000),
    # The other models of the plans-v1 dataset (placement_gym/plans/dataset.py): GPT at the sizes of
    # Narayanan et al. 2021's Table 1, Llama 3.2 1B and 3B and Llama 3 8B (their model cards; an untied
    # head counted), Code Llama 34B, Mixtral 8x22B (Mistral's model card) and a small 8x1B of its shape.
    "gpt-1.7b": ("gpt", 24, 2304, 24, 0, 0, 1, 1, 2048, 51200),
    "gpt-3.6b": ("gpt", 30, 3072, 32, 0, 0, 1, 1, 2048, 51200),
    "gpt-7.5b": ("gpt", 36, 4096, 32, 0, 0, 1, 1, 2048, 51200),
    "gpt-18b": ("gpt", 40, 6144, 48, 0, 0, 1, 1, 2048, 51200),
    "gpt-39b": ("gpt", 48, 8192, 64, 0, 0, 1, 1, 2048, 51200),
    "gpt-76b": ("gpt", 60, 10240, 80, 0, 0, 1, 1, 2048, 51200),
    "gpt-145b": ("gpt", 80, 12288, 96, 0, 0, 1, 1, 2048, 51200),
    "gpt-310b": ("gpt", 96, 16384, 128, 0, 0, 1, 1, 2048, 51200),
    "llama3-1b": ("llama", 16, 2048, 32, 8, 8192, 1, 1, 4096, 128256),
    "llama3-3b": ("llama", 28, 3072, 24, 8, 8192, 1, 1, 4096, 128256),
    "llama3-8b": ("llama", 32, 4096, 32, 8, 14336, 1, 1, 8192, 128256),
    "codellama-34b": ("llama", 48, 8192, 64, 8, 22016, 1, 1, 4096, 32000),
    "mixtral-8x1b": ("moe", 16, 2048, 16, 4, 5632, 8, 2, 4096, 32000),
    "mixtral-8x22b": ("moe", 56, 6144, 48, 8, 16384, 8, 2, 4096, 32768),
}


MODEL_PRESETS: dict[str, TransformerModel] = {
    name: TransformerModel(family, layers, hidden, heads, seq, vocab, kv_heads, ffn, experts, top_k, name)
    for name, (family, layers, hidden, heads, kv_heads, ffn, experts, top_k, seq, vocab)
    in _PRESET_SIZES.items()
}

_KEYS = {f.name for f in fields(TransformerModel)} - {"family", "name"}


def model_from_spec(spec: str) -> TransformerModel:
    """The model of ``spec``: a name of `MODEL_PRESETS`, a preset with sizes changed
    (``llama2-7b:seq=8192``) or ``family:key=value,...`` with every size the family needs. A
    ValueError names what is wrong and what is allowed."""
    if not isinstance(spec, str) or len(spec) > 400:
        raise ValueError("a model is a preset name or family:key=value,... (at most 400 characters)")
    head, _, rest = spec.strip().partition(":")
    if head in MODEL_PRESETS:
        base = MODEL_PRESETS[head]
    elif head in FAMILIES:
        base = None
    else:
        raise ValueError(
            f"unknown model {head!r}: give a preset ({', '.join(MODEL_PRESETS)}) or "
            f"{'|'.join(FAMILIES)}:layers=..,hidden=..,heads=..,seq=..,vocab=.."
        )
    sizes: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in rest.split(","))):
        key, equals, value = item.partition("=")
        key = key.strip()
        if not equals or key not in _KEYS:
            raise ValueError(
                f"model option {item!r}: write key=value with a key of {', '.join(sorted(_KEYS))}"
            )
        if key in sizes:
            raise ValueError(f"model option {key} given twice")
        try:
            sizes[key] = int(value.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"model option {key} must be an integer, got {value.strip()!r}") from None
    if base is not None:
        return replace(base, **sizes, name=spec.strip() if sizes else base.name)
    missing = [key for key in ("layers", "hidden", "heads", "seq", "vocab") if key not in sizes]
    if missing:
        raise ValueError(f"model {head}: give {', '.join(missing)} (as {head}:layers=..,hidden=..)")
    return TransformerModel(family=head, name=spec.strip(), **sizes)
