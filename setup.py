"""Builds shoal: the Python packages and every Cython extension.

The repository keeps the user's top-level layout (pool/, envs/, configs/);
setuptools' package_dir installs them under the one import root `shoal`
(`pool` and `envs` are taken on PyPI). No GPU and no nvcc are needed: CUDA
kernels are compiled on first use by shoal's CUDA backend.
"""
import glob
import hashlib
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

# One folder per first-party env under envs/: any folder with a binding.pyx
# (header envs, and envs/atari, whose binding drives ale-py's Python emulator
# from the shared vector loop and so needs no library to build).
ENVS = sorted(name for name in os.listdir("envs") if os.path.isfile(f"envs/{name}/binding.pyx"))
# Library-backed envs (envs/mujoco/): Python packages whose C is compiled on
# first use against the optional library (see envs/mujoco/build.py).
LIBRARY_ENVS = ["mujoco"]

PACKAGE_DIR = {
    "shoal": "shoal",
    "shoal.bench": "shoal/bench",
    "shoal.pool": "pool",
    "shoal.envs": "envs",
    "shoal.configs": "configs",
    **{f"shoal.envs.{name}": f"envs/{name}" for name in ENVS + LIBRARY_ENVS},
}

# -ffp-contract=off: a product and a sum stay two roundings even where a
# packager targets FMA hardware (the Atari resize must equal OpenCV bit for bit);
# -fno-math-errno lets lrintf / sqrtf inline (no errno, same results).
# -Werror=...: an env header that calls a function it never declared, or
# writes obs of another type than its obs_t, builds with one warning among
# hundreds and fails at run time (an undefined symbol, garbage observations);
# as errors they stop the build, naming the line.
C_FLAGS = ["-O3", "-fno-strict-aliasing", "-Wno-unused-function", "-ffp-contract=off", "-fno-math-errno",
           "-Werror=implicit-function-declaration", "-Werror=incompatible-pointer-types"]


def header_digest(name: str) -> list:
    """The macro that stamps env `name`'s binding with its header's digest
    (shoal.envs.header_digest, which header_spec compares at import: a
    header edited since the build, or a binding copied from another env's
    folder, is then a BindingNotBuiltError, not that other env)."""
    path = f"envs/{name}/{name}.h"
    if not os.path.isfile(path):   # envs/atari: no header
        return []
    with open(path, "rb") as f:
        return [("SHOAL_HEADER_DIGEST", f'"{hashlib.sha256(f.read()).hexdigest()[:16]}"')]


extensions = [
    Extension(
        "shoal.pool._native",
        ["pool/_native.pyx"],
        include_dirs=["pool", "envs"],
        depends=["pool/shoal_sync.h", "envs/shoal_block.h"],
        extra_compile_args=C_FLAGS,
    )
] + [
    Extension(
        f"shoal.envs.{name}.binding",
        [f"envs/{name}/binding.pyx"],
        include_dirs=["envs", numpy.get_include()],
        define_macros=header_digest(name),
        extra_compile_args=C_FLAGS,
        # Any header or pxi of any env folder: one env may include another's
        # (explorer_pointgoal builds on envs/explorer/).
        depends=sorted(glob.glob("envs/*.h") + glob.glob("envs/*.pxi")
                       + glob.glob("envs/*/*.h") + glob.glob("envs/*/*.pxi")),
    )
    for name in ENVS
]

setup(
    packages=list(PACKAGE_DIR),
    package_dir=PACKAGE_DIR,
    package_data={
        "shoal.envs": ["*.h", "*.pxi", "*.cuh", "*.cpp"],
        "shoal.configs": ["*.ini"],
        **{f"shoal.envs.{name}": ["*.h", "*.pyx", "*.pxi", "*.cu"] for name in ENVS},
        **{f"shoal.envs.{name}": ["*.h", "*.c"] for name in LIBRARY_ENVS},
        "shoal.pool": ["*.h", "*.pyx"],
    },
    # Cython's generated C (the sdist carries it) is not needed once built
    exclude_package_data={
        "shoal.pool": ["_native.c"],
        **{f"shoal.envs.{name}": ["binding.c"] for name in ENVS},
    },
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": 3},
        nthreads=os.cpu_count() or 1,
    ),
)
