"""``plans-v1``: a named, versioned dataset of plan-finding problems (`PlanTask`: a model, a DGX mesh,
a global batch), made deterministically from the tables below, with fixed splits that hold out model
sizes and a whole family, as the graph datasets do (docs/datasets.md, "Plan problems: plans-v1").

- Models: GPT at the sizes of Narayanan et al. 2021's Table 1 (1.7B to 1T; sequence 2,048, vocabulary
  51,200), Llama (Llama 3.2 1B and 3B, Llama 2 7B, 13B and 70B, Llama 3 8B, Code Llama 34B, Llama 3
  405B; their model cards' sizes) and Mixtral-style mixtures (8x7B and 8x22B, Mistral's model cards, and
  a small 8x1B of the same shape).
- Meshes: DGX H100 of 1 to 1,024 nodes and DGX A100 of 1 to 128 (`placement_gym.plans.mesh`), and mixed
  meshes of equal halves, DGX A100 nodes then DGX H100 nodes, of 2 to 64 nodes in all
  (``dgx-a100x4+dgx-h100x4``).
- Global batches: a quarter of, equal to and four times the mesh's GPUs in sequences (16 to 16,384).
- A problem is kept when a plan of it can hold its weights and optimizer state at all (16 bytes a
  weight sharded over every GPU, ZeRO-3, under 60% of a GPU's memory) and some choice of degrees divides
  its sizes (`PlanTask.value_masks`).
- Splits: ``test-families`` every mixture-of-experts problem; ``test-sizes`` the GPT 39B and 310B and
  Llama 13B and 34B problems; the rest ``train`` / ``validation`` / ``test`` by a hash of the problem's id
  (80 / 10 / 10 %).
"""

from __future__ import annotations

import functools
import hashlib
import itertools

from placement_gym.plans.mesh import Mesh, dgx_mesh, mixed_mesh
from placement_gym.plans.models import MODEL_PRESETS, TransformerModel
from placement_gym.plans.space import PlanTask

NAME = "plans-v1"
SPLITS = ("train", "validation", "test", "test-sizes", "test-families")
# The dataset's models, presets of `placement_gym.plans.models` (their sources are there).
MODELS: dict[str, TransformerModel] = {name: MODEL_PRESETS[name] for name in (
    "gpt-1.7b", "gpt-3.6b", "gpt-7.5b", "gpt-18b", "gpt-39b", "gpt-76b", "gpt-145b", "gpt-310b", "gpt-530b",
    "gpt-1t", "llama3-1b", "llama3-3b", "llama2-7b", "llama3-8b", "llama2-13b", "codellama-34b", "llama2-70b",
    "llama3-405b", "mixtral-8x1b", "mixtral-8x7b", "mixtral-8x22b")}
HELD_OUT_SIZES = ("gpt-39b", "gpt-310b", "llama2-13b", "codellama-34b")
MESHES = (("h100", (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)), ("a100", (1, 2, 4, 8, 16, 32, 64, 128)))
# mixed meshes: this many DGX A100 nodes followed by as many DGX H100 nodes
MIXED_HALVES = (1, 2, 4, 8, 16, 32)
# a problem fits when 16 bytes a weight, spread over every GPU, take less than this share of one GPU
STATE_SHARE = 0.6


def _split(task: PlanTask) -> str:
    if task.model.family == "moe":
        return "test-families"
    if task.model.name in HELD_OUT_SIZES:
        return "test-sizes"
    bucket = int(hashlib.sha256(task.id.encode()).hexdigest()[:8], 16) % 10
    return "train" if bucket < 8 else ("validation" if bucket == 8 else "test")


@functools.lru_cache(maxsize=1)
def _problems() -> dict[str, tuple[str, PlanTask]]:
    """Every problem of the dataset by id, with its split."""
    problems: dict[str, tuple[str, PlanTask]] = {}
    for (generation, node_counts), model in itertools.product(MESHES, MODELS.values()):
        for nodes in node_counts:
            _add_problems(problems, model, dgx_mesh(generation, nodes))
    for model in MODELS.values():  # after the others, so that their order stays
        for nodes in MIXED_HALVES:
            _add_problems(problems, model, mixed_mesh(dgx_mesh("a100", nodes), dgx_mesh("h100", nodes)))
    return problems


def _add_problems(problems: dict[str, tuple[str, PlanTask]], model: TransformerModel, mesh: Mesh) -> None:
    """The problems of ``model`` on ``mesh`` that the dataset keeps (module docstring), added by id."""
    if 16.0 * model.parameters() / mesh.gpus > STATE_SHARE * mesh.gpu.memory:
        return
    for share in (4, 1, 0.25):
        batch = int(min(max(mesh.gpus / share, 16), 16384))
        task = PlanTask(model, mesh, batch)
        if task.id in problems or not all(mask.any() for mask in task.value_masks):
            continue
        problems[task.id] = (_split(task), task)


def plan_dataset_ids(split: str | None = None) -> tuple[str, ...]:
    """The ids of ``plans-v1``'s problems (of ``split``, one of `SPLITS`; None: all), in a fixed order."""
    if split is not None and split not in SPLITS:
        raise ValueError(f"unknown split {split!r} of {NAME}; allowed: {', '.join(SPLITS)}")
    return tuple(task_id for task_id, (where, _) in _problems().items() if split in (None, where))


def plan_dataset_task(task_id: str) -> PlanTask:
    """A new `PlanTask` (its own evaluation counter) of the problem ``task_id`` of ``plans-v1``."""
    problems = _problems()
    if task_id not in problems:
        raise ValueError(f"{task_id!r} is not a problem of {NAME} "
                         "(placement_gym.plans.dataset.plan_dataset_ids lists them)")
    task = problems[task_id][1]
    return PlanTask(task.model, task.mesh, task.global_batch, task.precision)


def split_of(task_id: str) -> str:
    """The split of a problem of ``plans-v1``."""
    plan_dataset_task(task_id)
    return _problems()[task_id][0]
