#!/usr/bin/env bash
# The real executor and the cost model against one CUDA GPU, in one call of at most 8 minutes: the check
# of issue 67's item 4 (before it, issue 27's item 8) for a session that is lent a GPU (never CI). From
# the repository root:
#
#   OUT=/some/folder bash experiments/fidelity/gpu_check.sh   # on the GPU machine
#   GPU_CHECK_DRY=1 bash experiments/fidelity/gpu_check.sh    # anywhere: the same steps on the CPU
#   GPU_CHECK_TOTAL_S=450 GPU_CHECK_STEP_S=75 ...              # the whole run's limit, a fidelity step's
#
# Steps, most wanted first (each under its own time limit, never past the whole run's: a step the time
# left cannot hold is skipped, a failed step reported and the next one run):
#   1. the machine: nvidia-smi, torch and CUDA versions, the GPU's name;
#   2. overhead: `placement-gym bench --real-overhead --device cuda --check` for the tiny chain (1,000
#      launch-bound ops: the executor's own cost per op), resnet50 inference at batch 32 and bert_base
#      inference at batch 16: the executor's one-device step against torch eager running the same graph
#      (issue 67's target on a GPU: ResNet-50 within 1.3x);
#   3. llama: experiments/fidelity/llama_bf16.py, a Llama of 1.1B parameters (TinyLlama's configuration)
#      trained in bf16 with Adam on the GPU, batch 4 x 512 tokens: measured step and MFU beside the cost
#      model's for the same single-GPU placement;
#   4. fidelity: hopper.json (the h100x8 preset's cpu:0 and gpu:0; on an H200 its memory, 141 GB, and
#      bandwidth, 4.8 TB/s) for a CNN (resnet50 inference, batch 8) and a transformer (bert_base
#      inference, batch 8): the analytical and profiled models against runs of 8 placements (CPU, GPU
#      and split), Spearman and MAPE; then gpu.json (its gpu:0 alone) for the single-GPU step of resnet50
#      and bert_base, inference and training, and cifar10_resnet56 training on hopper.json if time is left;
#   5. overhead-compiled: step 2 again with both sides compiled: the direct forward by torch.compile
#      (`--compiled`) and the executor's units (`--executor-compile reduce-overhead`: inductor and CUDA
#      graphs), the compiles taking most of its time.
# Everything lands under $OUT (default /tmp/gpu_check): one .out (stdout: JSON) and .err per step, the
# PNGs, and summary.txt, which ends with the figures of every step. Expected on one H100 (16 cores): about
# 6-7 minutes (step 2 about 30 s, 3 about 60 s, 4 about 3.5 minutes, 5 about 90 s); on an H200 likewise.
# Before issue 67 this script ran fidelity alone (experiments/fidelity/h200/, docs/real_hardware.md).
# A dry run on the 2-core development VM runs every step on the CPU with small sizes (llama: one layer of
# a tiny Llama); steps may hit their limits there, and the script goes on.
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PLACEMENT_GYM_CACHE="$OUT/cache" PLACEMENT_GYM_OUTPUT="$OUT" PYTHONUNBUFFERED=1
DRY=${GPU_CHECK_DRY:-0}
TOTAL=${GPU_CHECK_TOTAL_S:-450}  # the whole run, seconds
LIMIT=${GPU_CHECK_STEP_S:-75}    # seconds per profile or fidelity step
PY=${PYTHON:-python}
command -v "$PY" > /dev/null || PY=python3
if command -v placement-gym > /dev/null; then PG=(placement-gym); else PG=("$PY" -m placement_gym); fi
GPU=cuda:0 DEVICE=cuda LLAMA=(--device cuda) OVERHEAD_GRAPHS=tiny-chain:4,resnet50:32,bert_base:16 FID_BATCH=8
if [ "$DRY" = 1 ]; then
    GPU=cpu DEVICE=cpu LLAMA=(--device cpu --layers 1) OVERHEAD_GRAPHS=tiny-chain:4,resnet50:1,bert_base:1 FID_BATCH=1
