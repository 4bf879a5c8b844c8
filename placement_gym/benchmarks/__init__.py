"""Benchmarks of the package, one module per theme; ``placement-gym bench`` runs them
(`placement_gym.cli.bench_command` parses its options and prints).

* `cost_model`: the fast simulator, its batched call and the reference side by side (`run_bench`),
  its rows (`simulators`), one-op moves (`moves`), another checkout's simulator (`against`) and the
  developers' speed targets (`targets`);
* `onnx_import`: the ONNX import's scaling on synthetic chains (`run_import_bench`);
* `startup`: how long a user waits for a command, cold and warm (`run_startup_bench`);
* `machine`, `timing` and `rows`: what every figure depends on, the timing every benchmark shares, and
  the base of their rows.
"""
