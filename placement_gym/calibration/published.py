"""Published per-step measurements the cost model is calibrated against, each with its source.

Three kinds of row:

* ``step``: one training step of a model on one device, as a framework's benchmark measured it. The
  model's figure is the runtime of the task with every op on that device.
* ``ratio``: how much faster (or slower) a multi-device placement ran than one device, both
  measured by the same people on the same machine: published ``single / placement``, the model's
  the same ratio of the two simulated runtimes. The placement comes from the agent of the same name
  (``expert``: the layer-per-GPU placement of the source; ``m-etf``, ``m-sct``, ``m-topo``: Baechi's
  algorithms as this project implements them) run on the task.
* ``mfu``: the model-FLOP utilisation a source reports for mixed-precision training (model FLOPs per
  second over the tensor-core peak). The model's figure is that of the task's matrix products alone
  on one device: their FLOPs (forward and backward) over their simulated time and the device's
  tensor-core peak. The sources' fused kernels leave a step little besides its matrix products; an
  unfused graph's memory-bound ops are costed on their own, so the step's utilisation is not the
  figure compared, the matmul efficiency is.

Tolerances: a step within 25% of the published time, a ratio within 15%, a utilisation
within 25% of the published one. A row the model cannot reproduce by design (``beyond_model``: why)
is shown with its error and held to no tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

STEP_TOLERANCE = 0.25
RATIO_TOLERANCE = 0.15

# Sources (docs/references.md, "Published measurements").
TF_BENCHMARKS = (
    "TensorFlow performance benchmarks (the tensorflow repository's docs_src performance benchmarks "
    "page, tested May 2017, "
    "CUDA 8 / cuDNN 5.1, synthetic data, optimizer sgd, 1 GPU; average of 100 steps after 10 warm-up, "
    "5 runs)"
)
TF_NMT = (
    "tensorflow/nmt README, WMT German-English benchmarks on K40m (batch 128, 1024 units, GNMT "
    "attention, sgd; wps counts source and target words)"
)
BAECHI = (
    "Baechi PyTorch results (chiragcshetty/BaechiPyTorch, main_training/results/result_details.txt, "
    "Inception-V3, batch 64, 4 GPUs of 8 GB; two runs each, the numbers quoted in the Baechi paper)"
)
DLE = (
    "NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5 README (pytorch-21.03 container, "
    "DGX-1 1x V100 16GB, FP32, batch 112)"
)
DLE_AMP = (
    "NVIDIA DeepLearningExamples, PyTorch ResNet-50 v1.5 README, training performance (pytorch-21.03 "
    "container, 1 GPU, mixed precision (AMP), batch 256 per GPU as its configs.yml sets for DGXA100 and "
    "DGX1V AMP, SGD with momentum 0.875)"
)
MEGATRON_SC21 = (
    "Narayanan et al., Efficient Large-Scale Language Model Training on GPU Clusters Using Megatron-LM "
    "(SC'21): a 1T-parameter GPT on 3,072 A100 at 163 TFLOP/s per GPU, 52% of the 312 TFLOP/s peak"
)
MEGATRON_H100 = (
    "NVIDIA Megatron-LM README (Megatron Core): GPT-3 175B strong-scaled from 96 to 4,608 H100 "
    "(batch 1,152), model-FLOP utilisation 47% at 96 GPUs down to 42%; GPT models 2B-462B at 41-48%"
)
MLPERF_RESNET = (
    "MLPerf Training v4.0, NVIDIA's closed-division result eos_ngc24.04_mxnet/resnet: ResNet-50 v1.5 on "
    "8 x H100-SXM5-80GB, global batch 3,200 (400 per GPU), 57.2k images/s steady state"
)


@dataclass(frozen=True)
class PublishedRow:
    """One published figure and the task that models it.

    ``graph``/``batch``: the bundled graph, re-imported at ``batch`` (the source's batch).
    ``cluster``: the preset that models the source's machine (`placement_gym.cluster.PRESETS`);
    ``device``: the device a ``step`` row runs on (and a ``ratio`` row's one-device reference).
    ``step_s``: the published seconds per step; for a ``ratio`` row ``ratio`` = published single-device
    time / placement time. ``items_per_step`` scales a throughput figure given per item (images, words)
    to this graph's step; ``figure`` is the source's own number and unit, quoted. ``precision``: the
    task's (``bf16``/``fp16``: mixed precision on tensor cores, as the source trained). ``mfu``: the
    published model-FLOP utilisation of an ``mfu`` row (a fraction). ``beyond_model``: why the model
    cannot reproduce the row (empty: it is held to its tolerance)."""

    id: str
    kind: str  # "step", "ratio" or "mfu"
    source: str
    model: str
    hardware: str
    framework: str
    figure: str
    graph: str
    batch: int
    cluster: str
    device: str = "gpu:0"
    optimizer: str = "sgd"
    precision: str = "fp32"
    step_s: float | None = None
    ratio: float | None = None
    placement: str | None = None
    note: str = ""
    mfu: float | None = None
    beyond_model: str = ""

    @property
    def tolerance(self) -> float:
        return RATIO_TOLERANCE if self.kind == "ratio" else STEP_TOLERANCE

    @property
    def published(self) -> float:
        value = {"step": self.step_s, "ratio": self.ratio, "mfu": self.mfu}[self.kind]
        assert value is not None
        return value


# GNMT: the bundled graphs unroll 20 source and 20 target steps (40 words per sentence pair); the
# published wps over step time gives 2.8K x 2.6 s / 128 = 56.9 words per pair, so the published
# step is scaled to 40 words: seconds per step = 128 x 40 / wps.
GNMT_WORDS_PER_STEP = 128 * 40

PUBLISHED: tuple[PublishedRow, ...] = (
    # --- one device: TensorFlow benchmarks, Kepler (K80 die) and Pascal (P100 SXM2) ---------------
    PublishedRow(
        "tf-k80-inception_v3",
        "step",
        TF_BENCHMARKS,
        "Inception-V3",
        "GCE, 1 Tesla K80 die",
        "TensorFlow (May 2017)",
        "29.3 images/s",
        "inception_v3",
        32,
        "k80x4",
        step_s=32 / 29.3,
    ),
    PublishedRow(
        "tf-k80-resnet50",
        "step",
        TF_BENCHMARKS,
        "ResNet-50",
        "GCE, 1 Tesla K80 die",
        "TensorFlow (May 2017)",
        "49.5 images/s",
        "resnet50",
        32,
        "k80x4",
        step_s=32 / 49.5,
    ),
    PublishedRow(
        "tf-k80-resnet152",
        "step",
        TF_BENCHMARKS,
        "ResNet-152",
        "GCE, 1 Tesla K80 die",
        "TensorFlow (May 2017)",
        "20.0 images/s",
        "resnet152",
        32,
        "k80x4",
        step_s=32 / 20.0,
    ),
    PublishedRow(
        "tf-p100-inception_v3",
        "step",
        TF_BENCHMARKS,
        "Inception-V3",
        "DGX-1, 1 Tesla P100 SXM2",
        "TensorFlow (May 2017)",
        "128 images/s",
        "inception_v3",
        32,
        "dgx1-p100",
        step_s=32 / 128,
    ),
    PublishedRow(
        "tf-p100-resnet50",
        "step",
        TF_BENCHMARKS,
        "ResNet-50",
        "DGX-1, 1 Tesla P100 SXM2",
        "TensorFlow (May 2017)",
        "195 images/s",
        "resnet50",
        32,
        "dgx1-p100",
        step_s=32 / 195,
    ),
    PublishedRow(
        "tf-p100-resnet152",
        "step",
        TF_BENCHMARKS,
        "ResNet-152",
        "DGX-1, 1 Tesla P100 SXM2",
        "TensorFlow (May 2017)",
        "82.7 images/s",
        "resnet152",
        32,
        "dgx1-p100",
        step_s=32 / 82.7,
    ),
    # --- one device: Volta (PyTorch, FP32: no tensor cores) ---------------------------------------
    PublishedRow(
        "dle-v100-resnet50",
        "step",
        DLE,
        "ResNet-50 v1.5",
        "DGX-1, 1 Tesla V100 SXM2 16 GB",
        "PyTorch (21.03)",
        "367 images/s",
        "resnet50",
        112,
        "v100x8",
        step_s=112 / 367,
        note="v1.5 puts the stride in the 3x3 convolution (about 4% more FLOPs than the bundled v1)",
    ),
    # --- one device, mixed precision: Volta, Ampere, Hopper tensor cores --------------------------
    PublishedRow(
        "dle-v100-resnet50-amp",
        "step",
        DLE_AMP,
        "ResNet-50 v1.5",
        "DGX-1, 1 Tesla V100 SXM2 16 GB",
        "PyTorch (21.03), AMP",
        "1200 images/s",
        "resnet50",
        256,
        "v100x8",
        optimizer="momentum",
        precision="fp16",
        step_s=256 / 1200,
        note="v1.5 puts the stride in the 3x3 convolution (about 4% more FLOPs than the bundled v1)",
    ),
    PublishedRow(
        "dle-a100-resnet50-amp",
        "step",
        DLE_AMP,
        "ResNet-50 v1.5",
        "DGX A100, 1 A100 SXM 80 GB",
        "PyTorch (21.03), AMP",
        "2470 images/s",
        "resnet50",
        256,
        "dgx-a100",
        optimizer="momentum",
        precision="fp16",
        step_s=256 / 2470,
        note="v1.5 puts the stride in the 3x3 convolution (about 4% more FLOPs than the bundled v1)",
    ),
    PublishedRow(
        "megatron-a100-mfu",
        "mfu",
        MEGATRON_SC21,
        "GPT, 1T parameters (the bundled GPT-3 175B's matrix products stand in)",
        "3,072 A100 SXM 80 GB (Selene)",
        "Megatron-LM, bf16/fp16 mixed precision",
        "163 TFLOP/s per GPU, 52% of peak",
        "gpt3_175b",
        1,
        "dgx-a100",
        optimizer="adam",
        precision="bf16",
        mfu=0.52,
        note="the utilisation of a 1T-parameter GPT's fused, pipelined step. The paper's GPT models are "
        "GPT-3's decoder (learned positions, GELU MLP of 4 x hidden, sequence 2,048) at other widths, so "
        "the bundled GPT-3 175B stands in, not a Llama (SwiGLU, rotary, GQA); batch 1 is one 2,048-token "
        "sequence, the graph's own micro-batch, and its matrix products are large enough that the figure "
        "hardly moves with the batch",
    ),
    # BERT-large still stands in here: on the bundled gpt3_175b (batch 1) the model's figure is 0.630
    # (+34%), since Hopper's matmul efficiency (0.65) was fitted on BERT-large's smaller products; the
    # move waits for a refit of that figure, which changes suite v2's bf16 H100 tasks.
    PublishedRow(
        "megatron-h100-mfu",
        "mfu",
        MEGATRON_H100,
        "GPT-3 175B (the bundled BERT-large's matrix products stand in)",
        "96 H100 SXM 80 GB",
        "Megatron-LM (Megatron Core), bf16",
        "47% model-FLOP utilisation",
        "bert_large",
        16,
        "dgx-h100x2",
        optimizer="adam",
        precision="bf16",
        mfu=0.47,
        note="the README's highest utilisation of GPT-3 175B (96 GPUs; 42% at 4,608); its GPT models of "
        "2B-462B reach 41-48%",
    ),
    PublishedRow(
        "mlperf-h100-resnet50",
        "step",
        MLPERF_RESNET,
        "ResNet-50 v1.5",
        "DGX H100, 1 of 8 H100 SXM 80 GB",
        "MXNet (NGC 24.04), fp16, fused kernels",
        "57.2k images/s on 8 GPUs",
        "resnet50",
        400,
        "h100x8",
        optimizer="momentum",
        precision="fp16",
        step_s=3200 / 57200,
        note="one GPU's share of the data-parallel step (its gradient all-reduce overlaps the backward "
        "pass); LARS is costed as momentum (one state copy)",
        beyond_model="NVIDIA's MLPerf ResNet-50 fuses batch normalisation, ReLU and the residual add "
        "into the convolutions; the model costs each op of the graph on its own, and its memory-bound "
        "ops alone take longer than the published step at the H100's bandwidth",
    ),
    # --- GNMT on K40m: one GPU and layer-per-GPU placements ---------------------------------------
    PublishedRow(
        "nmt-k40-gnmt4",
        "step",
        TF_NMT,
        "GNMT-4 (GNMT attention)",
        "1 Tesla K40m",
        "TensorFlow (tensorflow/nmt)",
        "2.6 s/step, 2.8K wps",
        "gnmt4",
        128,
        "k40x4",
        step_s=GNMT_WORDS_PER_STEP / 2800,
        note="scaled to the graph's 40 words per sentence pair; the source's encoder has one "
        "bidirectional layer, the bundled graph four unidirectional ones",
    ),
    PublishedRow(
        "nmt-k40-gnmt8",
        "step",
        TF_NMT,
        "GNMT-8 (GNMT attention)",
        "1 Tesla K40m",
        "TensorFlow (tensorflow/nmt)",
        "4.2 s/step, 1.7K wps",
        "gnmt8",
        128,
        "k40x8",
        step_s=GNMT_WORDS_PER_STEP / 1700,
        note="scaled to 40 words per sentence pair",
    ),
    PublishedRow(
        "nmt-k40x4-gnmt4",
        "ratio",
        TF_NMT,
        "GNMT-4 (GNMT attention)",
        "4 Tesla K40m",
        "TensorFlow (tensorflow/nmt)",
        "2.6 s on 1 GPU, 1.7 s on 4",
        "gnmt4",
        128,
        "k40x4",
        ratio=2.6 / 1.7,
        placement="expert",
        note="layer i on GPU i mod 4",
    ),
    PublishedRow(
        "nmt-k40x8-gnmt8",
        "ratio",
        TF_NMT,
        "GNMT-8 (GNMT attention)",
        "8 Tesla K40m",
        "TensorFlow (tensorflow/nmt)",
        "4.2 s on 1 GPU, 1.9 s on 8",
        "gnmt8",
        128,
        "k40x8",
        ratio=4.2 / 1.9,
        placement="expert",
        note="layer i on GPU i mod 8",
    ),
    # --- Inception-V3 on Baechi's 4-GPU PyTorch machine ---------------------------------------------
    PublishedRow(
        "baechi-inception_v3",
        "step",
        BAECHI,
        "Inception-V3",
        "1 GPU of 8 GB (GeForce RTX 2080)",
        "PyTorch",
        "457.43 / 460.12 ms",
        "inception_v3",
        64,
        "baechi-rtx2080x4",
        optimizer="sgd",
        step_s=(0.45743 + 0.46012) / 2,
        note="the GPU model is the one the repository's speed test names; the paper's text was not available",
    ),
    PublishedRow(
        "baechi-inception_v3-m-etf",
        "ratio",
        BAECHI,
        "Inception-V3",
        "4 GPUs of 8 GB",
        "PyTorch",
        "single 458.8 ms, m-ETF 465.7 ms",
        "inception_v3",
        64,
        "baechi-rtx2080x4",
        ratio=(0.45743 + 0.46012) / (0.46600 + 0.46535),
        placement="m-etf",
    ),
    PublishedRow(
        "baechi-inception_v3-m-sct",
        "ratio",
        BAECHI,
        "Inception-V3",
        "4 GPUs of 8 GB",
        "PyTorch",
        "single 458.8 ms, m-SCT 464.5 ms",
        "inception_v3",
        64,
        "baechi-rtx2080x4",
        ratio=(0.45743 + 0.46012) / (0.46247 + 0.46655),
        placement="m-sct",
    ),
    PublishedRow(
        "baechi-inception_v3-m-topo",
        "ratio",
        BAECHI,
        "Inception-V3",
        "4 GPUs of 8 GB",
        "PyTorch",
        "single 458.8 ms, m-TOPO 535.1 ms",
        "inception_v3",
        64,
        "baechi-rtx2080x4",
        ratio=(0.45743 + 0.46012) / (0.53327 + 0.53702),
        placement="m-topo",
    ),
)
