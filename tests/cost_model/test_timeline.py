"""The schedule's Gantt chart: rows, image, PNG, and the missing-matplotlib message."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import numpy as np
import pytest

from placement_gym.cluster import PRESETS
from placement_gym.common.extras import install_command
from placement_gym.cost_model.result import Schedule
from placement_gym.cost_model.timeline import build_timeline_figure, draw_timeline, timeline_rows

pytest.importorskip("matplotlib")


def _task(n_ops: int, op_kind, cluster_name: str = "k80x2") -> SimpleNamespace:
    return SimpleNamespace(
        cluster=PRESETS[cluster_name](),
        id=f"toy/{cluster_name}/train",
        n_ops=n_ops,
        op_kind=np.asarray(op_kind, dtype=np.int8),
        op_names=tuple(f"op{i}" for i in range(n_ops)),
    )


def _schedule(op_device, op_start, op_finish, transfers=()) -> Schedule:
    """transfers: (tensor, src, dst, start, finish) tuples."""
    columns = list(zip(*transfers, strict=True)) if transfers else [(), (), (), (), ()]
    return Schedule(
        op_device=np.asarray(op_device, dtype=np.int32),
        op_start=np.asarray(op_start, dtype=np.float64),
        op_finish=np.asarray(op_finish, dtype=np.float64),
        transfer_tensor=np.asarray(columns[0], dtype=np.int32),
        transfer_src=np.asarray(columns[1], dtype=np.int32),
        transfer_dst=np.asarray(columns[2], dtype=np.int32),
        transfer_start=np.asarray(columns[3], dtype=np.float64),
        transfer_finish=np.asarray(columns[4], dtype=np.float64),
    )


def _toy():
    """Forward on gpu:0 and gpu:1, backward back on them, an update on cpu:0; tensors cross
    gpu:0 -> gpu:1 (twice: one link row) and gpu:1 -> gpu:0 (one more row)."""
    task = _task(5, [0, 0, 1, 1, 2])
    schedule = _schedule(
        op_device=[1, 2, 2, 1, 0],
        op_start=[0.0, 2e-3, 4e-3, 6e-3, 7e-3],
        op_finish=[1e-3, 3e-3, 5e-3, 6.5e-3, 8e-3],
        transfers=[(0, 1, 2, 1e-3, 2e-3), (3, 1, 2, 1.2e-3, 1.8e-3), (2, 2, 1, 5e-3, 6e-3)],
    )
    return task, schedule


def test_rows_are_every_device_then_each_used_link_once():
    task, schedule = _toy()
    rows = timeline_rows(task, schedule)
    assert [row.label for row in rows] == ["cpu:0", "gpu:0", "gpu:1", "gpu:0\u2192gpu:1", "gpu:1\u2192gpu:0"]
    assert [row.device for row in rows[:3]] == [0, 1, 2]
    assert [row.link for row in rows[3:]] == [(1, 2), (2, 1)]


def test_figure_has_one_labelled_row_per_device_and_used_link():
    task, schedule = _toy()
    fig = build_timeline_figure(task, schedule)
    ax = fig.axes[0]
    labels = [label.get_text() for label in ax.get_yticklabels()]
    assert len(labels) == task.cluster.n_devices + 2
    assert labels[:3] == list(task.cluster.device_names)
    # Title carries the runtime: the last finish, 8 ms.
    assert "8.000 ms" in ax.get_title() and task.id in ax.get_title()
    assert ax.get_xlabel() == "time (ms)"
    legend = [text.get_text() for text in ax.get_legend().get_texts()]
    assert legend == ["forward", "backward", "update", "transfer"]


def test_bars_are_grouped_not_one_artist_per_op():
    task = _task(3000, np.repeat([0, 1, 2], 1000))
    start = np.arange(3000) * 1e-5
    schedule = _schedule(np.arange(3000) % 3, start, start + 1e-5)
    fig = build_timeline_figure(task, schedule)
    # 3 device rows x 3 kinds x 2 shades at most.
    assert len(fig.axes[0].collections) <= 18
    bars = sum(len(collection.get_paths()) for collection in fig.axes[0].collections)
    assert bars == 3000


def test_image_shape_dtype_and_not_blank(tmp_path):
    task, schedule = _toy()
    path = tmp_path / "timeline.png"
    image = draw_timeline(task, schedule, path=path, title="toy")
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    assert image.shape[0] > 100 and image.shape[1] > 100
    # Not blank: several distinct colours, among them the forward blue family (blue channel dominant).
    assert len(np.unique(image.reshape(-1, 3), axis=0)) > 10
    assert np.any((image[..., 2].astype(int) - image[..., 0].astype(int)) > 80)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    from matplotlib.image import imread

    assert imread(path).shape[:2] == image.shape[:2]


def test_more_rows_make_a_taller_image():
    task, schedule = _toy()
    small = draw_timeline(task, schedule)
    big_task = _task(5, [0, 0, 1, 1, 2], cluster_name="k40x8")
    assert draw_timeline(big_task, schedule).shape[0] > small.shape[0]


def test_schedule_without_transfers_has_only_device_rows():
    task = _task(2, [0, 1])
    schedule = _schedule([0, 0], [0.0, 1e-3], [1e-3, 2e-3])
    assert len(timeline_rows(task, schedule)) == task.cluster.n_devices
    assert draw_timeline(task, schedule).shape[2] == 3


def test_mismatched_schedule_is_a_clear_error():
    task, schedule = _toy()
    task.n_ops = 4
    with pytest.raises(ValueError, match="op_device has 5 entries.*4 ops"):
        timeline_rows(task, schedule)
    task, _ = _toy()
    bad = _schedule([0, 0, 0, 0, 9], np.zeros(5), np.ones(5))
    with pytest.raises(ValueError, match="op_device.*outside 0..2"):
        draw_timeline(task, bad)


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    task, schedule = _toy()
    blocked = ("matplotlib", "matplotlib.figure", "matplotlib.backends.backend_agg", "matplotlib.patches")
    for module in blocked:
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match="needs matplotlib") as error:
        draw_timeline(task, schedule)
    assert str(error.value).endswith(install_command("viz"))
