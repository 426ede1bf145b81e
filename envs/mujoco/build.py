"""Builds envs/mujoco/library.c into a shared library on first use.

The `mujoco` wheel ships libmujoco and its C headers; nothing is built from
MuJoCo's source. shoal's wheel cannot link against them at install time (the
core install must work without mujoco, and pip builds shoal in an isolated
environment that has no mujoco), so the library is compiled here, once per
(mujoco version, source) pair, with $CC if set, else the C compiler that
built shoal's other extensions, and cached (readable by every user, so a
cache warmed by one user, say while building an image, serves the others):

    $SHOAL_CACHE_DIR (default ~/.cache/shoal)/mujoco-<version>-<hash>/libshoal_mujoco.so

It links to the wheel's libmujoco with an rpath, so no LD_LIBRARY_PATH is
needed. A build writes a temporary file and renames it into place, so
processes building at once (pool workers, parallel tests) never load half a
library.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import re
import shlex
import subprocess
import sysconfig
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENVS_DIR = HERE.parent          # shoal_env.h, shoal_vec.h, shoal_block.h
INSTALL_HINT = 'pip install "shoal[mujoco]"'


class MujocoUnavailable(ImportError):
    """The mujoco package (or a C compiler) is missing."""


def mujoco_dirs() -> tuple[Path, Path, str]:
    """(include dir, dir holding libmujoco.so*, libmujoco file name) of the
    installed mujoco wheel; MujocoUnavailable naming the extra to install."""
    spec = importlib.util.find_spec("mujoco")
    if spec is None or not spec.submodule_search_locations:
        raise MujocoUnavailable(f"shoal's MuJoCo envs need the mujoco package: {INSTALL_HINT}")
    for location in spec.submodule_search_locations:
        root = Path(location)
        libs = [path.name for path in root.glob("libmujoco.so*")]
        if (root / "include" / "mujoco" / "mujoco.h").is_file() and libs:
            return root / "include", root, _library_of(libs, _mujoco_version())
    raise MujocoUnavailable(f"the installed mujoco package ({', '.join(spec.submodule_search_locations)}) "
                            f"ships no libmujoco.so with C headers; reinstall it: {INSTALL_HINT}")


def _library_of(names: list[str], version: str) -> str:
    """The libmujoco of the installed mujoco version, among the folder's
    libmujoco.so* files: pip leaves an old one behind when mujoco is
    downgraded (4.0's mujoco-core stays), and the headers are the new
    install's, so the version's own library, else the newest (by number:
    .so.10 after .so.9)."""
    if f"libmujoco.so.{version}" in names:
        return f"libmujoco.so.{version}"
    return max(names, key=lambda name: [int(part) for part in re.findall(r"\d+", name)])


def _mujoco_version() -> str:
    # "mujoco" first: it is what `import mujoco` is (a downgrade from 4.x to
    # 3.x leaves 4.x's mujoco-core package installed)
    for dist in ("mujoco", "mujoco-core"):
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return "unknown"


def _sources() -> list[Path]:
    return sorted(HERE.glob("*.h")) + [HERE / "library.c"] + [
        ENVS_DIR / name for name in ("shoal_env.h", "shoal_vec.h", "shoal_block.h")]


def cache_root() -> Path:
    return Path(os.environ.get("SHOAL_CACHE_DIR") or Path.home() / ".cache" / "shoal")


def library_path() -> Path:
    """The built library, compiling it first if this mujoco version and these
    sources have not been built yet."""
    include, libdir, libname = mujoco_dirs()
    digest = hashlib.sha256()
    for source in _sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    digest.update(str(libdir / libname).encode())
    out_dir = cache_root() / f"mujoco-{_mujoco_version()}-{digest.hexdigest()[:16]}"
    target = out_dir / "libshoal_mujoco.so"
    if target.is_file():
        return target
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd, partial = tempfile.mkstemp(prefix=".build-", suffix=".so", dir=out_dir)
    except OSError as e:
        raise MujocoUnavailable(f"shoal's MuJoCo envs are compiled on first use into {out_dir}, which "
                                f"cannot be written ({e.strerror or e}); set SHOAL_CACHE_DIR to a "
                                f"writable folder") from e
    os.close(fd)
    compiler = shlex.split(os.environ.get("CC") or "") or shlex.split(sysconfig.get_config_var("CC") or "cc")
    command = [*compiler, "-O2", "-fPIC", "-shared", "-pthread", "-std=gnu11", "-ffp-contract=off",
               "-Wall", "-Wno-unused-function",
               f"-I{include}", f"-I{HERE}", f"-I{ENVS_DIR}",
               str(HERE / "library.c"), "-o", partial,
               f"-L{libdir}", f"-l:{libname}", f"-Wl,-rpath,{libdir}", "-lm"]
    try:
        try:
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as e:   # not there, not executable, a folder
            raise MujocoUnavailable(f"shoal's MuJoCo envs are compiled on first use and need a C "
                                    f"compiler ({compiler[0]}: {e.strerror or e}; set CC to use "
                                    f"another)") from e
        if result.returncode != 0:
            raise RuntimeError(f"building shoal's MuJoCo library failed:\n{shlex.join(command)}\n"
                               f"{result.stderr}")
        # mkstemp made it 0600 and the linker keeps that: readable by all, as a plain build's
        os.chmod(partial, 0o755)
    except BaseException:   # a failed build or a Ctrl-C during it: no partial file stays
        os.unlink(partial)
        raise
    os.replace(partial, target)
    return target
