"""The architecture datasets ship built (placement_gym/datasets/shipped.py): an env over them starts
without torch and writes nothing, an archive that was tampered with is never read as the dataset, packing
gives back the shipped archive byte for byte, and the shipped graphs are the ones torch exports (on a
sample drawn each day, as CI checks them)."""

from __future__ import annotations

import dataclasses
import datetime
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from placement_gym.datasets import get_dataset, shipped
from placement_gym.graph.stored import read_graph, write_graph

SHIPPED = ("architectures-mini-v1", "architectures-v1")

# Run as a user would, in a fresh process where torch cannot be imported.
WITHOUT_TORCH = """
import json, sys
sys.modules["torch"] = None
sys.modules["onnxscript"] = None
import gymnasium as gym
import placement_gym
from placement_gym.datasets import get_dataset

name = sys.argv[1]
rows = {row.id: row for row in get_dataset(name).manifest()}
env = gym.make("DevicePlacement-v0", dataset=name + ":train", cluster="k80x4")
seen = []
for seed in range(3):
    env.reset(seed=seed)
    graph = env.unwrapped.task.graph
    seen.append([graph.name, graph.content_sha256])
print(json.dumps({"rows": {i: r.content_sha256 for i, r in rows.items()}, "seen": seen,
                  "splits": {i: r.split for i, r in rows.items()}}))
"""


@pytest.mark.parametrize("name", SHIPPED)
def test_an_env_over_a_shipped_dataset_resets_without_torch_and_writes_nothing(name, tmp_path):
    assert shipped.has_archive(name)
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-c", WITHOUT_TORCH, name], capture_output=True, text=True,
                            env={**os.environ, "PLACEMENT_GYM_OUTPUT": str(out)}, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    found = json.loads(result.stdout.splitlines()[-1])
    assert len(found["rows"]) == len(get_dataset(name))
    for graph_name, content in found["seen"]:
        graph_id = graph_name.partition(":")[2]
        assert found["splits"][graph_id] == "train" and found["rows"][graph_id] == content
    assert not (out / "datasets" / name).exists()  # nothing exported, nothing cached


@pytest.fixture
def archive(tmp_path, monkeypatch):
    """A copy of the mini dataset's archive where the package reads it, and a fresh dataset object (no
    manifest remembered) with torch unimportable, so that anything not read from the archive fails."""
    built = tmp_path / "built"
    built.mkdir()
    shutil.copy(shipped.archive_path("architectures-mini-v1"), built)
    monkeypatch.setattr(shipped, "BUILT_DIR", built)
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path / "out"))
    monkeypatch.setitem(sys.modules, "torch", None)
    return built / "architectures-mini-v1.zip"


