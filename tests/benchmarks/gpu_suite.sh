#!/usr/bin/env bash
# The GPU suite: every GPU figure the project needs, each beside its reference in the same run, in one lease
# (< 8 minutes of wall time on an H200-class GPU).
#
#     bash tests/benchmarks/gpu_suite.sh [OUT_DIR]        (default OUT_DIR: gpu_suite_out)
#     SMOKE=1 DEVICE=cpu bash tests/benchmarks/gpu_suite.sh /tmp/out   (tiny models: checks the suite runs anywhere)
#
# Stages (each with its own time limit, capped by what is left of BUDGET seconds for the whole suite, default 540 —
# a lease runs one command for at most 600 s; a failed, timed-out or skipped stage is recorded and the suite goes on;
# gpu_suite.json is rewritten after every stage):
#   predict   ViT-B/16 and ViT-L/16, fp32 and bf16: batch 1 latency (CUDA graphs on and off) and batch 256
#             throughput, engine vs bare timm
#   explain   ViT-B/16 and ViT-L/14 at 518 (DINOv2 shape): analyses vs the bare fused forward, peak GPU memory;
#             peak extra host memory of the analyses on ViT-L/14 @ 518 (goal ≤ 1.5 GB)
#   finetune  ViT-B/16 shape, 2,000 generated 500×375 JPEGs, bf16: ceiling / timm-style DataLoader / engine epoch 1 /
#             epochs ≥ 2 (goals: ≥ 0.9× ceiling, ≥ 1.7× the DataLoader)
#   memory    the memory plan before Start vs torch.cuda.max_memory_allocated of two real steps (bf16 autocast):
#             ViT-L/16 full + checkpointing and LoRA, ViT-H/14 LoRA and full + checkpointing (goal: within 15 %)
#   switches  channels_last, fused AdamW and torch.compile each on the ViT-B training step vs the plain step (which
#             to make defaults: kept only where they win)
#   folder    folder classification: GPU JPEG decode vs PIL threads vs the bare model on pre-decoded tensors, and the
#             two paths' top-1 agreement and max |Δ logit| (goal: ≥ 0.9× bare)
#   play      play mode per frame (prediction + rollout + annotated picture) for ViT-S/16 and ViT-B/16 vs the bare
#             forward (goal ≥ 25 frames/s with rollout)
#   concepts  the SAE on the GPU: tokens/s collected and trained on the 1,797 digits (demo model) and 400 photos
#             (ViT-S/16), beside the bare forward and overcomplete's training where installed
#   tests     the CUDA-only tests (nvJPEG decode and the GPU-built training cache vs CPU, GPU augmentation vs the
#             per-image CPU path, CUDA graphs vs eager, pinned copies)
# Writes OUT_DIR/gpu_suite.json (every stage: command, exit code, seconds, its whole output) and OUT_DIR/gpu_suite.log
# (the readable tables, also printed) — nothing else, as a lease brings back at most 8 files. Needs a Python with torch (CUDA) and timm; everything else it imports is in this
# repository (the benchmarks put the repo root on sys.path; nothing is downloaded — models use random weights).
set -u
cd "$(dirname "$0")/../.."
OUT=${1:-gpu_suite_out}
mkdir -p "$OUT"
# OUT keeps two files (a lease brings back at most 8): gpu_suite.json and gpu_suite.log; the per-stage logs and the
# caches live in a scratch folder
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

PY=${PYTHON:-}
if [ -z "$PY" ]; then
  for candidate in .venv/bin/python python3 python; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import torch, timm" >/dev/null 2>&1; then
      PY=$candidate
      break
    fi
  done
fi
if [ -z "$PY" ]; then
  echo "gpu_suite: no Python with torch and timm found (set PYTHON=...)" >&2
  exit 2
fi
"$PY" - <<'EOF' | tee "$WORK/environment.log" "$OUT/gpu_suite.log"
import platform, torch
from importlib.metadata import version  # timm's, without importing it (torchvision and dynamo: ~2 s of CPU)
print(f"python {platform.python_version()}, torch {torch.__version__}, timm {version('timm')}, "
      f"CUDA available {torch.cuda.is_available()}")
if torch.cuda.is_available():
    p = torch.cuda.get_device_properties(0)
    print(f"GPU {p.name}, {p.total_memory / 2**30:.0f} GiB, bf16 {torch.cuda.is_bf16_supported()}")
EOF

export OMP_NUM_THREADS=${OMP_NUM_THREADS:-8}
export VITSTUDIO_CACHE_DIR="$WORK/cache"
mkdir -p "$WORK/tmp"
export TMPDIR="$WORK/tmp"  # the benchmarks' generated JPEG folders go with the scratch folder
export HF_HUB_OFFLINE=1
STAGES=()
SUITE_START=$(date +%s)
BUDGET=${BUDGET:-540}  # seconds for all stages: a lease's command may run 600 s; stages that no longer fit are skipped

