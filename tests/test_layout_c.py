"""pool/layout.py (and the bindings) against the C headers, as the system C
compiler lays them out: every numpy dtype, offset and byte count the pool
uses to carve its shared region must equal the header's offsetof / sizeof.

A small C program is generated per header set, compiled with `cc` and run;
it prints `key value` lines that the tests compare with the Python side.
"""
import importlib
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from shoal.envs import EnvSpec
from shoal.pool import _native, layout

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="no C compiler (`cc`) on PATH to lay out the C headers")

# Header envs: a binding over the folder's own <env>.h (not envs/atari, whose
# binding drives ale-py).
ENVS = sorted(p.name for p in (ROOT / "envs").iterdir()
              if (p / "binding.pyx").is_file() and (p / f"{p.name}.h").is_file())

# Prints: `<key> <value>` per line. FIELD gives offset, size and kind of a
# member: f (floating), i (signed), u (unsigned).
PRELUDE = r"""
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#define KIND(x) (((__typeof__(x))0.5) != 0 ? 'f' : ((__typeof__(x))-1) < 0 ? 'i' : 'u')
#define FIELD(T, f) do { T probe_; \
    printf(#T "." #f " %zu %zu %c\n", offsetof(T, f), sizeof(probe_.f), KIND(probe_.f)); } while (0)
#define VALUE(name, v) printf("%s %lld\n", name, (long long)(v))
#define TYPE(name, T) do { T probe_ = 0; (void)probe_; \
    printf("%s %zu %c %zu\n", name, sizeof(T), KIND(probe_), _Alignof(T)); } while (0)
"""


def compile_and_run(tmp_dir: Path, name: str, source: str) -> dict[str, list[str]]:
    src = tmp_dir / f"{name}.c"
    exe = tmp_dir / name
    src.write_text(PRELUDE + source)
    build = subprocess.run([CC, "-O0", "-w", f"-I{ROOT / 'pool'}", f"-I{ROOT / 'envs'}", str(src), "-o", str(exe),
                            "-lm", "-lpthread"], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, f"cc failed on {name}:\n{build.stderr}"
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30, check=True)
    return {line.split()[0]: line.split()[1:] for line in run.stdout.splitlines()}


def struct_members(text: str, name: str) -> list[tuple[str, str]]:
    """(type, member) pairs of `typedef struct { ... } name;` in C source
    (or of a Cython `ctypedef struct name:` block), arrays as `member[n]`."""
    c = re.search(r"typedef struct\s*\{(.*?)\}\s*" + name + r"\s*;", text, re.S)
    if c:
        body = re.sub(r"/\*.*?\*/", "", c.group(1), flags=re.S)
        decls = [d.strip() for d in body.split(";") if d.strip()]
    else:
        cy = re.search(r"ctypedef struct " + name + r":[^\n]*\n((?:[ \t]+[^\n]*\n)+)", text)
        assert cy, f"no struct {name}"
        decls = [re.sub(r"#.*", "", d).strip() for d in cy.group(1).splitlines()]
        decls = [d for d in decls if d]
    members = []
    for d in decls:
        m = re.fullmatch(r"(.+?)\s+(\w+(?:\[\d+\])?)", d)
        assert m, f"cannot parse member {d!r} of {name}"
        members.append((m.group(1), m.group(2)))
    return members


@pytest.fixture(scope="module")
def build_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("layout_c")


