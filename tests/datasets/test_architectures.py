"""The datasets of real architectures: each family's graph has the ops its architecture must have and the
parameters its formula gives (computed here by hand from the architecture, not read from the code), the
mini dataset builds to its frozen digest, the cache gives back what was built, and the names work where
synthetic-v1's do."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections import Counter

import numpy as np
import pytest
from conftest import check_cli_heft_runtime

from placement_gym.common.extras import install_command
from placement_gym.datasets import DATASETS, FamilySpec, dataset_split, get_dataset
from placement_gym.graph.opgraph import OpGraph
from placement_gym.graph.stored import read_graph, write_graph

FULL, MINI = get_dataset("architectures-v1"), get_dataset("architectures-mini-v1")
FAMILIES = ("resnet", "inception", "efficientnet", "convnext", "unet", "vit", "bert", "gpt2", "llama", "moe",
            "t5", "rnnlm", "gnmt", "whisper")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """architectures-mini-v1 built once (two worker processes) into a fresh output folder: its rows and
    graphs by id."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    out = tmp_path_factory.mktemp("architectures-out")
    patch = pytest.MonkeyPatch()
    patch.setenv("PLACEMENT_GYM_OUTPUT", str(out))
    dataset = dataclasses.replace(MINI)
    # exported here (not read from the archive the dataset ships in), checked against the frozen digest
    rows = dataset.build_manifest(progress=False, workers=2)
    dataset.write_manifest(rows)
    graphs = {row.id: dataset.graph(row.id, shipped=False) for row in rows}
    yield dataset, {row.id: row for row in rows}, graphs
    patch.undo()


# --- by hand: parameters of the mini dataset's models from their architectures ---------------------------

def _layer_norm(h):  # weight and bias
    return 2 * h


def _batch_norm(c):  # scale, shift and the running mean and variance (the importer counts the statistics)
    return 4 * c


def _transformer_layer(h, ffn):
    """Four biased h x h projections, two LayerNorms, a biased MLP to ffn and back (BERT, GPT-2, ViT)."""
    return 4 * (h * h + h) + 2 * _layer_norm(h) + (h * ffn + ffn) + (ffn * h + h)


def _lstm_cell(d_in, h):
    return d_in * 4 * h + 4 * h + h * 4 * h


EXPECTED_PARAMETERS = {
    # ResNet-8 on CIFAR: a 3x3 stem of 16, one basic block per stage (16, 32, 64), option-A shortcuts, fc 10
    "resnet-0": (3 * 16 * 9 + _batch_norm(16) + 2 * (16 * 16 * 9 + _batch_norm(16))
                 + 16 * 32 * 9 + 32 * 32 * 9 + 2 * _batch_norm(32)
                 + 32 * 64 * 9 + 64 * 64 * 9 + 2 * _batch_norm(64) + 64 * 10 + 10),
    # BERT, 1 layer of 64, FFN 256: word, 512 position and 2 segment embeddings, their LayerNorm, the pooler
    "bert-0": 30522 * 64 + 512 * 64 + 2 * 64 + _layer_norm(64) + _transformer_layer(64, 256) + 64 * 64 + 64,
    # GPT-2, 1 layer of 64: the token embedding (also the head: tied), 1,024 positions, a final LayerNorm
    "gpt2-0": 50257 * 64 + 1024 * 64 + _transformer_layer(64, 256) + _layer_norm(64),
    # ViT, 1 layer of 64 on 32x32 images: a 16x16 patch convolution, the class token, 4 + 1 positions, head
    "vit-0": ((3 * 16 * 16 * 64 + 64) + 64 + 5 * 64 + _transformer_layer(64, 256) + _layer_norm(64)
              + 64 * 1000 + 1000),
    # Llama, 2 layers of 64, 4 heads of 16, 2 key/value heads: K and V are 64 x 32; SwiGLU to 256 (8/3 x 64
    # rounded up to 256); two RMSNorm weights a layer, a final one; embedding and head untied, 32,000 tokens
    "llama-0": 32000 * 64 * 2 + 64 + 2 * (2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 256),
    # the MoE decoder: one such layer whose feed-forward is a router (64 x 4) and 4 SwiGLU experts
    "moe-0": 32000 * 64 * 2 + 64 + (2 * 64 + 2 * 64 * 64 + 2 * 64 * 32 + 64 * 4 + 4 * 3 * 64 * 256),
    # T5, 1 + 1 layers of 64, FFN 256, no biases: shared embedding; per encoder layer 4 projections,
    # 2 norms, the FFN; per decoder layer 8 projections, 3 norms, the FFN; a 32 x 2 bucket table each side
    "t5-0": (32128 * 64 + (4 * 64 * 64 + 2 * 64 + 2 * 64 * 256) + 64
             + (8 * 64 * 64 + 3 * 64 + 2 * 64 * 256) + 64 + 2 * 32 * 2),
    # Whisper encoder, 1 layer of 64 over 80 Mel bins: two kernel-3 convolutions, a layer whose key
    # projection has no bias, a final LayerNorm
    "whisper-0": (80 * 64 * 3 + 64) + (64 * 64 * 3 + 64) + _transformer_layer(64, 256) - 64 + _layer_norm(64),
    # the RNNLM: 10,000-word embedding of 32, one LSTM layer, the logits layer
    "rnnlm-0": 10000 * 32 + _lstm_cell(32, 32) + 32 * 10000 + 10000,
    # GNMT, 2 + 2 layers of 32, 32,000-word vocabularies; decoder layer 1 reads [below; context];
    # additive attention: keys 32 x 32, query 32 x 32 + bias, score vector 32
    "gnmt-0": (2 * 32000 * 32 + 2 * _lstm_cell(32, 32) + _lstm_cell(32, 32) + _lstm_cell(64, 32)
               + 32 * 32 + 32 * 32 + 32 + 32 + 32 * 32000 + 32000),
}


