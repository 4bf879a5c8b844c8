"""The cluster presets are data files (placement_gym/cluster/presets/<name>.json) read by the loader that
reads a user's cluster file: each gives its cluster field for field and bit for bit, the files carry
the sources of their figures, a new file is a new preset, and the wheel ships them."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from paths import ROOT

from placement_gym.cluster import PRESETS, Cluster, ClusterError, cluster_to_dict, load_cluster
from placement_gym.cluster import load as load_module
from placement_gym.cluster import presets as presets_module
from placement_gym.cluster.load import PRESET_DIRECTORY, is_named_cluster, load_preset, preset_names
from placement_gym.graph.synthetic import layered_graph
from placement_gym.task.compiled import make_task


def field_digest(cluster: Cluster) -> str:
    """sha256 of every field of ``cluster``, in the dataclass's order: each array's dtype, shape and
    bytes, every other value's type and repr (None included). Equal digests: equal clusters, bit for bit."""
    digest = hashlib.sha256()
    for field in dataclasses.fields(cluster):
        value = getattr(cluster, field.name)
        digest.update(field.name.encode() + b"=")
        if isinstance(value, np.ndarray):
            digest.update(f"ndarray {value.dtype.str} {value.shape} ".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(f"{type(value).__name__} {value!r}".encode())
        digest.update(b";")
    return digest.hexdigest()


# Each preset as the Python code that assembled it gave it, before its figures moved to a data file:
# (`Cluster.content_sha256`, which task ids and leaderboard fingerprints derive from; `field_digest`,
# which adds the name, the description and each array's dtype). Pinned so that no edit of a file, or of
# the loader, changes a preset unnoticed: a preset that must change gets a new name.
PINNED = {
    "k80x2": ("5f2f783cf1c8f934814f319f94d31d33f513c4eb2ada3df4c377d96ff71b85c8",
              "bf91208466efa3e96609ea3f780965081450c55316fd344f0781ae5a498c3f3f"),
    "k80x4": ("2e977c7e46e44ed7e3e9d6262f46f3a0c27a2ba3b5fe2b44a2d53c077f07f686",
              "b3475c8b385c186817f0381f909569b11e19cd2a56388670374e4ed2c4beb081"),
    "k40x2": ("27fb845349c5b9910b3d2b5b56e76925c45fe6cf20bd93710ed4223edaf4d787",
              "b887c85b01f6c3e04b38eaa8da9c10ac26e6f4e4e7f6be5ccd604224514ab964"),
    "k40x4": ("3b61f7dcf191a61d5dd967eebc8dc6bb20fc4d871f2198d2380f742d59d18e59",
              "2fb9c3ae8c502c6ab5aa50bf3fea69a8e25e2b813ae5a41d3ff98e7167b4cef0"),
    "k40x8": ("33dab095c0f6af0aa96a3a515265be97a9a43727ccea1333327df7b2544f4db9",
              "80608d0b7a6553554edc969b49e579876d50dfc222b076ed35fd7aa9a9c3b430"),
    "dgx1-p100": ("3e7812973f76efd7a722bdcd826d5a25597f5c60de8470c1d8fa7bbd05667fb2",
                  "832f19cfd7f048c792a25dff95eac1519e0e1d3d3bc507d86c03917e967e7c02"),
    "baechi-rtx2080x4": ("c81a22bfb9b9a17c1b1da5d194eacfe6487f802117c26a332312f06246c50ddc",
                         "9b11b2fe7e7a14856670f93a8871afb30bd3a1b29b0272a23e9ebb808b3ce32f"),
    "p100x4": ("76d3d3a026566e1910eb27285af53e1af5b5df70c01ab66d93e064ade5f53cd5",
               "7eb81743fc5f8c594f88db16f323418f6ca6ed2999f346a664551f7a9e2c7779"),
    "v100x8": ("ed18cb96ed7c71e02161ae44303d6da61b8c27404d6aee6ccaaa6fd4e508b3b9",
               "b060c2ec638b42b36bf88c3edbc5d764ae0936ef146ab206b44754c6c29ea775"),
    "h100x8": ("70029c16793ad4abc3dd1ff00622f84ef1f49d6195ac80153cae1ae4d00fd122",
               "6cfc80315f792322d35c887570227a0b0b3f3f1b1dce95c74a7c4c2ba40d0e61"),
    "cpu-igpu": ("7126d51683466b1b54c01382154fc2f2b4bc48dd7bbcbd4ab0cb47f7c71c865c",
                 "70765367c6972bdb8287edb020ce0af38bbe75b4b877a400bd688a457e00c699"),
    "dgx-a100": ("a38e5a7bb89f39153059cf050072d6ab2024e1f311582434899d391684cba174",
                 "fce6980d4a16290f60b0fb66086b6dffad89335ca84a8cc524affefbbb51e316"),
    "dgx-h100x2": ("8c77fdf5685988825a909ad5027bb22cd25f28761f3d553870758f207c53e59d",
                   "4d82d37f1e50a2e3af18ce2a31a62fd10dac2388dc6b3e97bea3ecdd2f06946d"),
    "dgx-h100x4": ("5d53b08c1da0340e4a736d08d4c5b465ea150475ea74ef762bf193544d9084b1",
                   "3cf91ac2ccd8d5f446413bab41d3c3cc3c761d362b132468c7834e280c2aeb6d"),
    "dgx-h100x8": ("4bc5a4feff1a5819776285cb70689b14971dec75e295b5f5dbb9ffdd229dc6c6",
                   "09b7b5a5aa35634c1f99cf050cd2548af914be01a2c08adb964a874d4480b121"),
    "h100-a100": ("04f1cb5092da1a4f9764078705ce36b5ad81c65179318bc1e3bf3856f366ed93",
                  "f18c71b53e786ff8fb3d87ceab4d688db06f354890fd722f148cea06c3e1ff24"),
}


def test_field_digest_sees_every_field_and_dtype():
    cluster = PRESETS["k80x2"]()
    digest = field_digest(cluster)
    assert field_digest(dataclasses.replace(cluster)) == digest
    changed = [
        dataclasses.replace(cluster, description=cluster.description + "."),
        dataclasses.replace(cluster, name="other"),
        dataclasses.replace(cluster, host_dispatch_threads=(9,)),
        dataclasses.replace(cluster, peak_flops=np.nextafter(cluster.peak_flops, np.inf)),
        dataclasses.replace(cluster, link_segments=cluster.link_segments.astype(np.int32)[:, :, :1]),
    ]
    assert len({field_digest(other) for other in changed} | {digest}) == len(changed) + 1


def test_every_pinned_preset_is_still_a_preset():
    assert set(PINNED) <= set(PRESETS)


@pytest.mark.parametrize("name", sorted(PINNED))
def test_preset_is_its_pinned_cluster_bit_for_bit(name):
    cluster = PRESETS[name]()
    content, fields = PINNED[name]
    assert cluster.content_sha256 == content
    assert field_digest(cluster) == fields
    # A second call (a copy of the first read) and the file read as a user's file give the same.
    for again in (load_cluster(name), load_cluster(PRESET_DIRECTORY / f"{name}.json"), PRESETS[name]()):
        assert again.content_sha256 == content and field_digest(again) == fields
    # Every array is read-only and of the dtype the simulators take.
    for field in dataclasses.fields(cluster):
        value = getattr(cluster, field.name)
        if isinstance(value, np.ndarray):
            assert not value.flags.writeable, field.name
            assert value.dtype in (np.float64, np.int64), field.name
    assert is_named_cluster(cluster)


def test_each_call_gets_arrays_of_its_own():
    first = PRESETS["k80x2"]()
    first.link_latency.setflags(write=True)  # what a hostile agent could do to its task's cluster
    first.link_latency[:] = 1.0
    assert field_digest(PRESETS["k80x2"]()) == PINNED["k80x2"][1]


def _covered(label: str) -> set[str]:
    """The device names a sources key speaks of: ``cpu:0``, or a range such as ``gpu:0..7``."""
    match = re.fullmatch(r"(\w+):(\d+)(?:\.\.(\d+))?", label)
    if match is None:
        return set()
    prefix, first, last = match.group(1), int(match.group(2)), int(match.group(3) or match.group(2))
    return {f"{prefix}:{k}" for k in range(first, last + 1)}


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_file_gives_the_sources_of_its_figures(name):
    data = json.loads((PRESET_DIRECTORY / f"{name}.json").read_text(encoding="utf-8"))
    assert data["name"] == name
    sources = data["sources"]
    # Every device is spoken of, and where the links, the per-op overhead, the efficiencies, the
    # executor's costs and the shared segments come from.
    covered = set().union(*(_covered(label) for label in sources))
    assert covered == {device["name"] for device in data["devices"]}
    assert {"links", "launch_overhead", "efficiency", "executor", "segments"} <= set(sources)
    assert all(len(note) >= 40 for note in sources.values())
    # A GPU names its calibrated architecture; its efficiencies come from there, not from the file.
    for device in data["devices"]:
        assert ("architecture" in device) == (device["kind"] == "gpu"), device["name"]
        assert "efficiency" not in device and "tensor_efficiency" not in device


def test_presets_are_the_files_in_natural_order():
    files = sorted(path.stem for path in PRESET_DIRECTORY.glob("*.json"))
    assert sorted(preset_names()) == files == sorted(PRESETS)
    assert list(PRESETS) == list(preset_names())
    assert preset_names().index("k40x2") < preset_names().index("k40x8")


def test_a_new_file_is_a_new_preset(tmp_path, monkeypatch):
    # A copy of the presets' folder with one more file: a toy cluster written as a user would write it.
    directory = tmp_path / "presets"
    shutil.copytree(PRESET_DIRECTORY, directory, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    toy = {"name": "toy-pair", "description": "two GPUs on a bus",
           "sources": {"gpu:0..1": "invented for this test", "links": "invented"},
           "devices": [{"name": f"gpu:{k}", "kind": "gpu", "architecture": "volta", "peak_flops": 1e13,
                        "memory_bandwidth": 5e11, "memory": 1.6e10, "launch_overhead": 5e-6}
                       for k in range(2)],
           "default_link": {"bandwidth": 1e10, "latency": 1e-5}}
    (directory / "toy-pair.json").write_text(json.dumps(toy))
    monkeypatch.setattr(load_module, "PRESET_DIRECTORY", directory)
    assert "toy-pair" in preset_names()
    cluster = load_cluster("toy-pair")
    assert cluster.device_names == ("gpu:0", "gpu:1") and is_named_cluster(cluster)
    # Task ids name it plainly, as every preset; a changed figure makes it another cluster.
    graph = layered_graph(20)
    assert make_task(graph, cluster, "inference").id.split("/")[1] == "toy-pair"
    changed = dataclasses.replace(cluster, peak_flops=cluster.peak_flops * 2)
    assert not is_named_cluster(changed)
    assert make_task(graph, changed, "inference").id.split("/")[1].startswith("toy-pair@")
    try:
        assert "toy-pair" in importlib.reload(presets_module).PRESETS
    finally:
        monkeypatch.undo()
        importlib.reload(presets_module)
    assert "toy-pair" not in preset_names()


def test_a_preset_file_must_name_its_cluster_after_itself(tmp_path, monkeypatch):
    directory = tmp_path / "presets"
    directory.mkdir()
    data = cluster_to_dict(PRESETS["k80x2"]())
    (directory / "k80x2-copy.json").write_text(json.dumps(data))
    monkeypatch.setattr(load_module, "PRESET_DIRECTORY", directory)
    with pytest.raises(ClusterError, match="k80x2-copy.*stem"):
        load_preset("k80x2-copy")
    with pytest.raises(ClusterError, match="unknown cluster preset 'k80x2'"):
        load_preset("k80x2")


def test_a_preset_written_by_cluster_to_dict_is_the_preset(tmp_path, monkeypatch):
    # The way to write a large preset: build the cluster in Python, write it with cluster_to_dict.
    directory = tmp_path / "presets"
    directory.mkdir()
    for name in ("k80x4", "dgx-h100x2"):
        (directory / f"{name}.json").write_text(json.dumps(cluster_to_dict(PRESETS[name]())))
    monkeypatch.setattr(load_module, "PRESET_DIRECTORY", directory)
    for name in ("k80x4", "dgx-h100x2"):
        assert field_digest(load_preset(name)) == PINNED[name][1]


def test_the_preset_functions_of_python_names_still_work():
    assert field_digest(presets_module.k80x2()) == PINNED["k80x2"][1]
    assert field_digest(presets_module.dgx_h100x2()) == PINNED["dgx-h100x2"][1]
    with pytest.raises(AttributeError):
        presets_module.k80x3  # noqa: B018


def _covers(pattern: str, relative: Path) -> bool:
    """Whether hatch's ``packages``/``include`` entry ``pattern`` (a folder, ``/`` anchoring it at the
    root) takes in every file under ``relative``."""
    return Path(pattern.strip("/")).parts == relative.parts[: len(Path(pattern.strip("/")).parts)]


def test_the_wheel_and_the_sdist_ship_the_preset_files():
    # hatch's wheel and sdist take every file under a folder they include (not only .py), except what
    # .gitignore or an exclude pattern leaves out.
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    build = config["tool"]["hatch"]["build"]
    relative = PRESET_DIRECTORY.relative_to(ROOT)
    for target in ("wheel", "sdist"):
        section = build["targets"][target]
        entries = [*section.get("packages", []), *section.get("include", [])]
        assert any(_covers(entry, relative) for entry in entries), (target, entries)
        assert "only-include" not in section, target
        assert not section.get("exclude"), f"{target}: an exclude pattern: does it leave the presets in?"
    assert not build.get("exclude") and "only-include" not in build
    files = sorted(PRESET_DIRECTORY.glob("*.json"))
    assert len(files) == len(PRESETS)
    git = shutil.which("git")
    if git is not None and (ROOT / ".git").exists():
        ignored = subprocess.run([git, "check-ignore", *map(str, files)], cwd=ROOT, capture_output=True,
                                 text=True, check=False)
        assert ignored.stdout == "", f"gitignored, so left out of the wheel: {ignored.stdout}"
