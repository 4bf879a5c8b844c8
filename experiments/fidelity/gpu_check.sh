#!/usr/bin/env bash
# The cost model against measurement on one CUDA GPU, alone and beside the CPU, in under 10 minutes:
# the check of issue 27's item 8 for a session that is lent a GPU (never CI). From the repository root:
#
#   OUT=/some/folder bash experiments/fidelity/gpu_check.sh   # on the GPU machine
#   GPU_CHECK_DRY=1 bash experiments/fidelity/gpu_check.sh    # anywhere: the same steps on the CPU
#   GPU_CHECK_STEP_S=100 ...                                     # each profile or fidelity step's limit (150 s)
#
# Steps (each under its own time limit, a failed step reported and the next one run):
#   1. the machine: nvidia-smi, torch and CUDA versions;
#   2. hopper.json: the h100x8 preset's cpu:0 and gpu:0 (Hopper efficiencies, 989 TFLOP/s bf16) with the
#      H200's memory (141 GB) and bandwidth (4.8 TB/s, NVIDIA H200 datasheet), gpu:0 mapped to cuda:0;
#   3. fidelity on it for two bundled graphs (cifar10_resnet56 training, resnet50 inference): the analytical
#      model with the preset's figures (and the profiled one) against runs of the same placements,
#      single-GPU placements among them;
#   4. fidelity on `local` (cpu:0 and gpu:0 with measured figures): CPU + GPU placements;
#   5. h200.json (gpu:0 of hopper.json alone): the single-GPU placement of nine bundled graphs, most at larger batches,
#      where compute is a larger share of a step than at batch 8.
# Everything lands under $OUT (default /tmp/gpu_check): one JSON and one PNG per run, and summary.txt.
# On one H200 (16 CPU cores) steps 1-4 took 168 s and step 5 about 320 s, with GPU_CHECK_STEP_S=100; its
# figures are in experiments/fidelity/h200/ and docs/real_hardware.md. A dry run on the 2-core
# development VM runs the steps past their limits (both devices being the one loaded CPU) and goes on.
set -u
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PLACEMENT_GYM_CACHE="$OUT/cache" PLACEMENT_GYM_OUTPUT="$OUT"
DRY=${GPU_CHECK_DRY:-0}
LIMIT=${GPU_CHECK_STEP_S:-150}  # seconds per profile or fidelity step
GPU=cuda:0 LOCAL=local
[ "$DRY" = 1 ] && GPU=cpu LOCAL=cpu2
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"

step() {  # step SECONDS NAME COMMAND...: run with a limit, keep its output, note how it ended
    local limit=$1 name=$2
    shift 2
    local started=$SECONDS
    # -k: a step stuck in a driver call past its limit is killed 10 s later
    timeout -k 10 "$limit" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    local code=$?
    echo "$name: exit $code ($((SECONDS - started)) s)" | tee -a "$SUMMARY"
}

step 60 machine python -c "
import platform, torch
print(platform.platform(), platform.processor(), 'torch', torch.__version__, 'cuda', torch.version.cuda)
print('devices:', [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])"
command -v nvidia-smi > /dev/null && nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1

python - "$OUT/hopper.json" <<'EOF'
import json, sys
from placement_gym.cluster.load import cluster_to_dict
from placement_gym.cluster.presets import PRESETS

data = cluster_to_dict(PRESETS["h100x8"]())
keep = {"cpu:0", "gpu:0"}
data["devices"] = [d for d in data["devices"] if d["name"] in keep]
for device in data["devices"]:
    if device["name"] == "gpu:0":
        device["memory"], device["memory_bandwidth"] = 141e9, 4.8e12
data["links"] = [{k: v for k, v in link.items() if k != "segments"} for link in data["links"]
                 if link["src"] in keep and link["dst"] in keep]
data.pop("hosts", None)
for device in data["devices"]:
    device.pop("host", None)
data["name"] = "hopper-h200"
data["description"] = "cpu:0 and gpu:0 of the h100x8 preset, the GPU with the H200's memory and bandwidth"
json.dump(data, open(sys.argv[1], "w"), indent=1)
data["devices"] = [d for d in data["devices"] if d["name"] == "gpu:0"]
data["links"] = []
data["name"], data["description"] = "h200", "gpu:0 of hopper-h200 alone"
json.dump(data, open(sys.argv[1].replace("hopper.json", "h200.json"), "w"), indent=1)
EOF
echo "hopper.json, h200.json: exit $?" | tee -a "$SUMMARY"

for run in "cifar10_resnet56 train_step 8" "resnet50 inference 8"; do
    set -- $run
    # The profile first, with fewer timed runs than fidelity's default: its CPU half is the slow part.
    step "$LIMIT" "profile-$1" placement-gym profile --graph "$1" --batch "$3" --cluster "$OUT/hopper.json" \
        --devices "cpu:0=cpu,gpu:0=$GPU" --repeats 3
    step "$LIMIT" "hopper-$1-$2" placement-gym fidelity --graph "$1" --objective "$2" --batch "$3" \
        --cluster "$OUT/hopper.json" --devices "cpu:0=cpu,gpu:0=$GPU" --samples 12 --repeats 4 --json \
        --out "$OUT/hopper-$1-$2.png"
done
step "$LIMIT" local-cifar10_resnet56 placement-gym fidelity --graph cifar10_resnet56 --batch 8 --cluster "$LOCAL" \
    --samples 12 --repeats 4 --json --out "$OUT/local-cifar10_resnet56.png"

for run in "resnet50 inference 32" "resnet50 train_step 8" "resnet50 train_step 32" "inception_v3 train_step 32" \
           "bert_base inference 16" "bert_base train_step 16" "cifar10_cnn train_step 128" "resnet152 inference 32" \
           "llama2_7b inference 1" "bert_large inference 16" "rnnlm inference 64" "gnmt2 inference 128"; do
    set -- $run
    step "$LIMIT" "single-$1-$2-$3" placement-gym fidelity --graph "$1" --objective "$2" --batch "$3" \
        --cluster "$OUT/h200.json" --devices "gpu:0=$GPU" --samples 1 --repeats 5 --json --out "$OUT/single-$1-$2-$3.png"
done

python - "$OUT" <<'EOF' | tee -a "$SUMMARY"
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.out")):
    try:
        report = json.loads(path.read_text())
    except ValueError:
        continue
    figures = {k: v for k, v in report.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    print(path.stem, json.dumps(figures, sort_keys=True))
EOF
