"""Versioned task suites of the leaderboard, and the fingerprint that ties a suite to the cost model.

A suite version pins the tasks *and* the numbers the cost model gives them. Per task it freezes:

* ``graph_sha256``: the sha256 of the graph's ONNX file;
* ``cluster_sha256``: a digest of every figure of the cluster (per device: name, kind, peak FLOP/s,
  memory bandwidth, memory capacity, launch overhead, efficiency per op category; per link: bandwidth
  and latency), compared exactly, since they are literal inputs;
* ``structure_sha256``: a digest of the compiled task (`Task`): op names and kinds, every tensor with
  its bytes and its producer and consumers, the saved activations of training, static memory per op.
  These are all integer-valued, so they are compared exactly too;
* ``single_device_runtimes``: the runtime of every single-device placement (one device runs every op
  in turn, so each is the sum of the op durations on that device: op FLOPs and bytes, peak FLOP/s,
  efficiency, memory bandwidth, launch overhead), ``best_single_runtime`` and ``lower_bound``;
* ``probes``: the runtime and the peak memory of every device for three fixed placements that cross
  devices (`PROBES`): they move with link latency and bandwidth, the scheduling rules and the memory
  accounting of activations and received copies.

Op durations are real numbers: they enter only through runtimes, compared with a relative tolerance
(`FINGERPRINT_RTOL`), so that a refactor that moves a duration by a rounding error does not void the
suite (submissions are re-checked with a looser tolerance still, see `validate`).

When the current code no longer reproduces a suite, `check_suite` says where, `suite_mismatch` says it
in one line and `require_suite` raises `SuiteMismatchError`: `validate` then stops instead of blaming
every submission. To bump the suite, add ``v1`` here with the numbers of `measure_suite_task` (the text
of `format_suite_task`), and keep ``v0`` so that old submissions stay readable and are shown with their
version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass

import numpy as np

from placement_gym.cost_model import lower_bound, simulate, single_device
from placement_gym.named_tasks import parse_task_id
from placement_gym.task import Task
from placement_gym.task_cache import TaskCache

CURRENT_SUITE = "v1"
# Relative tolerance on runtimes and peak memory: the simulator is deterministic bit for bit, so
# anything beyond rounding noise means the cost model changed.
FINGERPRINT_RTOL = 1e-9
# Hex digits kept of each sha256 digest: 64 bits tell any change apart and keep the frozen data short.
DIGEST_CHARS = 16
PROBES: tuple[str, ...] = ("round-robin", "scattered", "contiguous")
# Not part of the cost model, so left out of the digests: renaming or redescribing a cluster is no change.
_CLUSTER_UNCOSTED = ("name", "description")
# The task's graph and cluster have digests of their own; ``duration`` is compared through runtimes;
# private fields (caches, counters) are bookkeeping, not part of the problem.
_TASK_UNDIGESTED = ("graph", "cluster", "id", "duration")


@dataclass(frozen=True)
class Probe:
    """One probe placement's frozen result: runtime (s) and peak memory per device (bytes)."""

    name: str
    runtime: float
    peak_memory: tuple[int, ...]


@dataclass(frozen=True)
class SuiteTask:
    """One task of a suite and its fingerprint under the cost model the suite was frozen with."""

    task_id: str
    graph_sha256: str
    best_single_runtime: float
    lower_bound: float
    single_device_runtimes: tuple[float, ...]
    probes: tuple[Probe, ...]
    cluster_sha256: str
    structure_sha256: str

    def task(self) -> Task:
        """The compiled task (cached by `placement_gym.named_tasks`)."""
        return parse_task_id(self.task_id)


@dataclass(frozen=True)
class Suite:
    """A named, versioned list of tasks."""

    version: str
    tasks: tuple[SuiteTask, ...]
    description: str = ""

    @property
    def task_ids(self) -> tuple[str, ...]:
        return tuple(t.task_id for t in self.tasks)

    def get(self, task_id: str) -> SuiteTask:
        """The suite task of ``task_id``, or a ValueError naming the suite's tasks."""
        for suite_task in self.tasks:
            if suite_task.task_id == task_id:
                return suite_task
        raise ValueError(
            f"task {task_id!r} is not in suite {self.version}; its tasks are: {', '.join(self.task_ids)}"
        )

    def subset(self, task_ids: list[str] | tuple[str, ...]) -> Suite:
        """The same suite version restricted to ``task_ids`` (for quick runs and tests)."""
        return Suite(self.version, tuple(self.get(t) for t in task_ids), self.description)


class SuiteMismatchError(RuntimeError):
    """The current cost model (or a graph) no longer reproduces a suite's fingerprint: no submission of
    that suite can be checked until the suite version is bumped."""


# --- measuring a fingerprint ------------------------------------------------------------------------------

