#!/usr/bin/env bash
# One session on the offline GPU machine (see docs/results.md, "CPU vs GPU").
#
#     bash scripts/gpu_session.sh OUT STAGE [STAGE ...]
#
# Run from the repository root, with .whl/site312.tar.xz beside it: the
# pure-Python and binary packages the GPU machine lacks (gymnasium,
# pettingzoo, mpe2, pillow, rich, a trimmed EnvPool), unpacked onto
# PYTHONPATH; and optionally .whl/so312.tar.xz from scripts/gpu_prep.sh
# (the extensions prebuilt, used only if built from these very sources).
# Every stage logs to OUT/<stage>.log and never stops the others (each has
# its own time limit). Stages:
#
#   setup      install shoal (-e), build every CUDA kernel in parallel, versions
#   gputests   the CUDA tests (parity, kernels, nvcc), verbose
#   suite      the whole test suite
#   quick      scripts/compare_cpu_gpu.py --quick for every env
#   profile    Nsight Compute / torch profiler of the GPU kernels
#   compare    scripts/compare_cpu_gpu.py (full) for every env  -> OUT/compare/
#   train      shoal train on both backends (SPS, time to target) -> OUT/train/
#   bench      shoal bench on all cores (CartPole + envs) vs EnvPool -> OUT/bench/
#   overhead   scripts/pool_overhead.py: a pool step's time, stepping vs the rest -> OUT/bench/
#   pack       everything under OUT into OUT/shoal_out.tgz
#
# Plan for a session (30 device-minutes, at most 600 s a call, and a fresh
# machine for any call that does not follow the last within ~30 s): run
# `bash scripts/gpu_prep.sh` here first and carry .whl, then one call each of
#   SHOAL_GPU_DEADLINE=$(( $(date +%s) + 570 )) bash scripts/gpu_session.sh $OUT setup gputests overhead pack
#   ... setup bench pack
#   ... setup train pack        (then compare, if device time is left)
# The deadline cuts the last stage short so that pack always runs.
set -uo pipefail
OUT=${1:?usage: gpu_session.sh OUT STAGE...}
shift
mkdir -p "$OUT"
SITE=${SHOAL_GPU_SITE:-/tmp/shoal_site}
if [ -f .whl/site312.tar.xz ] && [ ! -d "$SITE" ]; then
    mkdir -p "$SITE" && tar -C "$SITE" -xJf .whl/site312.tar.xz
fi
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
# Keep in step with sources_stamp in scripts/gpu_prep.sh.
sources_stamp() {
    ls setup.py pool/*.pyx pool/*.h envs/*.h envs/*.pxi envs/*/binding.pyx envs/*/*.h envs/*/*.pxi 2>/dev/null \
        | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
if [ -f .whl/so312.tar.xz ] && [ "$(cat .whl/so312.stamp 2>/dev/null)" != "$(sources_stamp)" ]; then
    echo "== .whl/so312.tar.xz was not built from these sources (stamp $(cat .whl/so312.stamp 2>/dev/null ||
        echo missing), sources $(sources_stamp)): ignored, the setup stage builds" | tee -a "$OUT/stages.txt"
elif [ -f .whl/so312.tar.xz ]; then
    # Cython extensions prebuilt for Python 3.12 on the dev machine by
    # scripts/gpu_prep.sh (saves the build here): the import root assembled
    # as setup.py's package_dir maps it.
    echo "== prebuilt extensions match the sources (stamp $(sources_stamp))" | tee -a "$OUT/stages.txt"
    tar xJf .whl/so312.tar.xz
    PKG=/tmp/shoal_pkg
    rm -rf "$PKG" && mkdir -p "$PKG/shoal" && cp -r shoal/. "$PKG/shoal/"
    for d in pool envs configs; do ln -s "$PWD/$d" "$PKG/shoal/$d"; done
    export PYTHONPATH="$PKG:$PYTHONPATH" PYTHONSAFEPATH=1
    PREBUILT=1
fi
export PYTHONUNBUFFERED=1
PY=python3

