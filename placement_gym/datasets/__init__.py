"""Datasets of graphs for placement that generalises: named, versioned, built from their definition
(`placement_gym.datasets.dataset`), their graphs made by the families of
`placement_gym.datasets.families`.

``get_dataset("synthetic-v1")``; ``dataset_split("synthetic-v1:train")`` gives the dataset and the ids
of a split; ``dataset_graph("synthetic-v1:regal-17")`` one graph by its name. `DATASETS` lists them
(``placement-gym datasets``).
"""

from __future__ import annotations

from placement_gym.common.names import unknown_name
from placement_gym.common.untrusted import shown
from placement_gym.datasets import architecture_grids
from placement_gym.datasets.dataset import SPLIT_ALIASES, SPLITS, Dataset, FamilySpec
from placement_gym.graph.opgraph import OpGraph

MAX_NAME_CHARS = 100  # far longer than any dataset's name: a longer one is refused without a guess

_CONV_GRID = {"cells": (3, 6, 9, 12, 15), "nodes": (4, 5, 6, 7), "channels": (16, 24, 32, 48),
              "batch": (32, 64, 128)}
# GNMT: 1,024 units, batch 128, 32k wordpieces (Wu et al. 2016; the tensorflow/nmt GNMT setup in
# docs/calibration.md); 50 and 80 tokens are sentence lengths, 400 a document's, the length that makes
# GNMT-8's forward graph pass 100,000 ops. RNNLM: Zaremba et al. 2014's large model (2 layers of 1,500 units,
# 35 unrolled steps, batch 20, PTB's 10,000 words) and twice its unrolling.
UNROLLED_FAMILIES = (
    FamilySpec("gnmt-tf", None, (
        {"layers": (2, 4, 8), "hidden": (1024,), "steps": (50,), "batch": (128,)},
        {"layers": (8,), "hidden": (1024,), "steps": (80, 400), "batch": (128,)},
    ), "steps"),
    FamilySpec("rnnlm-tf", None, {"layers": (2,), "hidden": (1500,), "steps": (35, 70), "batch": (20,)},
               "steps"),
)
_RNN_GRID = {"nodes": (4, 6, 8, 10, 12), "hidden": (200, 400, 600, 800), "steps": (10, 20, 35),
             "batch": (32, 64)}

DATASETS: dict[str, Dataset] = {
    dataset.name: dataset
    for dataset in (
        Dataset(
            "synthetic-v1",
            "10,000 synthetic graphs: REGAL-style random computation graphs (50 to 1,600 ops) and "
            "ENAS-style convolutional and recurrent cell networks (Placeto's cifar10 and ptb families); "
            "the recurrent family is held out",
            (
                FamilySpec("regal", 6000, {"ops": (50, 100, 200, 400, 800, 1600)}, "ops"),
                FamilySpec("enas-conv", 2000, _CONV_GRID, "cells"),
                FamilySpec("enas-rnn", 2000, _RNN_GRID, "steps"),
            ),
            held_out_families=("enas-rnn",),
            manifest_sha256="25825eb497bda531e26793d7618d530d153f74bed9580a192debeba0e9ac2d93",
        ),
        Dataset(
            "synthetic-mini-v1",
            "90 small graphs of synthetic-v1's three families, for tests and quick looks",
            (
                FamilySpec("regal", 40, {"ops": (30, 60, 90, 120)}, "ops"),
                FamilySpec("enas-conv", 25, {"cells": (2, 3, 4), "nodes": (3, 4), "channels": (8, 16),
                                             "batch": (8, 16)}, "cells"),
                FamilySpec("enas-rnn", 25, {"nodes": (2, 3, 4), "hidden": (32, 64), "steps": (2, 3, 4),
                                            "batch": (8,)}, "steps"),
            ),
            held_out_families=("enas-rnn",),
            manifest_sha256="85b1ea48cc514311f2608dbfb46f5819b4f72c2913192c60bb273e7e60c53988",
        ),
        Dataset(
            "architectures-v1",
            "1,033 graphs of 14 families of real architectures (ResNet and WRN, Inception, EfficientNet, "
            "ConvNeXt, U-Net, ViT, BERT, GPT-2, Llama, mixture of experts, T5, RNNLM, GNMT, Whisper) swept "
            "over depth, width, heads, batch and sequence length, exported from torch and shipped built; "
            "T5 and Whisper are held out",
            architecture_grids.FAMILIES,
            held_out_families=architecture_grids.HELD_OUT,
            manifest_sha256="1f1b0de693987a95c6f410595602ae8805deb0403611cd42eb1eb72fd1778bf0",
            frozen_with="torch 2.13.0+cpu, onnxscript 0.7.2",
        ),
        Dataset(
            "architectures-mini-v1",
            "17 small graphs of architectures-v1's 14 families, for tests and quick looks (shipped built)",
            architecture_grids.MINI_FAMILIES,
            held_out_families=architecture_grids.HELD_OUT,
            manifest_sha256="c09e7b68e937fbc698cf7f8802d6be8374f6f2d04bb93920e975e54bdfccefff",
            frozen_with="torch 2.13.0+cpu, onnxscript 0.7.2",
        ),
        Dataset(
            "unrolled-v1",
            "7 fine-grained unrolled LSTM graphs as TensorFlow would see them (14 element-wise ops an LSTM "
            "cell): GNMT of 2, 4 and 8 layers at 50 steps, GNMT-8 at 80 and 400 steps (103,000 ops), RNNLM "
            "of 2 layers at 35 and 70 steps; written with onnx.helper (no torch) and cached on first use",
            UNROLLED_FAMILIES,
            held_out_families=(),
            manifest_sha256="8141e87b931eea8d2f9e0a3be279c768b9b33fa1727631aae51fffff37d344b4",
        ),
    )
}