def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64 of each value: a fixed pseudo-random spread that, unlike numpy's generators, is
    defined here and cannot change with a numpy release (uint64 arithmetic wraps, as intended)."""
    x = values.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def probe_placements(task: Task) -> dict[str, np.ndarray]:
    """The probe placements of `PROBES`, over every device of the cluster: ``round-robin`` (op ``i``
    on device ``i mod n``, by topological index), ``scattered`` (a fixed pseudo-random device per op)
    and ``contiguous`` (the topological order cut into ``n`` equal blocks, as a pipeline would)."""
    n_ops, n_devices = task.n_forward, task.n_devices
    index = np.arange(n_ops, dtype=np.int64)
    return {
        "round-robin": index % n_devices,
        "scattered": (splitmix64(index) % np.uint64(n_devices)).astype(np.int64),
        "contiguous": index * n_devices // n_ops,
    }


def _digest(items: list[tuple[str, object]]) -> str:
    """A short sha256 of named values; arrays in a canonical dtype, so that storing an array as int32
    instead of int64 (or float32 bytes as float64) is not taken for a change of the cost model."""
    digest = hashlib.sha256()
    for name, value in items:
        if isinstance(value, np.ndarray):
            array = np.ascontiguousarray(value, dtype="<f8" if value.dtype.kind == "f" else "<i8")
            digest.update(f"{name} {array.shape}\n".encode())
            digest.update(array.tobytes())
        else:
            digest.update(f"{name} {json.dumps(value)}\n".encode())
    return digest.hexdigest()[:DIGEST_CHARS]


def cluster_digest(task: Task) -> str:
    """Digest of every field of the task's cluster but its name and description (every figure)."""
    cluster = task.cluster
    return _digest([(f.name, getattr(cluster, f.name)) for f in dataclasses.fields(cluster)
                    if f.name not in _CLUSTER_UNCOSTED])


def structure_digest(task: Task) -> str:
    """Digest of the compiled task but its op durations: op names, objective, optimizer and every
    op and tensor array (kinds, producers, consumers, bytes, persistence, static memory)."""
    items: list[tuple[str, object]] = [("op_names", task.graph.op_names)]
    items += [(f.name, getattr(task, f.name)) for f in dataclasses.fields(task)
              if f.name not in _TASK_UNDIGESTED and not f.name.startswith("_")]
    return _digest(items)


def measure_suite_task(task: Task) -> SuiteTask:
    """The fingerprint of ``task`` under the current code (measured once per task)."""
    return _FINGERPRINTS.get(task, _measure)


def _measure(task: Task) -> SuiteTask:
    single = single_device(task)
    probes = []
    for name, placement in probe_placements(task).items():
        result = simulate(task, placement)
        peaks = tuple(int(round(p)) for p in result.peak_memory)  # whole bytes: sums of tensor sizes
        probes.append(Probe(name, float(result.runtime), peaks))
    return SuiteTask(
        task.id, task.graph.sha256, single.runtime, lower_bound(task),
        tuple(float(r) for r in single.runtimes), tuple(probes),
        cluster_digest(task), structure_digest(task),
    )


# Validation checks every task of a suite against its frozen figures, for each submission.
_FINGERPRINTS: TaskCache[SuiteTask] = TaskCache("suite_fingerprint")


def _wrapped(values: tuple, indent: int, width: int = 108) -> str:
    """``values`` as a Python tuple, wrapped to ``width`` columns with continuation lines at ``indent``."""
    items = [repr(v) + "," for v in values]
    lines, line, offset = [], "(", indent  # the first line starts at ``indent``; the others hold it
    for item in items:
        if offset + len(line) + len(item) > width and line.strip() != "(":
            lines.append(line.rstrip())
            line, offset = " " * (indent + 1), 0
        line += item + " "
    lines.append(line.rstrip().removesuffix(",") + ("," if len(values) == 1 else "") + ")")
    return "\n".join(lines)


def format_suite_task(suite_task: SuiteTask) -> str:
    """The Python text of ``suite_task`` as this module writes it, to paste into a new suite version."""
    def text(value: str) -> str:
        return json.dumps(value)  # double quotes, as the rest of the code

    singles = "        single_device_runtimes="
    lines = [
        "    SuiteTask(",
        f"        {text(suite_task.task_id)},",
        f"        graph_sha256={text(suite_task.graph_sha256)},",
        f"        best_single_runtime={suite_task.best_single_runtime!r}, "
        f"lower_bound={suite_task.lower_bound!r},",
        singles + _wrapped(suite_task.single_device_runtimes, len(singles)) + ",",
        "        probes=(",
    ]
    for probe in suite_task.probes:
        head = f"            Probe({text(probe.name)}, {probe.runtime!r}, "
        if len(head) + len(_wrapped(probe.peak_memory, 0, width=10**6)) + 2 <= 108:
            lines.append(head + _wrapped(probe.peak_memory, len(head)) + "),")
        else:
            lines.append(head.rstrip())
            indent = "                  "
            lines.append(indent + _wrapped(probe.peak_memory, len(indent)) + "),")
    lines += [
        "        ),",
        f"        cluster_sha256={text(suite_task.cluster_sha256)}, "
        f"structure_sha256={text(suite_task.structure_sha256)},",
        "    ),",
    ]
    return "\n".join(lines)