stage() {  # stage NAME SECONDS COMMAND...  (SHOAL_GPU_DEADLINE: epoch seconds no stage runs past)
    local name=$1 limit=$2
    if [ -n "${SHOAL_GPU_DEADLINE:-}" ]; then
        local left=$(( SHOAL_GPU_DEADLINE - $(date +%s) ))
        [ "$left" -lt "$limit" ] && limit=$left
        [ "$limit" -le 5 ] && { echo "== $name skipped: no time left" | tee -a "$OUT/stages.txt"; return; }
    fi
    shift 2
    local t0=$(date +%s)
    echo "== $name (limit ${limit}s) $(date -Is)" | tee -a "$OUT/stages.txt"
    timeout --kill-after=10 "$limit" bash -c "$*" > "$OUT/$name.log" 2>&1
    local rc=$?
    echo "== $name rc=$rc in $(( $(date +%s) - t0 )) s" | tee -a "$OUT/stages.txt"
    tail -n 25 "$OUT/$name.log"
}

for s in "$@"; do
    case $s in
    setup)
        stage setup 240 "
            nvidia-smi; nvcc --version; which nsys ncu; lscpu | head -20
            $PY -c 'import torch, numpy; print(torch.__version__, torch.version.cuda, numpy.__version__)'
            [ -n \"${PREBUILT:-}\" ] || $PY -m pip install -q --no-build-isolation --no-deps -e . || exit 1
            $PY - <<'EOF'
import concurrent.futures as cf, time, shoal.envs
def build(name):
    import shoal.cuda
    t = time.time(); shoal.cuda.load_kernel(name); return name, time.time() - t
with cf.ProcessPoolExecutor(8) as ex:
    for name, sec in ex.map(build, shoal.envs.names()):
        print(f'kernel {name}: built in {sec:.1f} s')
EOF"
        ;;
    gputests)
        stage gputests 240 "$PY -P -m pytest -v -rs -p no:cacheprovider --import-mode=importlib --durations=10 \
            tests/test_cuda_backend.py tests/test_cuda_kernels.py tests/test_train.py"
        ;;
    suite)
        stage suite 400 "$PY -P -m pytest -q -rs -p no:cacheprovider --import-mode=importlib --durations=15 tests"
        ;;
    quick)
        stage quick 200 "$PY scripts/compare_cpu_gpu.py --quick --out $OUT/quick"
        ;;
    profile)
        stage profile 240 "$PY scripts/profile_gpu.py --out $OUT/profile ${PROFILE_ARGS:-}"
        ;;
    compare)
        if [ -f "$OUT/profile/best_kernels.json" ]; then   # the fastest step kernels just measured
            COMPARE_ARGS="${COMPARE_ARGS:-} --step-kernel $($PY -c "import json; print(' '.join(f'{k}={v}' for k, v in json.load(open('$OUT/profile/best_kernels.json')).items()))")"
        fi
        stage compare 560 "$PY scripts/compare_cpu_gpu.py --out $OUT/compare ${COMPARE_ARGS:-}"
        ;;
    train)
        stage train 560 "$PY scripts/train_speed.py --out $OUT/train ${TRAIN_ARGS:-}"
        ;;
    bench)   # CartPole to 262,144 envs on 1, 8, 15 and 16 workers vs EnvPool, then the other envs
        stage bench 560 "mkdir -p $OUT/bench && $PY -m shoal bench --out $OUT/bench/bench.md \
            ${BENCH_ARGS:---contenders c_loop,sync,async,envpool,envs --num-envs 4096,16384,65536,262144 --workers 1,8,15,16 --seconds 0.5}"
        ;;
    overhead)   # where a 16-worker CartPole step's time goes (stepping, action copy, hand-off)
        stage overhead 300 "mkdir -p $OUT/bench && $PY scripts/pool_overhead.py --out $OUT/bench/overhead.md \
            --num-envs 16384 65536 262144 1048576 --workers 1 8 15 16 --seconds 0.5 --parent-share"
        ;;
    pack)   # one archive: the device tool returns only a few files
        (cd "$OUT" && tar czf /tmp/shoal_out.tgz --exclude=shoal_out.tgz . && find . -mindepth 1 -delete \
            && mv /tmp/shoal_out.tgz .) ;;
    *)
        echo "unknown stage $s" ;;
    esac
done