def get_dataset(name: str) -> Dataset:
    """The dataset called ``name``, or a ValueError naming the known ones."""
    if not isinstance(name, str) or len(name) > MAX_NAME_CHARS:  # no guess at, nor echo of, a huge name
        raise ValueError(f"unknown dataset {shown(name)}; allowed: {', '.join(DATASETS)}")
    if name not in DATASETS:
        raise ValueError(unknown_name("dataset", name, DATASETS))
    return DATASETS[name]


def is_dataset_graph_name(name: object) -> bool:
    """Whether ``name`` reads as ``<dataset>:<graph id>`` of a known dataset."""
    return isinstance(name, str) and name.partition(":")[0] in DATASETS and ":" in name


def dataset_graph(name: str) -> OpGraph:
    """The graph named ``<dataset>:<graph id>`` (``synthetic-v1:regal-17``), built in milliseconds."""
    dataset_name, _, graph_id = str(name).partition(":")
    return get_dataset(dataset_name).graph(graph_id)


def dataset_split(text: str) -> tuple[Dataset, list[str]]:
    """``"<name>:<split>"`` (or a bare name: every graph) as the dataset and the ids of the split; a
    one-line ValueError naming the splits for a split that is empty (``"synthetic-v1:"``, which would
    otherwise read as every graph, the held-out test graphs among them) or unknown."""
    if not isinstance(text, str):
        raise ValueError(f"a dataset split is a str '<name>:<split>', got {shown(text)} "
                         f"({type(text).__name__})")
    name, colon, split = text.partition(":")
    dataset = get_dataset(name)
    if not colon:
        return dataset, dataset.ids("all")
    if split not in SPLITS and split not in SPLIT_ALIASES:
        allowed = f"{', '.join([*SPLITS, *SPLIT_ALIASES])} ({name} alone: every graph)"
        if not split:
            raise ValueError(f"dataset {shown(text)} names no split after the colon; allowed: {allowed}")
        graph = dataset.has_graph(split)
        one = f" ({split!r} is a graph of {name}: give graph='{name}:{split}')" if graph else ""
        raise ValueError(f"unknown split {shown(split)}; allowed: {allowed}{one}")
    return dataset, dataset.ids(split)


__all__ = ["DATASETS", "SPLITS", "SPLIT_ALIASES", "Dataset", "FamilySpec", "dataset_graph", "dataset_split",
           "get_dataset", "is_dataset_graph_name"]