# Frozen with placement-gym 0.1.0 by `measure_suite_task`, written by `format_suite_task`.
SUITE_V0 = Suite(
    "v0",
    (
    SuiteTask(
        "cifar10_cnn/k80x2/train",
        graph_sha256="d5d1bd2af15e68bdb28bb8f7677597827f94b9dbc8d70eb8853e3b8e965d0abe",
        best_single_runtime=0.015239508086705895, lower_bound=0.015012359186705895,
        single_device_runtimes=(0.12992145293048127, 0.015239508086705895, 0.015239508086705895),
        probes=(
            Probe("round-robin", 0.1578918462572202, (173293568, 235935744, 165711008)),
            Probe("scattered", 0.13756767841577966, (145300480, 204160000, 169905312)),
            Probe("contiguous", 0.041348167446201435, (162082816, 128517120, 93499552)),
        ),
        cluster_sha256="de111543d12a2932", structure_sha256="7bce9de0ece54156",
    ),
    SuiteTask(
        "cifar10_resnet56/k80x2/train",
        graph_sha256="0b91b5cc48e35569d97293957f7183670baec81a39686273c8c6e046eba49f69",
        best_single_runtime=0.05874688501052609, lower_bound=0.057597644910526186,
        single_device_runtimes=(0.4980108994010689, 0.05874688501052609, 0.05874688501052609),
        probes=(
            Probe("round-robin", 0.367390811594608, (650838784, 653757440, 654820512)),
            Probe("scattered", 0.3396362171323124, (605015040, 600450976, 493903872)),
            Probe("contiguous", 0.22558125031084636, (581150464, 298541056, 153767072)),
        ),
        cluster_sha256="de111543d12a2932", structure_sha256="af89c74f065dddaa",
    ),
    SuiteTask(
        "inception_v3/k80x4/train",
        graph_sha256="455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
        best_single_runtime=0.5036280490711783, lower_bound=0.33353868511480894,
        single_device_runtimes=(5.157690176224594, 0.5036280490711783, 0.5036280490711783,
                                0.5036280490711783, 0.5036280490711783),
        probes=(
            Probe("round-robin", 1.5218461645375267,
                  (1776849792, 1861963776, 1777835008, 1897851520, 1778082816)),
            Probe("scattered", 1.8569719662464392,
                  (1760887680, 1497140864, 1751300096, 1953047552, 842848256)),
            Probe("contiguous", 2.1521158475479996,
                  (2341365632, 785994752, 620537856, 664098816, 476353152)),
        ),
        cluster_sha256="9cf444777947b5a4", structure_sha256="c2c459b75be5823c",
    ),
    SuiteTask(
        "resnet50/p100x4/train",
        graph_sha256="8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
        best_single_runtime=0.1752875242089699, lower_bound=0.1596578470079123,
        single_device_runtimes=(1.828403366622336, 0.1752875242089699, 0.1752875242089699,
                                0.1752875242089699, 0.1752875242089699),
        probes=(
            Probe("round-robin", 1.220273669350365,
                  (2179963904, 2250772480, 1944576000, 2264027136, 2243007104)),
            Probe("scattered", 1.089645281591635,
                  (2224950272, 2054848512, 1140690944, 2530157184, 1348546560)),
            Probe("contiguous", 0.5951051346675428,
                  (2463480832, 1441980416, 849289216, 700284928, 590623360)),
        ),
        cluster_sha256="657eb58018d79ac0", structure_sha256="ecd20f18c67c90fc",
    ),
    SuiteTask(
        "rnnlm/k80x4/train",
        graph_sha256="745b935829c0c6faf5cadfc0cc8b96accc2d9697f9388910acaf543beab0bb90",
        best_single_runtime=0.42012868935919023, lower_bound=0.0840257378718361,
        single_device_runtimes=(4.1791830689625895, 0.42012868935919023, 0.42012868935919023,
                                0.42012868935919023, 0.42012868935919023),
        probes=(
            Probe("round-robin", 1.2397863735449983,
                  (3175262208, 1629159424, 8144795136, 1768587264, 1770749952)),
            Probe("scattered", 1.3460518044892043,
                  (3035949056, 1165730304, 1856864256, 8563553792, 1387598592)),
            Probe("contiguous", 0.8725102493085873,
                  (13318229760, 2085008640, 1760314368, 1756120064, 2187891456)),
        ),
        cluster_sha256="9cf444777947b5a4", structure_sha256="d8cfcbdc5338d90b",
    ),
    SuiteTask(
        "gnmt4/k80x4/train",
        graph_sha256="bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
        best_single_runtime=0.6933893253217762, lower_bound=0.13867786506434782,
        single_device_runtimes=(6.5627985249622975, 0.6933893253217762, 0.6933893253217762,
                                0.6933893253217762, 0.6933893253217762),
        probes=(
            Probe("round-robin", 1.6182290173226648,
                  (2444023808, 2098677760, 4661437440, 2642839552, 3094401024)),
            Probe("scattered", 1.4230100651272406,
                  (2418001920, 1721769984, 1813999616, 4692559872, 2979840000)),
            Probe("contiguous", 1.3005935263570527,
                  (3617394688, 709050368, 5161034752, 1495707648, 1496856576)),
        ),
        cluster_sha256="9cf444777947b5a4", structure_sha256="37fafb876763b728",
    ),
    SuiteTask(
        "gnmt4/k40x8/train",
        graph_sha256="bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
        best_single_runtime=0.6884912758088558, lower_bound=0.08263625890423451,
        single_device_runtimes=(2.9959040267281574, 0.6884912758088558, 0.6884912758088558,
                                0.6884912758088558, 0.6884912758088558, 0.6884912758088558,
                                0.6884912758088558, 0.6884912758088558, 0.6884912758088558),
        probes=(
            Probe("round-robin", 0.5461094682142075,
                  (1748459520, 1292892160, 1185904640, 1498320896, 1455476736, 1312831488, 1264580608,
                   1219989504, 4568299520)),
            Probe("scattered", 0.5872960651896807,
                  (2494529536, 981288960, 1366347776, 1421303808, 4002582528, 1194024960, 1454820352,
                   2060417024, 1254303744)),
            Probe("contiguous", 0.5980391784260938,
                  (3556544512, 456228864, 459390976, 683737088, 4747537408, 1040505856, 1166987264,
                   1040505856, 1180749824)),
        ),
        cluster_sha256="6a3b0c75760dbab2", structure_sha256="37fafb876763b728",
    ),
    SuiteTask(
        "bert_base/v100x8/train",
        graph_sha256="29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
        best_single_runtime=0.11948874690368291, lower_bound=0.09622465739858088,
        single_device_runtimes=(0.8769442520287571, 0.11948874690368291, 0.11948874690368291,
                                0.11948874690368291, 0.11948874690368291, 0.11948874690368291,
                                0.11948874690368291, 0.11948874690368291, 0.11948874690368291),
        probes=(
            Probe("round-robin", 0.39122165443414364,
                  (1212178432, 824770560, 1088962560, 793046016, 799214592, 1069719552, 799309824,
                   796065792, 1075998720)),
            Probe("scattered", 0.39772896570197624,
                  (900025344, 805478400, 824328192, 956547072, 1101769728, 849874944, 906178560, 1023348736,
                   714227712)),
            Probe("contiguous", 0.2006487472190427,
                  (860130304, 512937984, 638840832, 497233920, 509779968, 626282496, 497221632, 506658816,
                   601141248)),
        ),
        cluster_sha256="ee1670e629e4964a", structure_sha256="c7bf5c2eed566841",
    ),
    SuiteTask(
        "bert_large/k80x4/train",
        graph_sha256="785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
        best_single_runtime=59.53817515856746, lower_bound=5.004533816512566,
        single_device_runtimes=(59.53817515856746, 5.9538632497663855, 5.9538632497663855,
                                5.9538632497663855, 5.9538632497663855),
        probes=(
            Probe("round-robin", 21.097263570217972,
                  (20970733568, 26049511424, 21192507392, 9765572608, 13052743680)),
            Probe("scattered", 21.54206554465625,
                  (21517058048, 16945758208, 17499815936, 15804911616, 13892714496)),
            Probe("contiguous", 15.812681035134402,
                  (10242379776, 10419716096, 9731850240, 10017046528, 9916448768)),
        ),
        cluster_sha256="9cf444777947b5a4", structure_sha256="e03ce52ebcf385b8",
    ),
    SuiteTask(
        "bert_large/h100x8/train",
        graph_sha256="785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
        best_single_runtime=0.40234369998737657, lower_bound=0.3354107819442205,
        single_device_runtimes=(2.5219276477507417, 0.40234369998737657, 0.40234369998737657,
                                0.40234369998737657, 0.40234369998737657, 0.40234369998737657,
                                0.40234369998737657, 0.40234369998737657, 0.40234369998737657),
        probes=(
            Probe("round-robin", 0.9606675575474256,
                  (11808833536, 9808904192, 10572136448, 11073785856, 9697759232, 10469408768, 11107303424,
                   9647423488, 10502946816)),
            Probe("scattered", 0.9756781324002756,
                  (9362378752, 11643879424, 8389230592, 9932718080, 10270494720, 12174557184, 9194586112,
                   8318861312, 9160671232)),
            Probe("contiguous", 0.6154442061230365,
                  (6265753600, 5587435520, 5939707904, 5755092992, 5369331712, 5906186240, 5654413312,
                   5285445632, 5805588480)),
        ),
        cluster_sha256="9e82b72a3d428748", structure_sha256="e03ce52ebcf385b8",
    ),
    SuiteTask(
        "inception_v3/cpu-igpu/inference",
        graph_sha256="455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
        best_single_runtime=0.7578114758379128, lower_bound=0.5043516584752745,
        single_device_runtimes=(0.7578114758379128, 0.792504813569626),
        probes=(
            Probe("round-robin", 0.7083372632993395, (409520672, 394039040)),
            Probe("scattered", 0.7053964349132812, (411949728, 391609984)),
            Probe("contiguous", 0.765048076501139, (373163392, 154481568)),
        ),
        cluster_sha256="64e777c58af64532", structure_sha256="9d1b9cc2fe611323",
    ),
    SuiteTask(
        "resnet50/cpu-igpu/inference",
        graph_sha256="8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
        best_single_runtime=0.576883518365384, lower_bound=0.5293078788049446,
        single_device_runtimes=(0.576883518365384, 0.6017184654599564),
        probes=(
            Probe("round-robin", 0.6789694055981518, (365088416, 276844544)),
            Probe("scattered", 0.6223867038504554, (341427200, 377576096)),
            Probe("contiguous", 0.5890267764778274, (320171776, 167620512)),
        ),
        cluster_sha256="64e777c58af64532", structure_sha256="127dde440310a513",
    ),
    SuiteTask(
        "bert_base/cpu-igpu/inference",
        graph_sha256="29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
        best_single_runtime=0.5837303373351651, lower_bound=0.4875551434821423,
        single_device_runtimes=(0.5837303373351651, 0.6511737802922086),
        probes=(
            Probe("round-robin", 0.621405530495132, (292279296, 252604416)),
            Probe("scattered", 0.6028039853415347, (224412672, 326762496)),
            Probe("contiguous", 0.6175992730794214, (322074624, 229100544)),
        ),
        cluster_sha256="64e777c58af64532", structure_sha256="305bc5ce88d02803",
    ),
    ),
    "The paper settings (Mirhoseini 2017/2018, Spotlight, Placeto, Baechi, HSDAG) plus modern "
    "clusters (V100, H100) and CPU + integrated GPU inference.",
)

