"""The env headers are host+device code: nvcc must compile them as a kernel.

The CUDA backend builds its kernels from these same headers; this test keeps
the contract (no libc call a GPU lacks, no globals, SHOAL_FN everywhere) from
breaking before that backend exists. It needs nvcc, not a GPU.
"""
import shutil
import subprocess
from pathlib import Path

import pytest

import shoal.envs

NVCC = shutil.which("nvcc")
ENVS_DIR = Path(shoal.envs.__file__).parent

KERNEL = """
#include "{name}/{name}.h"
#define SHOAL_VEC_ENV {name}
#include "shoal_vec.h"

__global__ void step_all({name}_env* envs, shoal_episode* eps, int n, const {name}_act_t* act,
                         {name}_obs_t* obs, float* rew, uint8_t* term, uint8_t* trunc,
                         uint8_t* mask, int mode) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int A = {name}_agents;
    {name}_slot_step(&envs[i], &eps[i], act + i * A * {name}_act_size,
                     obs + i * A * {name}_obs_size, rew + i * A, term + i * A, trunc + i * A,
                     mask + i * A, 0, mode);
}}
"""


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (no CUDA toolkit on this machine)")
@pytest.mark.parametrize("name", sorted(p.parent.name for p in ENVS_DIR.glob("*/binding.pyx")
                                         if (p.parent / f"{p.parent.name}.h").is_file()))  # header envs
def test_env_header_compiles_as_cuda_kernel(name, tmp_path):
    source = tmp_path / f"{name}_check.cu"
    source.write_text(KERNEL.format(name=name))
    result = subprocess.run([NVCC, "-c", f"-I{ENVS_DIR}", str(source), "-o", str(tmp_path / "k.o")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