@pytest.mark.slow
def test_every_family_has_the_parameters_of_its_architecture(built):
    dataset, rows, graphs = built
    assert {row.family for row in rows.values()} == set(FAMILIES)
    for graph_id, expected in EXPECTED_PARAMETERS.items():
        assert rows[graph_id].parameters == expected, graph_id
        assert int(round(graphs[graph_id].param_bytes.sum() / 4)) == expected, graph_id


def _types(graph: OpGraph) -> Counter:
    return Counter(graph.op_types)


def _parameters(graph: OpGraph, op_type: str) -> list[int]:
    """The parameter counts of the ops of ``op_type`` that own parameters, in graph order."""
    return [int(b // 4) for t, b in zip(graph.op_types, graph.param_bytes) if t == op_type and b > 0]


def _follows(graph: OpGraph, chain: list[str]) -> bool:
    """Whether some path of ops has the op types of ``chain`` in a row."""
    consumers: dict[int, list[int]] = {}
    for src, dst in zip(graph.edge_src.tolist(), graph.edge_dst.tolist()):
        consumers.setdefault(src, []).append(dst)
    frontier = [i for i, t in enumerate(graph.op_types) if t == chain[0]]
    for op_type in chain[1:]:
        frontier = [j for i in frontier for j in consumers.get(i, []) if graph.op_types[j] == op_type]
    return bool(frontier)


@pytest.mark.slow
def test_every_family_has_the_ops_of_its_architecture(built):
    _, _, g = built
    llama, moe = g["llama-0"], g["moe-0"]
    # Llama: RMSNorm (mean of squares, reciprocal square root, scale), no LayerNorm; rotary embeddings
    # (the rotated half is negated and concatenated); SwiGLU; grouped-query attention: per layer two
    # 64 x 64 projections (Q, O), two 64 x 32 (K, V: 2 of 4 heads), K and V expanded to the 4 heads
    assert _follows(llama, ["Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul"])
    assert "LayerNormalization" not in _types(llama) and _follows(llama, ["Neg", "Concat", "Mul"])
    assert _follows(llama, ["MatMul", "Sigmoid", "Mul", "Mul", "MatMul"])
    assert Counter(_parameters(llama, "MatMul")) == {64 * 64: 4, 64 * 32: 4, 64 * 256: 6, 64 * 32000: 1}
    assert _types(llama)["Expand"] == 4
    # MoE: a router (64 x 4) and one TopK, the capacity dispatch (CumSum, two Einsums), each of the 4
    # experts three 64 x 256 matmuls of its own, on a capacity of ceil(1.25 x 2 x 16 / 4) = 10 tokens
    assert _parameters(moe, "MatMul").count(64 * 4) == 1 and _types(moe)["TopK"] == 1
    assert _types(moe)["CumSum"] == 1 and _types(moe)["Einsum"] == 2
    experts = [i for i, (t, b) in enumerate(zip(moe.op_types, moe.param_bytes))
               if t == "MatMul" and b == 4 * 64 * 256]
    assert len(experts) == 3 * 4 and {moe.flops[i] for i in experts} == {2 * 10 * 64 * 256}
    # GPT-2: a causal mask (at this size the exporter folds the triangle into a constant: a Where is
    # left), and the head reads the embedding table (one parameter, shared)
    gpt2 = g["gpt2-0"]
    assert _types(gpt2)["Where"] == 1 and gpt2.tensor_is_parameter.sum() == 1
    # BERT: post-LN (embeddings + 2 a layer), GELU, the tanh pooler
    assert _types(g["bert-0"])["LayerNormalization"] == 3 and {"Gelu", "Tanh"} <= set(_types(g["bert-0"]))
    # ViT: the patch convolution, 2 LayerNorms a layer and a final one
    assert _types(g["vit-0"])["Conv"] == 1 and _types(g["vit-0"])["LayerNormalization"] == 3
    # T5: a 32-bucket x 2-head relative bias table looked up by the encoder and one by the decoder (the
    # buckets of 16 positions fold into constants), the shared embedding read again by the tied head;
    # encoder self, decoder self (causal: a Where) and cross attention; RMS norms only
    t5 = _types(g["t5-0"])
    assert sorted(_parameters(g["t5-0"], "Gather")) == [32 * 2, 32 * 2, 32128 * 64]
    assert g["t5-0"].tensor_is_parameter.sum() == 1 and t5["Where"] == 1
    assert t5["Softmax"] == 3 and "LayerNormalization" not in t5
    # Whisper: two convolutions, then a pre-LN layer and a final LayerNorm
    assert _types(g["whisper-0"])["Conv"] == 2 and _types(g["whisper-0"])["LayerNormalization"] == 3
    # ResNet-8: 7 convolutions (stem, 2 per block), 2 option-A shortcuts (slice + pad)
    assert _types(g["resnet-0"])["Conv"] == 7 and _types(g["resnet-0"])["Pad"] == 2
    # Inception depth 1: 1 + 2 + 1 modules and 2 reductions concatenate their branches
    assert _types(g["inception-0"])["Concat"] == 6 and _types(g["inception-0"])["AveragePool"] == 4
    # EfficientNet-B0: 16 MBConv blocks, each with squeeze-and-excitation (global pool, sigmoid gate)
    efficientnet = _types(g["efficientnet-0"])
    assert efficientnet["ReduceMean"] == 16 + 1
    assert _follows(g["efficientnet-0"], ["Conv", "Sigmoid", "Mul", "Conv"])
    # ConvNeXt depth 1: 6 blocks of depthwise conv, LayerNorm, GELU MLP; stem and 3 downsamplings
    convnext = _types(g["convnext-0"])
    assert convnext["Gelu"] == 6 and convnext["Conv"] == 6 + 4 and convnext["LayerNormalization"] == 6 + 4 + 1
    # U-Net with 2 levels: 2 max pools down, 2 transposed convolutions up, 2 skip concatenations
    unet = _types(g["unet-0"])
    assert unet["MaxPool"] == unet["ConvTranspose"] == unet["Concat"] == 2
    # the LSTMs: one log-softmax a step; GNMT one attention softmax a target step
    assert _types(g["rnnlm-0"])["LogSoftmax"] == 3
    assert _types(g["gnmt-0"])["LogSoftmax"] == 3 and _types(g["gnmt-0"])["Softmax"] == 3


@pytest.mark.slow
def test_the_cache_gives_back_what_was_built(built, monkeypatch):
    dataset, rows, graphs = built
    for graph_id, row in rows.items():
        assert graphs[graph_id].content_sha256 == row.content_sha256
        assert graphs[graph_id].name == f"architectures-mini-v1:{graph_id}"
    # a second build reads the cache and gives the same (frozen) manifest
    assert dataclasses.replace(MINI).build_manifest(progress=False, workers=1) == list(rows.values())
    # (the shipped archive left out: this is about the cache) a damaged file is built again, not read;
    # so is a file of the same name built from other parameters
    path = dataset.graph_path("unet-0")
    path.write_bytes(b"not a graph")
    assert dataset.graph("unet-0", shipped=False).content_sha256 == rows["unet-0"].content_sha256
    other = dataclasses.replace(MINI.families[4], grid={"levels": (3,), "width": (8,), "convs": (2,),
                                                        "batch": (2,), "image": (32,)})
    changed = dataclasses.replace(MINI, families=(*MINI.families[:4], other, *MINI.families[5:]))
    assert changed.graph("unet-0", shipped=False).content_sha256 != rows["unet-0"].content_sha256
    assert dataset.graph("unet-0", shipped=False).content_sha256 == rows["unet-0"].content_sha256
    # a manifest of other graphs names the exporter's versions as a cause
    with pytest.raises(ValueError, match="frozen with torch .*another torch or onnxscript version may "):
        changed.build_manifest(progress=False, workers=1)
    # as the other tests find it
    assert dataset.graph("unet-0", shipped=False).content_sha256 == rows["unet-0"].content_sha256


@pytest.mark.slow
def test_a_cached_graph_loads_in_milliseconds(built):
    dataset, rows, _ = built
    seconds = []
    for graph_id, row in rows.items():
        started = time.perf_counter()
        graph, extra = read_graph(dataset.graph_path(graph_id))
        seconds.append(time.perf_counter() - started)
        assert graph.content_sha256 == row.content_sha256 and extra["params"] == row.params
    assert float(np.median(seconds)) < 0.1  # generous for a loaded machine: an export takes seconds


def test_a_stored_graph_reads_back_the_same_or_not_at_all(tmp_path):
    graph = get_dataset("synthetic-mini-v1").graph("enas-conv-3")
    path = write_graph(graph, tmp_path / "g.npz", {"what": [1, 2]})
    again, extra = read_graph(path)
    assert again.content_sha256 == graph.content_sha256 and again.name == graph.name
    assert extra == {"what": [1, 2]}
    assert again.op_names == graph.op_names and again.data_inputs == graph.data_inputs
    assert [p.name for p in tmp_path.iterdir()] == ["g.npz"]  # no temporary file left behind
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(ValueError, match="is not a stored graph"):
        read_graph(tmp_path / "bad.npz")
    with np.load(path) as stored:
        arrays = dict(stored)
    arrays["flops"] = arrays["flops"] * 2  # the recorded content hash no longer fits
    np.savez(tmp_path / "edited.npz", **arrays)
    with pytest.raises(ValueError, match="not its recorded content hash"):
        read_graph(tmp_path / "edited.npz")
    with pytest.raises(ValueError, match="is not a stored graph"):
        read_graph(tmp_path / "missing.npz")


def test_ids_parameters_and_splits_are_fixed():
    assert len(FULL) == 1033 and [spec.family for spec in FULL.families] == list(FAMILIES)
    assert FULL.locate("resnet-0")[0].params(0) == {"depth": 8, "widen": 1, "batch": 32}
    spec, k = FULL.locate("gnmt-25")
    assert spec.params(k) == {"layers": 8, "hidden": 1024, "steps": 80, "batch": 128}
    assert k == spec.n_graphs - 1
    spec, k = FULL.locate("moe-37")
    assert spec.params(k)["experts"] == 64 and spec.params(k)["layers"] == 32
    for dataset in (FULL, MINI):
        for spec in dataset.families:
            points = [tuple(sorted(spec.params(k).items())) for k in range(spec.n_graphs)]
            assert len(set(points)) == len(points), spec.family  # no two ids build the same graph
        train = {i.rsplit("-", 1)[0] for i in dataset.ids("train") + dataset.ids("valid")}
        test_families = {i.rsplit("-", 1)[0] for i in dataset.ids("test-families")}
        assert test_families == {"t5", "whisper"} and not train & test_families
    assert {split: len(FULL.ids(split)) for split in ("train", "valid", "test-sizes", "test-families")} == {
        "train": 806, "valid": 49, "test-sizes": 48, "test-families": 130}
    dataset, ids = dataset_split("architectures-v1:test-sizes")
    assert dataset is FULL and all(FULL.locate(i)[0].params(FULL.locate(i)[1])[FULL.locate(i)[0].size_key]
                                   == FULL.locate(i)[0].largest_size for i in ids)


def test_a_family_spec_refuses_points_it_cannot_keep_apart():
    with pytest.raises(ValueError, match="one graph per grid point needs the points all different"):
        FamilySpec("bert", None, ({"layers": (1, 2)}, {"layers": (2,)}), "layers")
    with pytest.raises(ValueError, match="size_key 'seq' is not a parameter of every point"):
        FamilySpec("bert", None, {"layers": (1, 2)}, "seq")
    spec = FamilySpec("regal", 5, ({"ops": (10, 20)}, {"ops": (40,)}), "ops")
    assert [spec.params(k)["ops"] for k in range(5)] == [10, 20, 40, 10, 20] and spec.largest_size == 40


def test_without_torch_building_is_a_one_line_error_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ImportError) as error:
        MINI.graph("bert-0", shipped=False)
    message = str(error.value)
    assert "\n" not in message and message.endswith(install_command("export"))
    assert "architectures-mini-v1:bert-0" in message


def test_the_command_lists_the_architecture_datasets(capsys, tmp_path, monkeypatch):
    from placement_gym.cli import main

    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    assert main(["datasets", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)}
    assert listed["architectures-v1"]["graphs"] == 1033
    assert listed["architectures-v1"]["families"] == list(FAMILIES)
    assert listed["architectures-v1"]["held_out_families"] == ["t5", "whisper"]
    assert sum(listed["architectures-mini-v1"]["splits"].values()) == 17
    assert listed["architectures-mini-v1"]["built"] and listed["architectures-mini-v1"]["shipped"]
    assert main(["datasets"]) == 0
    assert "architectures-v1" in capsys.readouterr().out
    assert set(DATASETS) >= {"architectures-v1", "architectures-mini-v1"}


@pytest.mark.slow
def test_architecture_graphs_are_names_tasks_envs_and_the_cli_take(built, capsys):
    import gymnasium as gym

    import placement_gym as pg
    from placement_gym.cost_model import reference_simulate, simulate

    _, rows, graphs = built
    task = pg.get_task("architectures-mini-v1:llama-0", "k80x2")
    assert task.id == "architectures-mini-v1:llama-0/k80x2/train" and pg.parse_task_id(task.id) is task
    assert task.graph.content_sha256 == rows["llama-0"].content_sha256
    placement = np.arange(task.n_forward) % task.n_devices
    expected = reference_simulate(task, placement).runtime
    assert simulate(task, placement).runtime == pytest.approx(expected, rel=1e-9)
    env = gym.make("DevicePlacement-v0", graph="architectures-mini-v1:moe-0", cluster="k80x2")
    assert env.unwrapped.task.id == "architectures-mini-v1:moe-0/k80x2/train"
    env = gym.make("DevicePlacementStaged-v0", dataset="architectures-mini-v1:train", cluster="k80x2")
    env.reset(seed=0)
    assert env.unwrapped.task.graph.name.split(":")[1] in MINI.ids("train")
    check_cli_heft_runtime("architectures-mini-v1:gpt2-0", "k80x2", capsys)


@pytest.mark.slow
def test_a_script_without_a_main_guard_gets_told_what_to_do(tmp_path):
    """Worker processes are spawned (torch is not safe to fork) and import the script that started the
    build again: one that builds at import needs a main guard, and the error says so."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    script = tmp_path / "build.py"
    script.write_text("from placement_gym.datasets import get_dataset\n"
                      "get_dataset('architectures-mini-v1').build_manifest(progress=False, workers=2)\n")
    env = {**os.environ, "PLACEMENT_GYM_OUTPUT": str(tmp_path / "out")}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "if __name__ == '__main__':" in last
    assert "placement-gym datasets --build architectures-mini-v1" in last