# Frozen with the calibrated cost model (docs/calibration.md: per-architecture efficiency, host
# dispatch, transfer synchronisation, shared segments, training-mode BatchNorm): v0's tasks, new numbers.
SUITE_V1 = Suite(
    "v1",
    (
    SuiteTask(
        "cifar10_cnn/k80x2/train",
        graph_sha256="d5d1bd2af15e68bdb28bb8f7677597827f94b9dbc8d70eb8853e3b8e965d0abe",
        best_single_runtime=0.025629368982121987, lower_bound=0.025328403782121985,
        single_device_runtimes=(0.12992715293048127, 0.025629368982121987, 0.025629368982121987),
        probes=(
            Probe("round-robin", 0.16510846473725718, (173293568, 235935744, 165711008)),
            Probe("scattered", 0.1438691562866126, (145300480, 204160000, 169905312)),
            Probe("contiguous", 0.04994334548210823, (162082816, 128517120, 93499552)),
        ),
        cluster_sha256="9d58b13f5c7795b7", structure_sha256="7bce9de0ece54156",
    ),
    SuiteTask(
        "cifar10_resnet56/k80x2/train",
        graph_sha256="0b91b5cc48e35569d97293957f7183670baec81a39686273c8c6e046eba49f69",
        best_single_runtime=0.10181315629473661, lower_bound=0.10050693616140327,
        single_device_runtimes=(0.5100443829304799, 0.10181315629473661, 0.10181315629473661),
        probes=(
            Probe("round-robin", 0.4352150707435673, (650838784, 653757440, 654820512)),
            Probe("scattered", 0.398048846852562, (605015040, 600450976, 493903872)),
            Probe("contiguous", 0.25832954884584775, (581150464, 298541056, 153767072)),
        ),
        cluster_sha256="9d58b13f5c7795b7", structure_sha256="af89c74f065dddaa",
    ),
    SuiteTask(
        "inception_v3/k80x4/train",
        graph_sha256="455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
        best_single_runtime=0.9155720402114561, lower_bound=0.6080093933210418,
        single_device_runtimes=(5.208335808459888, 0.9155720402114561, 0.9155720402114561,
                                0.9155720402114561, 0.9155720402114561),
        probes=(
            Probe("round-robin", 1.8123516965846658,
                  (1776849792, 1861963776, 1777835008, 1898375808, 1781228544)),
            Probe("scattered", 2.103540797184122,
                  (1760887680, 1497140864, 1751300096, 1953047552, 842848256)),
            Probe("contiguous", 2.432784490359993,
                  (2341365632, 776524800, 614619136, 664098816, 476353152)),
        ),
        cluster_sha256="b96ca596d44e3130", structure_sha256="c2c459b75be5823c",
    ),
    SuiteTask(
        "resnet50/p100x4/train",
        graph_sha256="8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
        best_single_runtime=0.19057847313246717, lower_bound=0.17331632072922348,
        single_device_runtimes=(1.8911703880341024, 0.19057847313246717, 0.19057847313246717,
                                0.19057847313246717, 0.19057847313246717),
        probes=(
            Probe("round-robin", 1.3184690110979729,
                  (2179963904, 2250772480, 1944576000, 2264027136, 2243007104)),
            Probe("scattered", 1.1850645422525117,
                  (2224950272, 2054848512, 1140690944, 2530157184, 1348546560)),
            Probe("contiguous", 0.6342834592927431,
                  (2463480832, 1441980416, 849289216, 700284928, 590623360)),
        ),
        cluster_sha256="01158ca88aa6976c", structure_sha256="ecd20f18c67c90fc",
    ),
    SuiteTask(
        "rnnlm/k80x4/train",
        graph_sha256="745b935829c0c6faf5cadfc0cc8b96accc2d9697f9388910acaf543beab0bb90",
        best_single_runtime=0.9896032620868475, lower_bound=0.19791951241736805,
        single_device_runtimes=(4.1791887689625895, 0.9896032620868475, 0.9896032620868475,
                                0.9896032620868475, 0.9896032620868475),
        probes=(
            Probe("round-robin", 2.2121213239515525,
                  (3106056192, 1629159424, 8078370560, 1763868672, 1774944256)),
            Probe("scattered", 2.234685053468108,
                  (3093686272, 1181458944, 1669038080, 8369170176, 1130291712)),
            Probe("contiguous", 1.4291331970654444,
                  (10466496256, 1429328640, 1432474368, 1428280064, 1437995776)),
        ),
        cluster_sha256="b96ca596d44e3130", structure_sha256="d8cfcbdc5338d90b",
    ),
    SuiteTask(
        "gnmt4/k80x4/train",
        graph_sha256="bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
        best_single_runtime=1.5812513990377464, lower_bound=0.3162491398075362,
        single_device_runtimes=(6.5628042249622975, 1.5812513990377464, 1.5812513990377464,
                                1.5812513990377464, 1.5812513990377464),
        probes=(
            Probe("round-robin", 2.699744414851613,
                  (2435110912, 2098153472, 4658547712, 2669611008, 3109621760)),
            Probe("scattered", 2.410810298475687,
                  (2412759040, 1680351232, 1812951040, 4692687872, 3015550976)),
            Probe("contiguous", 1.8403760080092042,
                  (3547615232, 684277760, 5211382784, 1364507648, 1365656576)),
        ),
        cluster_sha256="b96ca596d44e3130", structure_sha256="37fafb876763b728",
    ),
    SuiteTask(
        "gnmt4/k40x8/train",
        graph_sha256="bac829f641fab0c293e95cc478ee3a42d088515c28f3b483e262be95b3f152c5",
        best_single_runtime=1.5871470942998709, lower_bound=0.18527912445040126,
        single_device_runtimes=(2.9959097267281574, 1.5871470942998709, 1.5871470942998709,
                                1.5871470942998709, 1.5871470942998709, 1.5871470942998709,
                                1.5871470942998709, 1.5871470942998709, 1.5871470942998709),
        probes=(
            Probe("round-robin", 1.8535820879720408,
                  (1737449472, 1284503552, 1181710336, 1472624640, 1455476736, 1313880064, 1260386304,
                   1219989504, 4533808128)),
            Probe("scattered", 1.841560115295832,
                  (2397999104, 981288960, 1293955072, 1402413056, 3970338816, 1158897664, 1438046208,
                   2063224832, 1246439424)),
            Probe("contiguous", 1.2490257451730415,
                  (2993721344, 496107520, 455688192, 683737088, 4972576768, 1040505856, 1035787264,
                   1040505856, 1049549824)),
        ),
        cluster_sha256="559bcae67b1f44ad", structure_sha256="37fafb876763b728",
    ),
    SuiteTask(
        "bert_base/v100x8/train",
        graph_sha256="29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
        best_single_runtime=0.12366318085034962, lower_bound=0.09909431333858086,
        single_device_runtimes=(0.8769499520287571, 0.12366318085034962, 0.12366318085034962,
                                0.12366318085034962, 0.12366318085034962, 0.12366318085034962,
                                0.12366318085034962, 0.12366318085034962, 0.12366318085034962),
        probes=(
            Probe("round-robin", 0.4768663296201541,
                  (1212178432, 824770560, 1088962560, 793046016, 799214592, 1069719552, 799309824,
                   796065792, 1075998720)),
            Probe("scattered", 0.47566964413507634,
                  (900025344, 805478400, 824328192, 956547072, 1101769728, 849874944, 906178560, 1023348736,
                   714227712)),
            Probe("contiguous", 0.2081852063612646,
                  (860130304, 512937984, 638840832, 497233920, 509779968, 626282496, 497221632, 506658816,
                   601141248)),
        ),
        cluster_sha256="edb12aafa7d8d090", structure_sha256="c7bf5c2eed566841",
    ),
    SuiteTask(
        "bert_large/k80x4/train",
        graph_sha256="785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
        best_single_runtime=59.538180858567465, lower_bound=11.860117070704726,
        single_device_runtimes=(59.538180858567465, 14.067935891433743, 14.067935891433743,
                                14.067935891433743, 14.067935891433743),
        probes=(
            Probe("round-robin", 26.967210118940354,
                  (20970733568, 26049511424, 21192507392, 9765572608, 13052743680)),
            Probe("scattered", 27.594121444689925,
                  (21517058048, 16945758208, 17499815936, 15804911616, 13892714496)),
            Probe("contiguous", 22.40784273798593,
                  (10242379776, 10419716096, 9731850240, 10017046528, 9916448768)),
        ),
        cluster_sha256="b96ca596d44e3130", structure_sha256="e03ce52ebcf385b8",
    ),
    SuiteTask(
        "bert_large/h100x8/train",
        graph_sha256="785616397ee62a40fd4a0697bc381e3200cf06d9636c49bc2c46e1bcf002e165",
        best_single_runtime=0.41465128331991336, lower_bound=0.3452737671758627,
        single_device_runtimes=(2.5219333477507417, 0.41465128331991336, 0.41465128331991336,
                                0.41465128331991336, 0.41465128331991336, 0.41465128331991336,
                                0.41465128331991336, 0.41465128331991336, 0.41465128331991336),
        probes=(
            Probe("round-robin", 1.117664883004606,
                  (11808833536, 9808904192, 10572136448, 11073785856, 9697759232, 10469408768, 11107303424,
                   9647423488, 10502946816)),
            Probe("scattered", 1.11301820010977,
                  (9362378752, 11643879424, 8389230592, 9932718080, 10270494720, 12174557184, 9194586112,
                   8318861312, 9160671232)),
            Probe("contiguous", 0.6307373019446945,
                  (6265753600, 5587435520, 5939707904, 5755092992, 5369331712, 5906186240, 5654413312,
                   5285445632, 5805588480)),
        ),
        cluster_sha256="aeb87f22d5b70c42", structure_sha256="e03ce52ebcf385b8",
    ),
    SuiteTask(
        "inception_v3/cpu-igpu/inference",
        graph_sha256="455dc8e7c1ac4b1535f9d0a3797b45acca721cde64f46ca517517d4885e41075",
        best_single_runtime=0.7578114758379128, lower_bound=0.5043516584752745,
        single_device_runtimes=(0.7578114758379128, 0.8098584964714131),
        probes=(
            Probe("round-robin", 0.7198185709389221, (409520672, 394039040)),
            Probe("scattered", 0.7130786205073746, (411949728, 391609984)),
            Probe("contiguous", 0.7689626765457829, (373163392, 154481568)),
        ),
        cluster_sha256="2b2d95d8795161d9", structure_sha256="9d1b9cc2fe611323",
    ),
    SuiteTask(
        "resnet50/cpu-igpu/inference",
        graph_sha256="8a6bc8726f0576336ce05b749566c12ad0cc59593eca19db7484b4335f496ea8",
        best_single_runtime=0.576883518365384, lower_bound=0.5293078788049446,
        single_device_runtimes=(0.576883518365384, 0.6228301426474568),
        probes=(
            Probe("round-robin", 0.6974858998838656, (365088416, 276844544)),
            Probe("scattered", 0.6331098239348154, (341427200, 377576096)),
            Probe("contiguous", 0.5937950736653278, (320171776, 167620512)),
        ),
        cluster_sha256="2b2d95d8795161d9", structure_sha256="127dde440310a513",
    ),
    SuiteTask(
        "bert_base/cpu-igpu/inference",
        graph_sha256="29e1a2ff39d7bc1ae4c7a802cf89468edef248bc754d7ad2999a729429745b0b",
        best_single_runtime=0.5837303373351651, lower_bound=0.4875551434821423,
        single_device_runtimes=(0.5837303373351651, 0.6622760065340908),
        probes=(
            Probe("round-robin", 0.6314986130763016, (292279296, 252604416)),
            Probe("scattered", 0.6087995965803742, (224412672, 326762496)),
            Probe("contiguous", 0.6231152048570182, (322074624, 229100544)),
        ),
        cluster_sha256="2b2d95d8795161d9", structure_sha256="305bc5ce88d02803",
    ),
    ),
    "Suite v0's tasks under the calibrated cost model (docs/calibration.md).",
)