write_json() {  # after every stage, so a run cut short still leaves the stages it finished
  printf '%s\n' "${STAGES[@]}" >"$WORK/stages.txt"
  "$PY" - "$WORK" "$OUT" <<'EOF'
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
stages = {}
for line in (work / "stages.txt").read_text().splitlines():
    name, rc, seconds, command = line.split("|", 3)
    log = work / f"{name}.log"
    lines = log.read_text(errors="replace").splitlines() if log.exists() else ["skipped: over the suite's budget"]
    stages[name] = {"exit": int(rc), "seconds": int(seconds), "command": command,
                    "output": [l for l in lines if "Warning" not in l and "warnings.warn" not in l]}
env = (work / "environment.log").read_text().splitlines()
(out / "gpu_suite.json").write_text(json.dumps({"environment": env, "stages": stages}, indent=1))
EOF
}

stage() {  # stage NAME SECONDS ARGS...: run "$PY ARGS..." under a time limit (capped by what is left of BUDGET)
  local name=$1 limit=$2
  shift 2
  local left=$(( BUDGET - ($(date +%s) - SUITE_START) ))
  if [ "$left" -lt 20 ]; then
    echo "== $name skipped: ${left}s of the ${BUDGET}s budget left" | tee -a "$OUT/gpu_suite.log"
    STAGES+=("$name|125|0|$*")
    write_json
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local start rc
  start=$(date +%s)
  timeout "$limit" "$PY" "$@" >"$WORK/$name.log" 2>&1
  rc=$?
  local seconds=$(( $(date +%s) - start ))
  {
    echo "== $name (exit $rc, ${seconds}s)"
    grep -v -e "Warning" -e "warnings.warn" "$WORK/$name.log" | tail -n 25
  } | tee -a "$OUT/gpu_suite.log"
  STAGES+=("$name|$rc|$seconds|$*")
  write_json
}

DEVICE=${DEVICE:-cuda}
if [ "${SMOKE:-0}" = 1 ]; then  # a few seconds per stage on any machine: checks the suite itself, not speed
  B=custom:img=64,patch=16,width=64,depth=2,heads=2,classes=10; L=$B; L518=custom:img=56,patch=14,width=64,depth=2,heads=2
  B4=custom:img=64,patch=16,width=64,depth=2,heads=2,classes=4; N=64; BATCH=16; PREC=fp32; S=$B; H=$B
  CONCEPTS="--digits 3 --size 32 --k 4 --epochs 1"
else
  B=vit_base_patch16_224; L=vit_large_patch16_224; L518=vit_large_patch14_dinov2
  B4=custom:img=224,patch=16,width=768,depth=12,heads=12,classes=4; N=2000; BATCH=256; PREC=bf16
  S=vit_small_patch16_224; H=vit_huge_patch14_224; CONCEPTS=""
fi

# most telling first: under a short budget the last stages are the ones skipped
stage predict-vitb-bf16 75 tests/benchmarks/predict.py --model "$B" --device "$DEVICE" --batch "$BATCH" --precision bf16
stage predict-vitb-fp32 75 tests/benchmarks/predict.py --model "$B" --device "$DEVICE" --batch "$BATCH" --precision fp32 --no-pil
stage folder 75 tests/benchmarks/folder_decode.py --model "$B" --images "$N" --batch "$BATCH" --precision "$PREC" \
  --device "$DEVICE"
stage finetune 150 tests/benchmarks/finetune.py --model "$B4" --images "$N" --batch $(( BATCH / 2 )) \
  --precision "$PREC" --device "$DEVICE" --epochs 3
stage explain 150 tests/benchmarks/explain.py --device "$DEVICE" --model "$B" "$L518" --memory-model "$L518"
stage play 60 tests/benchmarks/play.py --device "$DEVICE" --models "$S" "$B" --frames 40
stage tests 60 -m pytest -q -p no:cacheprovider -p no:pytest-qt tests/core/test_tensor_decode.py tests/core/test_cuda_graphs.py \
  tests/core/test_gpu_defaults.py tests/core/test_fast_data.py -k "gpu or pin" -s
stage memory 120 tests/benchmarks/memory_plan.py --device "$DEVICE" --no-counts --cases "$L:full:32:ckpt" \
  "$L:lora:32" "$H:lora:16" "$H:full:8:ckpt"
stage concepts 90 tests/benchmarks/concepts.py --device "$DEVICE" --photos "$(( N / 5 ))" --photo-model "$S" \
  --skip-planted $CONCEPTS
stage predict-vitl-bf16 90 tests/benchmarks/predict.py --model "$L" --device "$DEVICE" --batch "$BATCH" --precision bf16 --no-pil
stage predict-vitl-fp32 90 tests/benchmarks/predict.py --model "$L" --device "$DEVICE" --batch "$BATCH" --precision fp32 --no-pil
stage switches 120 tests/benchmarks/finetune.py --model "$B4" --batch $(( BATCH / 2 )) --precision "$PREC" \
  --device "$DEVICE" --only-switches

echo "gpu_suite: $(( $(date +%s) - SUITE_START ))s for all stages; wrote $OUT/gpu_suite.json: $(
  for line in "${STAGES[@]}"; do IFS='|' read -r n rc _ <<<"$line"; printf '%s %s, ' "$n" "$rc"; done)" |
  tee -a "$OUT/gpu_suite.log"