@pytest.fixture(scope="module")
def common(build_dir):
    """Layout of the env-independent structs and constants."""
    return compile_and_run(build_dir, "common", r"""
#include "cartpole/cartpole.h"
#define SHOAL_VEC_ENV cartpole
#include "shoal_vec.h"
#include "shoal_sync.h"
int main(void) {
    VALUE("sizeof.shoal_episode", sizeof(shoal_episode));
    VALUE("alignof.shoal_episode", _Alignof(shoal_episode));
    FIELD(shoal_episode, episode_return);
    FIELD(shoal_episode, return_sum);
    FIELD(shoal_episode, finished);
    FIELD(shoal_episode, length_sum);
    FIELD(shoal_episode, episode_length);
    FIELD(shoal_episode, needs_reset);
    FIELD(shoal_episode, step_limit);
    VALUE("sizeof.shoal_ctrl", sizeof(shoal_ctrl));
    VALUE("alignof.shoal_ctrl", _Alignof(shoal_ctrl));
    FIELD(shoal_ctrl, request);
    FIELD(shoal_ctrl, command);
    FIELD(shoal_ctrl, worker_sleeping);
    FIELD(shoal_ctrl, done);
    FIELD(shoal_ctrl, parent_sleeping);
    FIELD(shoal_ctrl, status);
    FIELD(shoal_ctrl, busy_ns);
    VALUE("SHOAL_KEEP", SHOAL_KEEP);
    VALUE("SHOAL_RESET", SHOAL_RESET);
    VALUE("SHOAL_RESEED", SHOAL_RESEED);
    VALUE("SHOAL_CMD_STEP", SHOAL_CMD_STEP);
    VALUE("SHOAL_CMD_RESET", SHOAL_CMD_RESET);
    VALUE("SHOAL_CMD_CLOSE", SHOAL_CMD_CLOSE);
    VALUE("SHOAL_NEXT_STEP", SHOAL_NEXT_STEP);
    VALUE("SHOAL_SAME_STEP", SHOAL_SAME_STEP);
    VALUE("SHOAL_DISABLED", SHOAL_DISABLED);
    return 0;
}
""")


def header_of(env: str) -> tuple[str, str]:
    """(include path, C prefix) the env's binding compiles against."""
    binding = (ROOT / "envs" / env / "binding.pyx").read_text()
    prefix = re.search(r"#define SHOAL_VEC_ENV (\w+)", binding).group(1)
    assert (ROOT / "envs" / env / f"{env}.h").is_file()
    return f"{env}/{env}.h", prefix


@pytest.fixture(scope="module")
def env_layouts(build_dir):
    out = {}
    for env in ENVS:
        header, p = header_of(env)
        out[env] = compile_and_run(build_dir, f"env_{env}", f"""
#include "{header}"
#define SHOAL_VEC_ENV {p}
#include "shoal_vec.h"
int main(void) {{
    VALUE("sizeof.env", sizeof({p}_env));
    VALUE("alignof.env", _Alignof({p}_env));
    TYPE("obs_t", {p}_obs_t);
    TYPE("act_t", {p}_act_t);
    VALUE("agents", {p}_agents);
    VALUE("obs_size", {p}_obs_size);
    VALUE("act_size", {p}_act_size);
    return 0;
}}
""")
    return out


def test_episode_dtype_matches_shoal_episode(common):
    dtype = layout.EPISODE_DTYPE
    assert dtype.itemsize == int(common["sizeof.shoal_episode"][0])
    # every C member (padding aside) is a dtype field, and nothing else is
    header = (ROOT / "envs" / "shoal_vec.h").read_text()
    members = [m for _, m in struct_members(header, "shoal_episode") if not m.startswith("pad")]
    assert list(dtype.names) == members
    for name in dtype.names:
        offset, size, kind = common[f"shoal_episode.{name}"]
        field_dtype, field_offset = dtype.fields[name][:2]
        assert (field_offset, field_dtype.itemsize, field_dtype.kind) == (int(offset), int(size), kind), name
    assert layout.ALIGN % int(common["alignof.shoal_episode"][0]) == 0


def test_ctrl_bytes_and_words_match_shoal_ctrl(common):
    assert layout.CTRL_BYTES == _native.CTRL_BYTES == int(common["sizeof.shoal_ctrl"][0])
    assert layout.ALIGN % int(common["alignof.shoal_ctrl"][0]) == 0
    # the worker's words sit on their own cache line (one ALIGN after the parent's)
    assert int(common["shoal_ctrl.done"][0]) == layout.ALIGN
    for word in ("request", "command", "worker_sleeping", "done", "parent_sleeping", "status"):
        assert common[f"shoal_ctrl.{word}"][1:] == ["4", "u"], word
    # _native.pyx reads the block through its own copy of the struct: same members, same order
    header = (ROOT / "pool" / "shoal_sync.h").read_text()
    pyx = (ROOT / "pool" / "_native.pyx").read_text()
    assert struct_members(pyx, "ctrl_words") == struct_members(header, "shoal_ctrl")
    assert common["shoal_ctrl.busy_ns"][1:] == ["8", "u"]
    assert int(common["shoal_ctrl.busy_ns"][0]) % 8 == 0


