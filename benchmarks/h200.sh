#!/usr/bin/env bash
# The quantized few-row product and the 4.1B rig at bfloat16, 8 and 4 bits on an NVIDIA GPU with MLX's CUDA
# backend, run from the repository root:
#
#   benchmarks/h200.sh keep PART...   keep parts of the site tarball (below) in $STORE for a later call
#   benchmarks/h200.sh setup          join the kept parts and unpack them into $STORE/site
#   benchmarks/h200.sh kernel         the kernel's CUDA tests, then python -m benchmarks.quantized_skinny
#   benchmarks/h200.sh mma            the tensor-core kernel's CUDA tests, then the benchmark with it beside the first
#   benchmarks/h200.sh step           each of the 4.1B rig's quantized products and their sum over a step, both kernels
#   benchmarks/h200.sh events         the kernels timed on the GPU alone (CUDA events through CuPy), bar and rig shapes
#   benchmarks/h200.sh rigs           the 4.1B rig, its Hugging Face layout, and its 8- and 4-bit conversions
#   benchmarks/h200.sh engine NAME... specchat bench on each rig (bf16, q8, q4), drafter off and blocks 1, 2, 4
#                                     (CUDA_CORES=1: the 4- and 8-bit products on the CUDA-core kernel)
#   benchmarks/h200.sh direct NAME... python -m benchmarks.rounds on each rig: tensor cores (the engine's), the CUDA-
#                                     core kernel, MLX's product
#   benchmarks/h200.sh precision      float32 products over 1 and 4 rows with TF32 allowed and off (webapp/precision.py)
#   benchmarks/h200.sh images         the 4.1B rig with a vision tower: one 1024×1024 image, text and text as long,
#                                     drafter off and at blocks 2 and 4 (python -m benchmarks.images)
#   benchmarks/h200.sh curve P...     the 4.1B rig whose head agrees on a share P of the words, bfloat16 (BITS=4:
#                                     its 4-bit conversion), then python -m benchmarks.acceptance on it: blocks 1-6
#                                     and auto (QCHART=PATH.png: the bfloat16 rig, then its 4-bit conversion of the
#                                     same rig, one build for both curves)
#   benchmarks/h200.sh graphs P       the rig at P (bfloat16), blocks 1 and 3-6 and auto, with MLX's CUDA graph cache
#                                     at its default (400 graphs) and at 4000: whether auto, which runs many blocks'
#                                     steps in turn, loses to that cache where a fixed block does not
#
# The site tarball is the wheels of pyproject.toml's pins that the GPU machine lacks (mlx, mlx-cuda-13, mlx-lm,
# mlx-vlm, flask, flask-sock, simple-websocket, wsproto, waitress, orjson, pydantic, pydantic-core,
# annotated-types, typing-inspection, typing-extensions, blinker, itsdangerous; `pip download --no-deps
# --only-binary=:all: --python-version 3.12` for manylinux x86_64) unzipped into one folder with
# `python -m zipfile -e`, then `tar c | xz -9` (about 80 MB) and `split -b 38M`: a machine with no package index
# gets it in parts, over two calls while it stays warm.
# libmlx.so finds the CUDA libraries through its RPATH $ORIGIN/../../nvidia, which links to the nvidia folder
# of the python3 that holds PyTorch's CUDA wheels.
set -uo pipefail

STORE=${STORE:-$HOME/.cache/specchat-h200}
PY=${PY:-python3}
RUNS=${RUNS:-5}
TOKENS=${TOKENS:-512}
mkdir -p "$STORE"
export PYTHONPATH="$STORE/site:$PWD" PYTHONUNBUFFERED=1

keep() {
    for part in "$@"; do cp "$part" "$STORE/"; done
    ls -la "$STORE"
}