fi
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
DEADLINE=$((SECONDS + TOTAL))

step() {  # step SECONDS NAME COMMAND...: run with a limit (cut to the time left), keep its output
    local limit=$1 name=$2
    shift 2
    local left=$((DEADLINE - SECONDS - 5))
    if [ "$left" -lt 20 ]; then
        echo "$name: skipped (${left} s left of the run's ${TOTAL} s)" | tee -a "$SUMMARY"
        return
    fi
    [ "$limit" -gt "$left" ] && limit=$left
    local started=$SECONDS
    # -k: a step stuck in a driver call past its limit is killed 10 s later
    timeout -k 10 "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    local code=$?
    local why=""
    [ "$code" = 124 ] || [ "$code" = 137 ] && why=", over its ${limit} s limit"
    echo "$name: exit $code ($((SECONDS - started)) s$why)" | tee -a "$SUMMARY"
}

# 1. The machine.
step 60 machine "$PY" -c "
import platform, torch
print(platform.platform(), platform.processor(), 'torch', torch.__version__, 'cuda', torch.version.cuda)
print('devices:', [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
command -v nvidia-smi > /dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

# 2. The executor's one-device step against torch eager (the JSON on stdout, the table's figures in it).
step 120 overhead "${PG[@]}" bench --real-overhead --device "$DEVICE" --graphs "$OVERHEAD_GRAPHS" \
    --objective inference --repeats 5 --json --check

# 3. A Llama of about 1B parameters trained in bf16 on the GPU.
step 180 llama "$PY" experiments/fidelity/llama_bf16.py "${LLAMA[@]}" --json "$OUT/llama.json"

# 4. The fidelity table: hopper.json (CPU + GPU placements) and gpu.json (the GPU alone).
"$PY" - "$OUT/hopper.json" <<'EOF'
import json, sys
from placement_gym.cluster.load import cluster_to_dict
from placement_gym.cluster.presets import PRESETS

name = ""
try:
    import torch
    name = torch.cuda.get_device_name(0) if torch.cuda.is_available() else ""
except ImportError:
    pass
data = cluster_to_dict(PRESETS["h100x8"]())
keep = {"cpu:0", "gpu:0"}
data["devices"] = [d for d in data["devices"] if d["name"] in keep]
for device in data["devices"]:
    if device["name"] == "gpu:0" and "H200" in name:  # NVIDIA H200 datasheet
        device["memory"], device["memory_bandwidth"] = 141e9, 4.8e12
data["links"] = [{k: v for k, v in link.items() if k != "segments"} for link in data["links"]
                 if link["src"] in keep and link["dst"] in keep]
data.pop("hosts", None)
for device in data["devices"]:
    device.pop("host", None)
data["name"] = "hopper"
data["description"] = f"cpu:0 and gpu:0 of the h100x8 preset ({name or 'no GPU'} here)"
json.dump(data, open(sys.argv[1], "w"), indent=1)
data["devices"] = [d for d in data["devices"] if d["name"] == "gpu:0"]
data["links"] = []
data["name"], data["description"] = "gpu", "gpu:0 of hopper.json alone"
json.dump(data, open(sys.argv[1].replace("hopper.json", "gpu.json"), "w"), indent=1)
EOF
echo "hopper.json, gpu.json: exit $?" | tee -a "$SUMMARY"

for run in "resnet50 inference" "bert_base inference"; do
    set -- $run
    # The profile first, with fewer timed runs than fidelity's default: its CPU half is the slow part.
    step "$LIMIT" "profile-$1" "${PG[@]}" profile --graph "$1" --batch "$FID_BATCH" --cluster "$OUT/hopper.json" \
        --devices "cpu:0=cpu,gpu:0=$GPU" --repeats 3
    step "$LIMIT" "hopper-$1-$2" "${PG[@]}" fidelity --graph "$1" --objective "$2" --batch "$FID_BATCH" \
        --cluster "$OUT/hopper.json" --devices "cpu:0=cpu,gpu:0=$GPU" --samples 8 --repeats 3 --json \
        --out "$OUT/hopper-$1-$2.png"
done
for run in "resnet50 inference 32" "bert_base inference 16" "resnet50 train_step 32" "bert_base train_step 16"; do
    set -- $run
    batch=$3
    [ "$DRY" = 1 ] && batch=1
    step "$LIMIT" "single-$1-$2-$3" "${PG[@]}" fidelity --graph "$1" --objective "$2" --batch "$batch" \
        --cluster "$OUT/gpu.json" --devices "gpu:0=$GPU" --samples 1 --repeats 5 --json --out "$OUT/single-$1-$2-$3.png"
done
step "$LIMIT" hopper-cifar10_resnet56-train_step "${PG[@]}" fidelity --graph cifar10_resnet56 --objective train_step \
    --batch "$FID_BATCH" --cluster "$OUT/hopper.json" --devices "cpu:0=cpu,gpu:0=$GPU" --samples 8 --repeats 3 \
    --json --out "$OUT/hopper-cifar10_resnet56-train_step.png"

# 5. Step 2 with both compiled: the direct forward by torch.compile, the executor's units likewise, on a
#    GPU captured as CUDA graphs (inference rows only).
COMPILE_MODE=reduce-overhead
[ "$DRY" = 1 ] && COMPILE_MODE=inductor
step 200 overhead-compiled "${PG[@]}" bench --real-overhead --device "$DEVICE" --graphs "$OVERHEAD_GRAPHS" \
    --objective inference --repeats 5 --compiled --executor-compile "$COMPILE_MODE" --json

echo "whole run: $SECONDS s (limit $TOTAL s)" | tee -a "$SUMMARY"
[ -f "$OUT/overhead.err" ] && grep -E " (PASS|FAIL|-)$" "$OUT/overhead.err" | sed 's/^ */overhead target: /' | tee -a "$SUMMARY"
"$PY" - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import json, pathlib, sys

singles = []
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.out")):
    try:
        report = json.loads(path.read_text())
    except ValueError:
        continue
    if not isinstance(report, dict):
        continue
    if "rows" in report:  # bench --real-overhead
        for row in report["rows"]:
            figures = {k: row[k] for k in ("executor_ms", "torch_ms", "overhead_us_per_op", "vs_torch",
                                           "compiled_ms", "vs_compiled", "note") if row.get(k) not in (None, "")}
            print(path.stem, row["graph"], row["objective"], row["batch"], row["device"], json.dumps(figures))
        continue
    if "measured_mfu" in report:  # llama_bf16.py
        keys = ("parameters", "executor_dtype", "step_s", "measured_mfu", "model_step_s", "model_mfu",
                "model_feasible", "measured_peak_memory_bytes", "model_peak_memory_bytes", "error")
        print(path.stem, json.dumps({k: report.get(k) for k in keys}))
        continue
    figures = {k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    print(path.stem, json.dumps(figures, sort_keys=True))
    if path.stem.startswith("single-") and report.get("placements"):
        singles.append((path.stem, report["placements"][0]))
if singles:
    print("single-GPU steps (ms): run, measured, analytical, profiled")
    errors = {"analytical": [], "profiled": []}
    for name, p in singles:
        if p.get("measured_s") is None:
            continue
        print(f"  {name}: {p['measured_s'] * 1e3:.1f} {p['analytical_s'] * 1e3:.1f} {p['profiled_s'] * 1e3:.1f}")
        for model in errors:
            errors[model].append(abs(p[f"{model}_s"] - p["measured_s"]) / p["measured_s"])
    for model, values in errors.items():
        if values:
            print(f"  MAPE {model}: {100 * sum(values) / len(values):.1f}% over {len(values)} runs")
EOF
