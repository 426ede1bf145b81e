"""The CUDA kernels compile: every envs/<env>/kernel.cu with nvcc, as CI does.

CI has nvcc but no GPU, so a kernel that does not compile fails here. The
extension (kernel + pybind face, shoal/cuda.py's sources) is also built by
hand with nvcc and the host compiler, imported, and its layout checked
against the Cython build; running it needs a GPU (tests/test_cuda_backend.py).
Every header env is covered (a folder under envs/ with a binding.pyx and its
own <folder>.h), so a new env needs no edit here.
"""
import concurrent.futures
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import shoal.envs

NVCC = shutil.which("nvcc")
ENVS_DIR = Path(shoal.envs.__file__).parent
# Header envs: a binding over the folder's own <env>.h (envs/atari's binding
# drives ale-py instead, and library-backed envs have no kernel).
ENVS = sorted(p.parent.name for p in ENVS_DIR.glob("*/binding.pyx")
              if (p.parent / f"{p.parent.name}.h").is_file())
# shoal/cuda.py's CUDA_FLAGS, plus: a host-only function (rand(), a
# constexpr host function) called from an env's __host__ __device__ code is
# an error here, where nvcc only warns and the GPU build would fail later.
HOST_CALLS_FROM_DEVICE = "--diag-error=20011,20013,20015"
FLAGS = ["-O3", "-fmad=false", HOST_CALLS_FROM_DEVICE]
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH (no CUDA toolkit on this machine)")


def test_every_env_has_a_kernel():
    assert ENVS, "no envs found"
    missing = [name for name in ENVS if not (ENVS_DIR / name / "kernel.cu").is_file()]
    assert not missing, f"envs without envs/<env>/kernel.cu: {missing}"


def test_loader_flags_match_ci():
    torch = pytest.importorskip("torch")  # noqa: F841
    from shoal.cuda import CUDA_FLAGS, kernel_sources
    assert CUDA_FLAGS + [HOST_CALLS_FROM_DEVICE] == FLAGS
    for name in ENVS:
        assert all(p.is_file() for p in kernel_sources(name))


def selected_envs(request):
    """The envs of this module's selected tests (all of them, or those
    `-k <env>` picked): the fixtures below compile only those."""
    here, names = Path(__file__).resolve(), set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "name" in callspec.params and item.path.resolve() == here:
            names.add(callspec.params["name"])
    return sorted(names)


@pytest.fixture(scope="module")
def objects(request, tmp_path_factory):
    """kernel.cu of every selected env compiled once, all at a time:
    {env: (returncode, stderr, path of the .o)}."""
    out = tmp_path_factory.mktemp("kernels")
    procs = {}
    for name in selected_envs(request):
        cmd = [NVCC, "-c", *FLAGS, "-Xcompiler", "-fPIC", f"-I{ENVS_DIR}",
               str(ENVS_DIR / name / "kernel.cu"), "-o", str(out / f"{name}.o")]
        procs[name] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    results = {}
    for name, p in procs.items():
        _, err = p.communicate(timeout=600)
        results[name] = (p.returncode, err, out / f"{name}.o")
    return results


@needs_nvcc
@pytest.mark.parametrize("name", ENVS)
def test_kernel_compiles_with_nvcc(name, objects):
    code, err, obj = objects[name]
    assert code == 0, f"nvcc failed on envs/{name}/kernel.cu:\n{err}"
    assert obj.stat().st_size > 0


@needs_nvcc
def test_a_host_only_call_in_an_env_header_fails_the_kernel_compile(tmp_path):
    """nvcc alone only warns when __host__ __device__ code calls rand()
    (host-only libc): with FLAGS the compile fails, naming the call."""
    source = tmp_path / "kernel.cu"
    source.write_text('#include <stdlib.h>\n#include "shoal_env.h"\n'
                      'SHOAL_FN int pick(void) { return rand() % 4; }\n'
                      '__global__ void k(int *out) { out[threadIdx.x] = pick(); }\n')
    done = subprocess.run([NVCC, "-c", *FLAGS, f"-I{ENVS_DIR}", str(source), "-o", str(tmp_path / "k.o")],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0 and '"rand"' in done.stderr, done.stderr


def module_name(name):
    return f"shoal_{name}_kernel_citest"


@pytest.fixture(scope="module")
def bindings(request, tmp_path_factory):
    """shoal_kernel_binding.cpp compiled once per selected env, as many at a
    time as there are cores: {env: (returncode, stderr, path of the .o)}."""
    torch_ext = pytest.importorskip("torch.utils.cpp_extension")
    if shutil.which("c++") is None:
        pytest.skip("no C++ compiler (c++) on PATH")
    out = tmp_path_factory.mktemp("bindings")
    includes = [f"-I{p}" for p in torch_ext.include_paths()] + [f"-I{sysconfig.get_paths()['include']}"]

    def compile_one(name):
        obj = out / f"{name}_binding.o"
        p = subprocess.run(["c++", "-c", "-O1", "-fPIC", "-std=c++17", f"-DSHOAL_KERNEL_ENV={name}",
                            f"-DTORCH_EXTENSION_NAME={module_name(name)}", *includes,
                            str(ENVS_DIR / "shoal_kernel_binding.cpp"), "-o", str(obj)],
                           capture_output=True, text=True, timeout=600)
        return p.returncode, p.stderr, obj

    names = selected_envs(request)
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        return dict(zip(names, pool.map(compile_one, names)))


@needs_nvcc
@pytest.mark.parametrize("name", ENVS)   # every header env, as above
def test_extension_links_and_matches_cython_layout(name, objects, bindings, tmp_path):
    """The extension built from the loader's sources imports without a GPU
    and agrees with the Cython build on struct and asset sizes."""
    code, err, obj = objects[name]
    assert code == 0, err
    code, err, binding_o = bindings[name]
    assert code == 0, f"c++ failed on envs/shoal_kernel_binding.cpp for {name}:\n{err}"
    module = module_name(name)
    so = tmp_path / (module + sysconfig.get_config_var("EXT_SUFFIX"))
    subprocess.run([NVCC, "-shared", str(obj), str(binding_o), "-o", str(so)],
                   check=True, capture_output=True, text=True, timeout=600)
    spec = importlib.util.spec_from_file_location(module, so)
    ext = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ext)
    env_spec = shoal.envs.spec(name)
    binding = env_spec.load_binding()
    assert ext.ENV_BYTES == binding.ENV_BYTES
    assert (ext.AGENTS, ext.OBS_SIZE) == (env_spec.agents, binding.OBS_ELEMENTS)
    assert ext.ACT_SIZE == binding.ACT_ELEMENTS
    if ext.ASSETS_BYTES:
        assert len(binding.assets_bytes()) == ext.ASSETS_BYTES
    else:
        assert not hasattr(binding, "assets_bytes")
    sys.modules.pop(module, None)