setup() {
    rm -rf "$STORE/site" && mkdir -p "$STORE/site"
    cat "$STORE"/part.* | xz -d | tar x -C "$STORE/site" || return 1
    local nvidia
    nvidia=$(PYTHONPATH= "$PY" -c 'import nvidia; print(list(nvidia.__path__)[0])') || return 1
    ln -sfn "$nvidia" "$STORE/site/nvidia"
    "$PY" -c 'import mlx.core as mx; print(mx.__version__, mx.default_device(), mx.cuda.is_available())'
}

kernel() {  # the tests take about 450 s on an H200 (each parameter set compiles its kernels)
    timeout 500 "$PY" -m pytest -q -p no:cacheprovider --noconftest --durations 5 tests/test_quantized_skinny.py 2>&1
    timeout 200 "$PY" -m benchmarks.quantized_skinny --bits 4,8 --group-size 64 --rows 1,2,4,8 --rows-per-warp 0,4,8 \
        --reps 20 2>&1
}

mma() {
    timeout 300 "$PY" -m pytest -q -p no:cacheprovider --noconftest --durations 5 tests/test_quantized_mma.py 2>&1
    timeout 300 "$PY" -m benchmarks.quantized_skinny --bits 4,8 --group-size 64 --rows 1,4,16 --splits 0,1,4 --mma \
        --mma-rounds 256,512,1024 --reps 20 2>&1
}

step() {
    timeout 300 "$PY" -m benchmarks.quantized_skinny --shapes rig --bits 4,8 --rows 1,4 --mma --reps 20 2>&1
}

events() {
    timeout 200 "$PY" -m benchmarks.kernel_events --rows 1,2,3,4 --resident 2>&1
    timeout 100 "$PY" -m benchmarks.kernel_events --shapes rig --rows 1,4 2>&1
}

