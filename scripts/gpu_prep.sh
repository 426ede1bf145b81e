#!/usr/bin/env bash
# Before a GPU session, on the dev machine: build shoal's Cython extensions
# for the GPU machine's Python 3.12 from this checkout's sources (the working
# tree, uncommitted edits included), so that scripts/gpu_session.sh need not
# build them on device time.
#
#     bash scripts/gpu_prep.sh        # -> .whl/so312.tar.xz and .whl/so312.stamp
#
# The stamp is a hash of every source the extensions are built from.
# gpu_session.sh hashes the sources it runs with the same way and uses the
# tarball only if the two agree; otherwise it builds on the device, so a
# stale prebuild can never run instead of the code under test.
# (.whl/site312.tar.xz, the pure-Python packages the GPU machine lacks, is
# made separately: ../shared/GPU.md.)
set -euo pipefail
cd "$(dirname "$0")/.."

# Keep in step with sources_stamp in scripts/gpu_session.sh.
sources_stamp() {
    ls setup.py pool/*.pyx pool/*.h envs/*.h envs/*.pxi envs/*/binding.pyx envs/*/*.h envs/*/*.pxi 2>/dev/null \
        | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}

if [ -z "${PY312:-}" ]; then   # the first Python 3.12 that runs (a pyenv shim may not)
    for candidate in python3.12 "$HOME"/.pyenv/versions/3.12*/bin/python3.12 /usr/bin/python3.12; do
        if "$candidate" -c "" 2>/dev/null; then PY312=$candidate; break; fi
    done
fi
[ -n "${PY312:-}" ] || { echo "no Python 3.12 found: set PY312" >&2; exit 1; }
VENV=${SHOAL_VENV312:-/tmp/shoal_venv312}
if [ ! -x "$VENV/bin/python" ]; then
    "$PY312" -m venv "$VENV"
    "$VENV/bin/pip" install -q numpy cython setuptools
fi
BUILD=$(mktemp -d)
trap 'rm -rf "$BUILD"' EXIT
git ls-files -co --exclude-standard -z setup.py pyproject.toml README.md pool envs shoal configs \
    | xargs -0 cp --parents -t "$BUILD"
(cd "$BUILD" && "$VENV/bin/python" setup.py -q build_ext --inplace > build.log 2>&1) \
    || { tail -30 "$BUILD/build.log"; exit 1; }
mkdir -p .whl
(cd "$BUILD" && find pool envs -name '*.cpython-312-*.so' | LC_ALL=C sort | tar cJf - -T -) > .whl/so312.tar.xz
sources_stamp > .whl/so312.stamp
echo "built $(tar tJf .whl/so312.tar.xz | wc -l) extensions for Python 3.12 -> .whl/so312.tar.xz (stamp $(cat .whl/so312.stamp))"
