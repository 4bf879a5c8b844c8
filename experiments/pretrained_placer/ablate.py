"""Ablations of `pretrained-list` (issue 29): which learned part wins, and whether its loss on unseen
sizes is a size or a family effect.

    (from the repository root, with it on PYTHONPATH)
    python experiments/pretrained_placer/ablate.py test            # the README's 400 zero-shot pairs
    python experiments/pretrained_placer/ablate.py train [--per-bin 10]   # train-split graphs by size
    python experiments/pretrained_placer/ablate.py summary

Every variant places with one schedule and one evaluation (zero-shot at ``--budget 1``, no memory
retries), from the same per-task features:

* ``s<k>``: the checkpoint of pre-training seed ``k`` (checkpoints/seed<k>.json; seed 0 is the shipped
  baselines/learning/pretrained_list.json);
* ``s<k>-heft-priority``: its device weights, HEFT's op priority (upward rank alone);
* ``s<k>-heft-device``: its op priority, HEFT's device rule (every device penalty zero);
* ``s0-no-<context>``: the shipped weights with one context feature's column of the device weights
  zeroed (the same as that feature reading 0 on every task);
* ``s0-no-<device feature>``: the shipped weights with one device penalty's row zeroed;
* ``heft-weights``: both at HEFT's (`PretrainedModel.heft`; it must reproduce HEFT, which ``summary``
  checks against HEFT's recorded runtime).

``test``: the tasks of measure.py's zero-shot table (results/baselines.jsonl: the generalisation track
v2 and 100 of its graphs on random-v1 test clusters). ``train``:
graphs of synthetic-v1's train split not in any of the three seeds' pre-training pools, ``--per-bin``
per (family, size bin) drawn with seed 0, each on k80x4, k40x4, p100x4 and one random-v1 train cluster
(drawn with the same generator). Both run HEFT and m-ETF as registered (``summary`` checks them against
results/baselines.jsonl). Rows go to results/ablate_{test,train}.jsonl; a step cut short resumes where it
stopped. ``summary`` prints the README's tables.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from baselines.learning.pretrained import (
    CONTEXT_FEATURES,
    DEVICE_FEATURES,
    PretrainConfig,
    PretrainedModel,
    learned_schedule,
    load_checkpoint,
    task_features,
    training_tasks,
)
from baselines.registry import run_agent
from placement_gym.cost_model import simulate
from placement_gym.datasets import get_dataset
from placement_gym.datasets.clusters import cluster_ids
from placement_gym.task.named import parse_task_id

HERE = Path(__file__).parent
RESULTS = HERE / "results"
PRESETS = ("k80x4", "k40x4", "p100x4")
SEEDS = (0, 1, 2)
# Train-split size bins (forward ops, lower edge exclusive): regal comes in sizes 50 to 800, enas-conv
# 84 to 594; 400 is pre-training's limit (`PretrainConfig.max_ops`).
TRAIN_BINS = {"regal": (0, 50, 100, 200, 400, 800), "enas-conv": (0, 200, 400, 600)}


def variants() -> dict[str, PretrainedModel]:
    """Every ablated model by name (module docstring)."""
    heft = PretrainedModel.heft()
    out: dict[str, PretrainedModel] = {}
    for seed in SEEDS:
        model = load_checkpoint(HERE / "checkpoints" / f"seed{seed}.json")[0]
        out[f"s{seed}"] = model
        out[f"s{seed}-heft-priority"] = PretrainedModel(heft.priority, model.device)
        out[f"s{seed}-heft-device"] = PretrainedModel(model.priority, heft.device)
        if seed == 0:
            for j, name in enumerate(CONTEXT_FEATURES):
                device = model.device.copy()
                device[:, j] = 0.0
                out[f"s0-no-{name}"] = PretrainedModel(model.priority, device)
            for i, name in enumerate(DEVICE_FEATURES):
                device = model.device.copy()
                device[i, :] = 0.0
                out[f"s0-no-{name}"] = PretrainedModel(model.priority, device)
    out["heft-weights"] = heft
    return out


def _score(task, placement) -> list:
    """[runtime, feasible, devices the placement uses]."""
    result = simulate(task, placement)
    return [float(result.runtime), bool(result.feasible), int(np.unique(placement).size)]


def measure(task_id: str, models: dict[str, PretrainedModel], extra: dict) -> dict:
    """One row: the task's sizes and context features, and each variant's `_score`."""
    task = parse_task_id(task_id)
    features = task_features(task)
    row = {"task": task_id, **extra, "forward_ops": int((task.op_kind == 0).sum()), "ops": task.n_ops,
           "context": [round(float(x), 6) for x in features.context]}
    for name, model in models.items():
        row[name] = _score(task, learned_schedule(task, model, None, features).placement())
    return row


def _run(tasks: list[tuple[str, dict]], out: Path) -> None:
    models = variants()
    done = {json.loads(line)["task"] for line in out.open()} if out.exists() else set()
    started = time.perf_counter()
    with out.open("a") as sink:
        for n, (task_id, extra) in enumerate(tasks):
            if task_id in done:
                continue
            row = measure(task_id, models, extra)
            task = parse_task_id(task_id)
            for name in ("heft", "m-etf"):
                row[name] = _score(task, run_agent(task, name).placement)
            sink.write(json.dumps(row) + "\n")
            sink.flush()
            if n % 25 == 0:
                print(f"{n + 1}/{len(tasks)} {task_id} {time.perf_counter() - started:.0f} s", flush=True)
    print(f"{len(tasks)} tasks, {time.perf_counter() - started:.0f} s", flush=True)


def test_tasks() -> list[tuple[str, dict]]:
    rows = [json.loads(line) for line in (RESULTS / "baselines.jsonl").open()]
    return [(r["task"], {"split": r["split"], "cluster": r["cluster"], "family": _family(r["task"])})
            for r in rows]


def _family(task_id: str) -> str:
    return task_id.split(":", 1)[1].split("/")[0].rsplit("-", 1)[0]


def train_tasks(per_bin: int) -> list[tuple[str, dict]]:
    """``per_bin`` train-split graphs per (family, size bin), none of them in a pre-training pool,
    drawn with seed 0, each on the preset clusters and one random-v1 train cluster (drawn with it)."""
    dataset = get_dataset("synthetic-v1")
    pooled = {t.split(":", 1)[1].split("/")[0] for seed in SEEDS
              for t in training_tasks(PretrainConfig(), seed)}
    records = [r for r in dataset.manifest(progress=False) if r.split == "train" and r.id not in pooled]
    rng = np.random.default_rng(0)
    random_clusters = cluster_ids("train")
    tasks = []
    for family, edges in TRAIN_BINS.items():
        for lo, hi in zip(edges, edges[1:]):
            members = sorted((r.id for r in records if r.family == family and lo < r.ops <= hi),
                             key=lambda i: int(i.rsplit("-", 1)[1]))
            chosen = [members[i] for i in sorted(rng.choice(len(members), min(per_bin, len(members)),
                                                            replace=False).tolist())]
            for graph in chosen:
                clusters = [*PRESETS, random_clusters[int(rng.integers(len(random_clusters)))]]
                tasks += [(f"synthetic-v1:{graph}/{c}/train",
                           {"split": "train", "cluster": "random" if "random" in c else "preset",
                            "family": family, "bin": f"{lo + 1}-{hi}"}) for c in clusters]
    return tasks


# ----------------------------------------------------------------------------------------- summary


def _key(result: list) -> tuple[bool, float]:
    return (not result[1], result[0])


def _same(a: list, b: list) -> bool:
    """The same runtime and feasibility (measure.py's rows hold no device count)."""
    return a[:2] == b[:2]


def _stats(members: list[dict], name: str, metrics: str = "hem") -> list[str]:
    """``h``: share strictly better than HEFT (feasible first), ``e``: than m-ETF, ``m``: median
    runtime / HEFT's, ``d``: mean devices the placement uses."""
    out = []
    for metric in metrics:
        if metric == "d":
            out.append(f"{np.mean([r[name][2] for r in members]):.1f}")
        elif metric == "m":
            out.append(f"{np.median([r[name][0] / r['heft'][0] for r in members]):.3f}")
        else:
            other = "heft" if metric == "h" else "m-etf"
            out.append(f"{np.mean([_key(r[name]) < _key(r[other]) for r in members]):.0%}")
    return out


_LABEL = {"h": "> HEFT", "e": "> m-ETF", "m": "median / HEFT", "d": "devices"}


def summarise_variants(rows: list[dict], names: list[str]) -> None:
    """Variants as rows; per (split, clusters): > HEFT, > m-ETF, median runtime / HEFT."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        groups.setdefault((row["split"], row["cluster"]), []).append(row)
    ordered = sorted(groups.items())
    print("| variant | " + " | ".join(f"{s} {c} ({len(m)}) {_LABEL[x]}" for (s, c), m in ordered
                                      for x in "hem") + " |")
    print("|---|" + "---:|" * 3 * len(groups))
    for name in names:
        print(f"| {name} | " + " | ".join(x for _, m in ordered for x in _stats(m, name)) + " |")


SIZE_COLUMNS = (("s0", "hemd"), ("s0-heft-priority", "hm"), ("s0-heft-device", "hm"), ("s1", "h"),
                ("s2", "h"), ("heft", "d"))


def summarise_sizes(rows: list[dict]) -> None:
    """Per (split, family, clusters, size bin): the `SIZE_COLUMNS`."""
    print("| split | family | clusters | forward ops | pairs | " + " | ".join(
        f"{n} {_LABEL[x]}" for n, metrics in SIZE_COLUMNS for x in metrics) + " |")
    print("|---|---|---|---|---:|" + "---:|" * sum(len(m) for _, m in SIZE_COLUMNS))
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["split"], row["family"], row["cluster"], row["bin"]), []).append(row)
    for (split, family, cluster, _), members in sorted(groups.items(), key=lambda kv: (
            kv[0][0], kv[0][1], kv[0][2], min(r["forward_ops"] for r in kv[1]))):
        ops = sorted(r["forward_ops"] for r in members)
        print(f"| {split} | {family} | {cluster} | {ops[0]}-{ops[-1]} | {len(members)} | "
              + " | ".join(x for n, metrics in SIZE_COLUMNS for x in _stats(members, n, metrics)) + " |")


def summarise_context(rows: list[dict]) -> None:
    print("| split | family | pairs | "
          + " | ".join(f"{c} (min / median / max)" for c in CONTEXT_FEATURES[1:]) + " |")
    print("|---|---|---:|" + "---|" * (len(CONTEXT_FEATURES) - 1))
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        if row["cluster"] == "preset":
            groups.setdefault((row["split"], row["family"], row.get("bin", "")), []).append(row)
    for (split, family, _), members in sorted(groups.items(), key=lambda kv: (
            kv[0][0], kv[0][1], min(r["forward_ops"] for r in kv[1]))):
        values = np.array([r["context"] for r in members])
        ops = sorted(r["forward_ops"] for r in members)
        label = f"{family} {ops[0]}-{ops[-1]}"
        print(f"| {split} | {label} | {len(members)} | " + " | ".join(
            f"{values[:, j].min():+.2f} / {np.median(values[:, j]):+.2f} / {values[:, j].max():+.2f}"
            for j in range(1, len(CONTEXT_FEATURES))) + " |")


def summary() -> None:
    test = [json.loads(line) for line in (RESULTS / "ablate_test.jsonl").open()]
    train_path = RESULTS / "ablate_train.jsonl"
    train = [json.loads(line) for line in train_path.open()] if train_path.exists() else []
    names = list(variants())
    # Checks: HEFT's weights reproduce HEFT, the seeds' models reproduce measure.py's zero-shot rows.
    same_heft = sum(_same(r["heft-weights"], r["heft"]) for r in test + train)
    print(f"heft-weights == HEFT (as registered): {same_heft} of {len(test) + len(train)} pairs")
    recorded = {r["task"]: r for r in map(json.loads, (RESULTS / "baselines.jsonl").open())}
    for name in ("heft", "m-etf"):
        same = sum(_same(recorded[r["task"]][name], r[name]) for r in test)
        print(f"{name} == results/baselines.jsonl: {same} of {len(test)} pairs")
    for seed in SEEDS:
        path = RESULTS / f"zero_shot_model{seed}.jsonl"
        recorded = {r["task"]: r["model"] for r in map(json.loads, path.open())}
        same = sum(_same(recorded[r["task"]], r[f"s{seed}"]) for r in test)
        print(f"s{seed} == results/zero_shot_model{seed}.jsonl: {same} of {len(test)} pairs")
    print("\n## Variants on the test pairs\n")
    summarise_variants(test, names)
    for split in ("test-sizes", "test-families"):
        members = sorted({r["forward_ops"] for r in test if r["split"] == split})
        quartiles = np.quantile([r["forward_ops"] for r in test if r["split"] == split], [0.25, 0.5, 0.75])
        print(f"\n{split}: forward ops {members[0]}-{members[-1]}, quartiles {quartiles.tolist()}")
    for row in test:  # size bins within each split and family: quartiles of its forward ops
        peers = [r["forward_ops"] for r in test
                 if r["split"] == row["split"] and r["family"] == row["family"]]
        edges = np.quantile(peers, [0.25, 0.5, 0.75])
        row["bin"] = int(np.searchsorted(edges, row["forward_ops"], side="left"))
    print("\n## Test pairs by size (quartiles of forward ops within split and family)\n")
    summarise_sizes(test)
    if train:
        print("\n## Train-split graphs (not in any pre-training pool): preset and random-v1 train clusters\n")
        summarise_variants(train, names)
        print()
        summarise_sizes(train)
    print("\n## Context features (preset clusters)\n")
    summarise_context(test + train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["test", "train", "summary"])
    parser.add_argument("--per-bin", type=int, default=10, help="train: graphs per (family, size bin)")
    args = parser.parse_args()
    if args.what == "test":
        _run(test_tasks(), RESULTS / "ablate_test.jsonl")
    elif args.what == "train":
        _run(train_tasks(args.per_bin), RESULTS / "ablate_train.jsonl")
    else:
        summary()


if __name__ == "__main__":
    main()