rigs() {
    local r="$STORE/rigs"
    rm -rf "$r" && mkdir -p "$r"
    "$PY" -m demo_model.rig "$r/bf16" --size 4b || return 1
    "$PY" -m benchmarks.hf_rig "$r/bf16" "$r/hf" || return 1
    for bits in 8 4; do
        "$PY" -m mlx_vlm.convert --hf-path "$r/hf" --mlx-path "$r/q$bits" --mtp -q --q-bits "$bits" \
            --q-group-size 64 2>&1 | grep -v '^\s*$' | tail -3 || return 1
    done
    rm -rf "$r/hf"
    du -sh "$r"/*
}

drafter() {  # the drafter flag of a rig: the bf16 rig carries its head, a conversion wrote it beside
    [ "$1" = bf16 ] || echo "--drafter $STORE/rigs/$1-mtp"
}

# CUDA_CORES=1 engine ...: the same with the 4- and 8-bit products on the CUDA-core kernel, not on tensor cores
# (specchat bench --cuda-kernels cuda-cores: KernelChoice.tensor_cores off, engines/mlx/cuda/__init__.py)
engine() {  # progress lines go to $STORE/NAME.log with the seconds since the start, the table to the output
    local start kernels=tensor-cores
    [ "${CUDA_CORES:-0}" = 1 ] && kernels=cuda-cores
    for name in "$@"; do
        start=$(date +%s)
        # shellcheck disable=SC2046
        timeout 400 "$PY" -m webapp bench --model "$STORE/rigs/$name" $(drafter "$name") --blocks 1,2,4 \
            --runs "$RUNS" --max-tokens "$TOKENS" --budget 0 --loop specchat --cuda-kernels "$kernels" 2>&1 | stdbuf -oL tr '\r' '\n' \
            | while IFS= read -r line; do echo "$(( $(date +%s) - start ))s $line"; done \
            | tee "$STORE/$name.log" | grep -v '^[0-9]*s \['
    done
}

direct() {
    for name in "$@"; do
        for kernel in "" --cuda-cores --no-kernel; do
            timeout 300 "$PY" -m benchmarks.rounds "$STORE/rigs/$name" --blocks 2,4 --runs 3 --tokens 256 $kernel \
                2>&1 | grep -v '^\['
        done
    done
}

precision() {
    for value in 1 0; do
        MLX_ENABLE_TF32=$value "$PY" -c '
import os
import mlx.core as mx
x, w = mx.random.normal((4, 4096), key=mx.random.key(1)), mx.random.normal((4096, 256), key=mx.random.key(2))
exact = (x[:, :, None] * w[None]).sum(axis=1)
scale = (mx.abs(x) @ mx.abs(w)).max().item()
for rows in (1, 4):
    error = mx.abs(x[:rows] @ w - exact[:rows]).max().item() / scale
    print("MLX_ENABLE_TF32=" + os.environ["MLX_ENABLE_TF32"], f"{rows} row(s): largest error {error:.1e} of |x| @ |w|")
'
    done
}

images() {  # Pillow and the image processor come from the machine's own Python, as transformers does (else carry wheels)
    local r="$STORE/rigs/bf16-vision"
    [ -d "$r" ] || "$PY" -m demo_model.rig "$r" --size 4b --vision || return 1
    timeout 500 "$PY" -m benchmarks.images --model "$r" --runs "$RUNS" --tokens "$TOKENS" 2>&1
}

curve() {  # CHART=PATH.png: the curve redrawn with each rig; each rig is removed after its run (8 GB)
    local p r       # BITS=4 or 8: the rig's conversion at those bits, made as users make them, in its place;
    for p in "$@"; do  # QCHART=PATH.png (no BITS): the bfloat16 rig, then its 4-bit conversion charted there
        r="rigs/p$p"  # relative to $STORE: the chart's record names rigs, not this machine's folders
        (cd "$STORE" && "$PY" -m demo_model.rig "$r" --size "${SIZE:-4b}" --acceptance "$p" 2>&1 | tail -2) || return 1
        if [ -n "${BITS:-}" ]; then
            convert_rig "$r" "$BITS" || return 1
            rm -rf "${STORE:?}/$r"
            r="$r-q$BITS"  # its head was written beside it ($r-mtp), where the engine finds it
        fi
        accept "$r" "${CHART:-}"
        if [ -z "${BITS:-}" ] && [ -n "${QCHART:-}" ]; then
            convert_rig "$r" 4 || return 1
            rm -rf "${STORE:?}/$r"
            r="$r-q4"
            accept "$r" "$QCHART"
        fi
        rm -rf "${STORE:?}/$r" "${STORE:?}/$r-mtp"
    done
}

convert_rig() {  # RIG BITS: RIG-qBITS beside it, as users convert (the head written to RIG-qBITS-mtp)
    (cd "$STORE" && "$PY" -m benchmarks.hf_rig "$1" "$1-hf" && "$PY" -m mlx_vlm.convert --hf-path "$1-hf" \
        --mlx-path "$1-q$2" --mtp -q --q-bits "$2" --q-group-size 64 2>&1 | grep -v '^\s*$' | tail -2)
    local status=$?
    rm -rf "${STORE:?}/$1-hf"
    return $status
}

accept() {  # RIG [CHART]
    (cd "$STORE" && timeout 400 "$PY" -m benchmarks.acceptance "$1" --blocks 1,2,3,4,5,6,auto --runs "$RUNS" \
        --tokens "$TOKENS" ${2:+--chart "$2"} 2>&1 | grep -v '^\[')
}

graphs() {
    local r="rigs/p$1" size
    (cd "$STORE" && "$PY" -m demo_model.rig "$r" --size "${SIZE:-4b}" --acceptance "$1" 2>&1 | tail -2) || return 1
    for size in 400 4000; do
        echo "MLX_CUDA_GRAPH_CACHE_SIZE=$size"
        (cd "$STORE" && MLX_CUDA_GRAPH_CACHE_SIZE=$size timeout 400 "$PY" -m benchmarks.acceptance "$r" \
            --blocks 1,3,4,5,6,auto --runs "$RUNS" --tokens "$TOKENS" 2>&1 | grep -v '^\[')
    done
    rm -rf "${STORE:?}/$r"
}

command=$1
shift
"$command" "$@"