def _members(path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _rewrite(path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_LZMA) as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _fresh():
    return dataclasses.replace(get_dataset("architectures-mini-v1"))


def _edit_arrays(data: bytes, **changes) -> bytes:
    with np.load(io.BytesIO(data)) as stored:
        arrays = {key: stored[key] for key in stored.files}
    arrays.update(changes)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def test_the_archive_gives_every_graph_of_its_frozen_manifest(archive):
    dataset = _fresh()
    rows = dataset.manifest()
    assert dataset.ships_built and len(rows) == len(dataset)
    for row in rows:
        assert dataset.graph(row.id).content_sha256 == row.content_sha256


def test_a_graph_edited_in_the_archive_is_not_read(archive):
    members = _members(archive)
    data = members["graphs/bert-0.npz"]
    with np.load(io.BytesIO(data)) as stored:
        flops = stored["flops"].copy()
    flops[0] += 1.0
    _rewrite(archive, {**members, "graphs/bert-0.npz": _edit_arrays(data, flops=flops)})
    dataset = _fresh()
    with pytest.raises(ImportError, match="architectures-mini-v1:bert-0"):  # exported instead: needs torch
        dataset.graph("bert-0")
    rows = {row.id: row for row in dataset.manifest()}
    assert dataset.graph("gpt2-0").content_sha256 == rows["gpt2-0"].content_sha256  # the others still read


def test_a_whole_graph_of_another_id_in_the_archive_is_not_read(archive):
    members = _members(archive)
    # a consistent file (its own content hash is right), but not the graph the frozen row names
    _rewrite(archive, {**members, "graphs/bert-0.npz": members["graphs/gpt2-0.npz"]})
    with pytest.raises(ImportError):
        _fresh().graph("bert-0")
    graph, extra = read_graph(members["graphs/gpt2-0.npz"])
    graph = dataclasses.replace(graph, name="architectures-mini-v1:bert-0")
    bert = _fresh().locate("bert-0")[0]
    write_graph(graph, archive.parent / "forged.npz", {"family": "bert", "params": bert.params(0)})
    forged = (archive.parent / "forged.npz").read_bytes()
    _rewrite(archive, {**members, "graphs/bert-0.npz": forged})  # right name and origin, wrong content
    with pytest.raises(ImportError):
        _fresh().graph("bert-0")


def test_an_edited_manifest_is_not_read(archive):
    members = _members(archive)
    text = members["manifest.json"].decode()
    row = json.loads(text.splitlines()[1].rstrip(","))
    edited = text.replace(f'"ops": {row["ops"]},', f'"ops": {row["ops"] + 1},', 1)
    assert edited != text
    _rewrite(archive, {**members, "manifest.json": edited.encode()})
    dataset = _fresh()
    assert not dataset.ships_built
    with pytest.raises(ImportError):
        dataset.manifest()  # built again: needs torch
    with pytest.raises(ImportError):
        dataset.graph(row["id"])  # no frozen row to check a graph against


def test_a_member_that_would_unpack_too_large_is_not_unpacked(archive, monkeypatch):
    size = zipfile.ZipFile(archive).getinfo("graphs/bert-0.npz").file_size
    monkeypatch.setattr(shipped, "MAX_MEMBER_BYTES", size - 1)
    assert shipped.graph_bytes("architectures-mini-v1", "bert-0") is None
    with pytest.raises(ImportError):
        _fresh().graph("bert-0")


def test_damaged_or_missing_archives_read_as_none(archive):
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    assert shipped.manifest_bytes("architectures-mini-v1") is None
    assert not _fresh().ships_built
    archive.unlink()
    assert shipped.graph_bytes("architectures-mini-v1", "bert-0") is None and not _fresh().ships_built


def test_packing_the_cache_gives_back_the_shipped_archive_byte_for_byte(archive, tmp_path):
    dataset = _fresh()
    members = _members(archive)
    dataset.manifest_path.parent.mkdir(parents=True)
    dataset.manifest_path.write_bytes(members["manifest.json"])
    for row in dataset.manifest():  # the cache as a build leaves it (graphs compressed one by one)
        graph, extra = read_graph(members[f"graphs/{row.id}.npz"])
        write_graph(graph, dataset.graph_path(row.id), extra)
    packed = dataset.pack(tmp_path / "packed.zip")
    assert packed.read_bytes() == archive.read_bytes()


def test_packing_refuses_a_cache_without_the_frozen_manifest(archive, tmp_path):
    with pytest.raises(ValueError, match="no manifest with the frozen digest"):
        _fresh().pack(tmp_path / "packed.zip")


def test_the_command_checks_a_sample_of_the_shipped_graphs_against_torch(tmp_path):
    """What CI checks each day: graphs drawn by the day's seed, exported again with torch."""
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    seed = datetime.date.today().toordinal()
    command = [sys.executable, "-m", "placement_gym", "datasets", "--build", "architectures-v1", "--sample",
               "2", "--seed", str(seed)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900,
                            env={**os.environ, "PLACEMENT_GYM_OUTPUT": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"2 graphs drawn with --seed {seed}" in result.stdout
    assert "equal to their frozen manifest rows" in result.stdout


def test_a_graph_the_family_no_longer_builds_fails_the_check(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    mini = get_dataset("architectures-mini-v1")
    index = [spec.family for spec in mini.families].index("gpt2")
    spec = mini.families[index]
    point = spec.params(0)
    grid = {**{key: (value,) for key, value in point.items()}, "layers": (point["layers"] + 1,)}
    other = dataclasses.replace(spec, grid=grid)
    changed = dataclasses.replace(mini, families=(*mini.families[:index], other, *mini.families[index + 1:]))
    with pytest.raises(ValueError, match="graph gpt2-0 built here differs from its frozen row in .*ops"):
        changed.check(["gpt2-0"])
