"""`import shoal` warns when shoal, shoal.envs and shoal.pool come from two
copies of shoal (e.g. a clone's root on sys.path while another checkout is
installed editable): the check itself on fake layouts, and the real import
here and from such a clone; and it names a gymnasium too old for it."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import shoal
from shoal import _mixed_checkouts

SHOAL_DIR = Path(shoal.__file__).parent


@pytest.mark.parametrize("shoal_dir, envs, pool", [
    ("/venv/site-packages/shoal", "/venv/site-packages/shoal/envs", "/venv/site-packages/shoal/pool"),  # wheel
    ("/src/shoal_repo/shoal", "/src/shoal_repo/envs", "/src/shoal_repo/pool"),  # source tree, editable
    ("/src/shoal_repo/shoal", "/src/shoal_repo/envs", None),   # shoal.pool not found: nothing to compare
    ("/src/shoal_repo/shoal/", "/src/shoal_repo/./envs", "/src/x/../shoal_repo/pool"),
])
def test_legitimate_layouts_pass(shoal_dir, envs, pool):
    assert _mixed_checkouts(shoal_dir, {"envs": envs, "pool": pool}) is None


@pytest.mark.parametrize("shoal_dir, envs, pool, named", [
    ("/tmp/clone/shoal", "/work/main/envs", "/work/main/pool",
     "shoal.envs from /work/main/envs and shoal.pool from /work/main/pool"),
    ("/tmp/clone/shoal", "/tmp/clone/envs", "/work/main/pool", "shoal.pool from /work/main/pool"),
    ("/venv/site-packages/shoal", "/work/main/envs", "/venv/site-packages/shoal/pool", "/work/main/envs"),
    ("/tmp/clone/shoal", "/tmp/clone/shoal/envs", "/tmp/clone/pool", None),   # half wheel, half tree
    ("/tmp/clone/shoal", "/tmp/clone/other/envs", "/tmp/clone/pool", None),
])
def test_mixed_layouts_are_named(shoal_dir, envs, pool, named):
    problem = _mixed_checkouts(shoal_dir, {"envs": envs, "pool": pool})
    assert problem is not None and f"shoal is imported from {shoal_dir}" in problem
    assert "two copies of shoal are mixed" in problem
    assert f"pip install -e {os.path.dirname(shoal_dir)}" in problem
    if named:
        assert named in problem


def test_symlinks_are_resolved(tmp_path):
    """A checkout reached through a symlinked shoal/ (or a link tree) is one copy."""
    for name in ("shoal", "envs", "pool"):
        (tmp_path / "repo" / name).mkdir(parents=True)
    (tmp_path / "links").mkdir()
    (tmp_path / "links" / "shoal").symlink_to(tmp_path / "repo" / "shoal")
    parts = {"envs": str(tmp_path / "repo" / "envs"), "pool": str(tmp_path / "repo" / "pool")}
    assert _mixed_checkouts(str(tmp_path / "links" / "shoal"), parts) is None


def test_this_install_does_not_warn(tmp_path):
    """As CI imports it (-P, from outside the tree) and from the tree's root."""
    code = "import shoal, shoal.pool, shoal.envs"
    for cwd, flags in ((tmp_path, ["-P"]), (SHOAL_DIR.parent, [])):
        out = subprocess.run([sys.executable, *flags, "-W", "error::RuntimeWarning", "-c", code],
                             capture_output=True, text=True, cwd=cwd, timeout=60)
        assert out.returncode == 0, out.stderr


def test_a_clone_root_on_sys_path_is_not_mixed_in_silently(tmp_path):
    """A copy of shoal/ alone (a clone not installed) run from its root: with
    this checkout installed editable, shoal.envs comes from here, and the
    import warns naming both; with a wheel installed, shoal.envs is not found
    and the error says to install the clone."""
    clone = tmp_path / "clone"
    # shoal/ as a checkout has it: an installed wheel's shoal/ also holds envs/ and pool/
    shutil.copytree(SHOAL_DIR, clone / "shoal", ignore=shutil.ignore_patterns("__pycache__", "envs", "pool"))
    envs_dir = Path(shoal.envs.__file__).parent
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([sys.executable, "-c", "import shoal"], capture_output=True, text=True,
                         cwd=clone, timeout=60, env=env)
    if envs_dir == SHOAL_DIR / "envs":   # a wheel's layout: nothing to mix with
        assert out.returncode != 0 and f"pip install -e {clone}" in out.stderr, out.stderr
        # a shoal is installed (this one): the way out is to step aside from the clone
        assert "run from another directory, or with python -P" in out.stderr, out.stderr
    else:
        assert out.returncode == 0, out.stderr
        assert "RuntimeWarning" in out.stderr and f"shoal is imported from {clone / 'shoal'}" in out.stderr
        assert f"shoal.envs from {envs_dir}" in out.stderr and f"pip install -e {clone}" in out.stderr


def test_a_gymnasium_older_than_1_1_is_named_at_import():
    """gymnasium < 1.1 (no vector AutoresetMode; a package pinning it lower
    leaves one in place) is an ImportError at `import shoal` naming the
    version, not a bare one deep inside the first make()."""
    code = "import gymnasium.vector as v\ndel v.AutoresetMode\nimport shoal\n"
    p = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and "ImportError: shoal needs gymnasium >= 1.1, and gymnasium " in p.stderr, p.stderr


@pytest.mark.parametrize("module, library, extra", [("shoal.pettingzoo_env", "pettingzoo", "pettingzoo"),
                                                    ("shoal.sb3", "stable_baselines3", "sb3")])
def test_a_missing_extra_is_named(module, library, extra):
    """Without the optional library, importing its front end says which
    extra to install (pettingzoo's once gave a bare ModuleNotFoundError),
    as a ModuleNotFoundError still, so that pytest.importorskip skips."""
    code = (f"import sys, pytest\nsys.modules[{library!r}] = None\n"
            f"try:\n    pytest.importorskip({module!r})\nexcept pytest.skip.Exception as e:\n"
            f"    print('skipped:', e)\nimport {module}\n")
    p = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 1 and f'pip install "shoal[{extra}]"' in p.stderr, p.stderr
    assert "ModuleNotFoundError: " in p.stderr and "skipped:" in p.stdout, (p.stdout, p.stderr)