def test_reset_requests_and_commands_match_the_headers(common):
    assert (layout.KEEP, layout.RESET, layout.RESEED) == tuple(
        int(common[k][0]) for k in ("SHOAL_KEEP", "SHOAL_RESET", "SHOAL_RESEED"))
    commands = {int(common[k][0]) for k in ("SHOAL_CMD_STEP", "SHOAL_CMD_RESET", "SHOAL_CMD_CLOSE")}
    assert (_native.CMD_STEP, _native.CMD_RESET, _native.CMD_CLOSE) == tuple(
        int(common[k][0]) for k in ("SHOAL_CMD_STEP", "SHOAL_CMD_RESET", "SHOAL_CMD_CLOSE"))
    assert _native.CMD_MESSAGE not in commands  # the Python workers' extra command is its own


def test_autoreset_modes_match_the_header(common):
    from gymnasium.vector import AutoresetMode
    from shoal.pool import native
    for mode in ("NEXT_STEP", "SAME_STEP", "DISABLED"):
        assert native.AUTORESET_CODES[getattr(AutoresetMode, mode)] == int(common[f"SHOAL_{mode}"][0]), mode


@pytest.mark.parametrize("env", ENVS)
def test_binding_matches_env_header(env, env_layouts):
    c = env_layouts[env]
    module = importlib.import_module(f"shoal.envs.{env}")
    spec: EnvSpec = module.SPEC
    binding = spec.load_binding()
    assert binding.ENV_BYTES == int(c["sizeof.env"][0])
    assert layout.ALIGN % int(c["alignof.env"][0]) == 0
    for dtype, key in ((binding.OBS_DTYPE, "obs_t"), (binding.ACT_DTYPE, "act_t")):
        size, kind, _ = c[key]
        assert (dtype.itemsize, dtype.kind) == (int(size), kind), key
    assert binding.AGENTS_PER_ENV == spec.agents == int(c["agents"][0])
    assert binding.OBS_ELEMENTS == int(np.prod(spec.obs_shape)) == int(c["obs_size"][0])
    assert binding.ACT_ELEMENTS == len(spec.action_nvec) == int(c["act_size"][0])
    assert np.dtype(spec.obs_dtype) == binding.OBS_DTYPE


@pytest.mark.parametrize("env", ENVS)
def test_buffers_carve_aligned_arrays_of_the_header_sizes(env, env_layouts):
    c = env_layouts[env]
    spec = importlib.import_module(f"shoal.envs.{env}").SPEC
    buffers = layout.Buffers(spec, num_envs=3, num_workers=2, shared=False)
    try:
        base = np.frombuffer(buffers.region.memory, np.uint8).__array_interface__["data"][0]
        for field in buffers._fields:
            array = getattr(buffers, field.name)
            assert (array.__array_interface__["data"][0] - base) % layout.ALIGN == 0, field.name
        assert buffers.env_states.nbytes == 3 * int(c["sizeof.env"][0])
        assert buffers.episodes.dtype == layout.EPISODE_DTYPE and buffers.episodes.shape == (3,)
        assert buffers.control.nbytes == 2 * layout.CTRL_BYTES
    finally:
        buffers.close()


def setup_c_flags() -> list[str]:
    """setup.py's C_FLAGS, the flags every binding is compiled with."""
    import ast
    tree = ast.parse((ROOT / "setup.py").read_text())
    value = next(node.value for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 and any(getattr(t, "id", None) == "C_FLAGS" for t in node.targets))
    return ast.literal_eval(value)


@pytest.mark.parametrize("mistake,source", [
    ("a function never declared", "int env_step(void) { return env_seed(); }\n"),
    ("obs of another type than obs_t", "typedef float obs_t;\nstatic void write(unsigned char* o) { o[0] = 1; }\n"
                                       "void env_reset(obs_t* obs) { write(obs); }\n"),
])
def test_binding_flags_make_a_headers_typical_mistakes_build_errors(tmp_path, mistake, source):
    """Written into a new env's header, each of these once built with one
    warning among hundreds and failed at run time (an undefined symbol that
    broke `import shoal`; observations of garbage): the bindings' C_FLAGS
    make them build errors, naming the line."""
    src = tmp_path / "env.c"
    src.write_text(source)
    build = subprocess.run([CC, "-c", *setup_c_flags(), str(src), "-o", str(tmp_path / "env.o")],
                           capture_output=True, text=True, timeout=60)
    assert build.returncode != 0 and "error" in build.stderr, mistake
