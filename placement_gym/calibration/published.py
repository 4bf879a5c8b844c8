"""Published per-step measurements the cost model is calibrated against, each with its source.

Two kinds of row:

* ``step``: one training step of a model on one device, as a framework's benchmark measured it. The
  model's figure is the runtime of the task with every op on that device.
* ``ratio``: how much faster (or slower) a multi-device placement ran than one device, both
  measured by the same people on the same machine: published ``single / placement``, the model's
  the same ratio of the two simulated runtimes. The placement comes from the agent of the same name
  (``expert``: the layer-per-GPU placement of the source; ``m-etf``, ``m-sct``, ``m-topo``: Baechi's
  algorithms as this project implements them) run on the task.

Tolerances (issue 13): a step within 25% of the published time, a ratio within 15%.
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


@dataclass(frozen=True)
class PublishedRow:
    """One published figure and the task that models it.

    ``graph``/``batch``: the bundled graph, re-imported at ``batch`` (the source's batch).
    ``cluster``: a calibration machine (`placement_gym.calibration.machines`) or preset name;
    ``device``: the device a ``step`` row runs on (and a ``ratio`` row's one-device reference).
    ``step_s``: the published seconds per step; for a ``ratio`` row ``ratio`` = published single-device
    time / placement time. ``items_per_step`` scales a throughput figure given per item (images, words)
    to this graph's step; ``figure`` is the source's own number and unit, quoted."""

    id: str
    kind: str  # "step" or "ratio"
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
    step_s: float | None = None
    ratio: float | None = None
    placement: str | None = None
    note: str = ""

    @property
    def tolerance(self) -> float:
        return STEP_TOLERANCE if self.kind == "step" else RATIO_TOLERANCE

    @property
    def published(self) -> float:
        value = self.step_s if self.kind == "step" else self.ratio
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
