"""Real-hardware mode: run a placement of a task's op graph on torch devices and time it.

* `placement_gym.real.program`: a graph's ops as torch calls, built from its ONNX model (seeded
  weights and data), and `run_reference_forward` (the whole graph op by op on the CPU). A model
  with an op the executor cannot run raises `UnsupportedOpError` (one line naming the op and node).
* `placement_gym.real.executor`: `Executor` (run a program under a placement: forward, or forward +
  backward + the task's optimizer update; micro-batches, recomputation, bf16/fp16), `RealResult`;
  `placement_gym.real.step_plan` the order and units each device runs, `placement_gym.real.attention`
  fused attention, `placement_gym.real.segments` compiled units, `placement_gym.real.overhead` the
  executor against torch running the same graph (`placement-gym bench --real-overhead`).
* `placement_gym.real.profile`: measured profiles (format, key, cache); `placement_gym.real.measure`
  measures them, `placement_gym.real.profiled` builds `profiled_task` from one.
* `placement_gym.real.optimizers`: the Adam, momentum and SGD updates a real train step runs (torch's
  optimizers, fused where torch can; the maths written out as the reference).
* `placement_gym.real.devices`: `virtual_cpus` and `intra_op_threads` (one intra-op thread per virtual
  CPU device); the clusters of this machine's devices come from `placement_gym.cluster.machine`:
  `virtual_cpu_cluster` (the CPU split into virtual devices, runs everywhere), `local_cluster` (CPU +
  CUDA devices, measured), `get_real_cluster` ("local", "cpu<N>").
* `placement_gym.real.ops`: the ONNX-op -> torch-function table, and `unsupported_reason` (why an
  op type or attribute combination cannot run).

torch is an optional extra: importing this package does not import it; the submodules that run
ops do (executor and ops import it when used).
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "Executor": "placement_gym.real.executor",
    "RealResult": "placement_gym.real.executor",
    "run_reference_forward": "placement_gym.real.program",
    "UnsupportedOpError": "placement_gym.real.program",
    "virtual_cpu_cluster": "placement_gym.cluster.machine",
    "local_cluster": "placement_gym.cluster.machine",
    "get_real_cluster": "placement_gym.cluster.machine",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Lazy exports, so that ``import placement_gym.real`` stays cheap and torch-free."""
    if name in _EXPORTS:
        import importlib

        if _EXPORTS[name].startswith("placement_gym.real."):
            from placement_gym.common.extras import require

            require("torch", f"placement_gym.real.{name}")

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'placement_gym.real' has no attribute {name!r}")