SUITES: dict[str, Suite] = {SUITE_V0.version: SUITE_V0, SUITE_V1.version: SUITE_V1}
# Suites whose cost model this code no longer reproduces, and where their submissions are kept.
RETIRED_SUITES: dict[str, str] = {
    "v0": "it was made with the uncalibrated cost model (no host dispatch, transfer synchronisation, shared "
    "segments, per-architecture efficiency or training-mode BatchNorm; docs/calibration.md). Its submissions "
    "are kept in `retired/v0/`; `git checkout 217c35b` gives the code that validates them.",
}


def get_suite(version: str | Suite = CURRENT_SUITE) -> Suite:
    """A suite by version (or the suite itself), with a clear error naming the known versions."""
    if isinstance(version, Suite):
        return version
    if version not in SUITES:
        raise ValueError(f"unknown suite version {version!r}; known: {', '.join(SUITES)}")
    return SUITES[version]


# --- checking a fingerprint -------------------------------------------------------------------------------

def _differs(value: float, frozen: float) -> bool:
    return not math.isclose(value, frozen, rel_tol=FINGERPRINT_RTOL, abs_tol=0.0)


def fingerprint_problems(suite_task: SuiteTask, task: Task | None = None) -> list[str]:
    """Why the current code no longer reproduces ``suite_task``'s fingerprint (empty list: it does).
    ``task``: the compiled task to measure (default: ``suite_task.task()``)."""
    task = suite_task.task() if task is None else task
    now = measure_suite_task(task)
    problems = []
    if now.graph_sha256 != suite_task.graph_sha256:
        problems.append(f"graph sha256 is {now.graph_sha256[:12]}..., "
                        f"suite froze {suite_task.graph_sha256[:12]}...")
    if now.cluster_sha256 != suite_task.cluster_sha256:
        problems.append(f"cluster figures changed (digest {now.cluster_sha256}, suite froze "
                        f"{suite_task.cluster_sha256})")
    if now.structure_sha256 != suite_task.structure_sha256:
        problems.append(f"compiled task changed: ops, tensors, their bytes or static memory (digest "
                        f"{now.structure_sha256}, suite froze {suite_task.structure_sha256})")
    devices = task.cluster.device_names
    if len(now.single_device_runtimes) != len(suite_task.single_device_runtimes):
        problems.append(f"{len(devices)} devices, suite froze {len(suite_task.single_device_runtimes)}")
        return problems
    for device, value, frozen in zip(devices, now.single_device_runtimes, suite_task.single_device_runtimes):
        if _differs(value, frozen):
            problems.append(f"runtime with every op on {device} is {value!r} s, suite froze {frozen!r} s")
    for name in ("best_single_runtime", "lower_bound"):
        value, frozen = getattr(now, name), getattr(suite_task, name)
        if _differs(value, frozen):
            problems.append(f"{name.replace('_', ' ')} is {value!r} s, suite froze {frozen!r} s")
    measured = {probe.name: probe for probe in now.probes}
    for probe in suite_task.probes:
        current = measured.get(probe.name)
        if current is None:
            problems.append(f"probe placement {probe.name!r} is unknown to this code")
            continue
        if _differs(current.runtime, probe.runtime):
            problems.append(f"{probe.name} probe runtime is {current.runtime!r} s, "
                            f"suite froze {probe.runtime!r} s")
        for device, value, frozen in zip(devices, current.peak_memory, probe.peak_memory):
            if _differs(value, frozen):
                problems.append(f"{probe.name} probe peak memory on {device} is {value} bytes, "
                                f"suite froze {frozen} bytes")
    return problems


