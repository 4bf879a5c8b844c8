"""Issue 13, point 6: `fidelity` on real CUDA devices (cpu + cuda:0, and the local cluster: the CPU
and every GPU). Marked ``cuda`` and skipped where torch sees no CUDA device (CI never has one), so
these run only on a machine with a GPU: ``pytest -m cuda tests/real/test_fidelity_cuda.py``."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from placement_gym.cli import main  # noqa: E402

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


def _report(argv: list[str], capsys, tmp_path) -> dict:
    assert main(["fidelity", "--graph", "cifar10_cnn", "--batch", "8", "--samples", "6", "--repeats", "1",
                 "--out", str(tmp_path / "fidelity.png"), "--json", *argv]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.skipif(torch.cuda.device_count() > 1,
                    reason="the local cluster holds every GPU, not cpu + cuda:0 alone")
def test_fidelity_on_cpu_and_cuda0_reports_both_statistics(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    result = _report(["--cluster", "local", "--devices", "cpu:0=cpu,gpu:0=cuda:0"], capsys, tmp_path)
    _check(result)


def test_fidelity_on_all_local_gpus_reports_both_statistics(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PLACEMENT_GYM_OUTPUT", str(tmp_path))
    _check(_report(["--cluster", "local"], capsys, tmp_path))


def _check(result: dict) -> None:
    for key in ("spearman_profiled", "spearman_analytical"):
        assert result[key] is None or -1.0 <= result[key] <= 1.0
    for key in ("mape_profiled", "mape_analytical"):
        assert result[key] >= 0.0
    assert all(row["measured_s"] > 0 for row in result["placements"])
