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

import json
from dataclasses import dataclass
from pathlib import Path

STEP_TOLERANCE = 0.25
RATIO_TOLERANCE = 0.15

@dataclass(frozen=True)
class PublishedRow:
    """One published figure and the task that models it.

    ``graph``/``batch``: the bundled graph, re-imported at ``batch`` (the source's batch).
    ``cluster``: the preset that models the source's machine (`placement_gym.cluster.PRESETS`);
    ``device``: the device a ``step`` row runs on (and a ``ratio`` row's one-device reference).
    ``step_s``: the published seconds per step; for a ``ratio`` row ``ratio`` = published single-device
    time / placement time (`load_published` computes both from the source's own numbers); ``figure`` is
    the source's own number and unit, quoted. ``precision``: the task's (``bf16``/``fp16``: mixed
    precision on tensor cores, as the source trained). ``mfu``: the published model-FLOP utilisation of
    an ``mfu`` row (a fraction). ``beyond_model``: why the model cannot reproduce the row (empty: it is
    held to its tolerance)."""

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


PUBLISHED_FILE = Path(__file__).with_name("published.json")
"""The rows, as data: ``sources`` (each source's citation by a short key, docs/references.md,
"Published measurements") and ``rows``, one object per `PublishedRow` whose ``source`` is such a key and
whose published time is given by the numbers the source prints (`load_published`); a ``comment`` says why
a row is as it is."""

# The keys of a row that give its published figure, turned into `PublishedRow` fields by `load_published`.
_MEASURED = ("throughput", "runs_s", "times_s")


def load_published(path: Path = PUBLISHED_FILE) -> tuple[PublishedRow, ...]:
    """The `PublishedRow` of every row of the data file at ``path``. A row's published time comes from
    the source's own numbers: ``throughput`` (``items`` per step over ``items_per_s``) or ``runs_s`` (the
    mean of its runs) give ``step_s``; ``times_s`` (the summed ``single``-device runs over the summed
    ``placement`` runs) gives ``ratio``."""
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for entry in data["rows"]:
        fields = {key: value for key, value in entry.items() if key not in ("comment", *_MEASURED)}
        fields["source"] = data["sources"][entry["source"]]
        if "throughput" in entry:
            fields["step_s"] = entry["throughput"]["items"] / entry["throughput"]["items_per_s"]
        if "runs_s" in entry:
            fields["step_s"] = sum(entry["runs_s"]) / len(entry["runs_s"])
        if "times_s" in entry:
            fields["ratio"] = sum(entry["times_s"]["single"]) / sum(entry["times_s"]["placement"])
        rows.append(PublishedRow(**fields))
    return tuple(rows)


PUBLISHED: tuple[PublishedRow, ...] = load_published()