def check_suite(version: str | Suite = CURRENT_SUITE) -> dict[str, list[str]]:
    """Per task id, the fingerprint problems of a suite under the current code (only tasks with any).
    A non-empty answer for the current suite means: bump the suite version."""
    suite = get_suite(version)
    return {t.task_id: p for t in suite.tasks if (p := fingerprint_problems(t))}


def suite_mismatch(version: str | Suite = CURRENT_SUITE) -> str | None:
    """One line saying that the current cost model does not reproduce suite ``version`` (with the first
    difference found), or None when it does."""
    suite = get_suite(version)
    problems = check_suite(suite)
    if not problems:
        return None
    task_id, task_problems = next(iter(problems.items()))
    more = len(task_problems) - 1
    return (f"suite {suite.version} does not match this cost model: {len(problems)} of {len(suite.tasks)} "
            f"tasks differ (first, {task_id}: {task_problems[0]}"
            f"{f'; and {more} more' if more else ''}); the cost model or a graph changed, so bump the "
            "suite (add a new version in placement_gym/leaderboard/suite.py)")


def require_suite(version: str | Suite = CURRENT_SUITE) -> None:
    """Raise `SuiteMismatchError` when the current cost model does not reproduce suite ``version``."""
    message = suite_mismatch(version)
    if message is not None:
        raise SuiteMismatchError(message)
