#!/usr/bin/env python
"""Gymnasium's own tests/vector suite, run against shoal.pool.AsyncVectorEnv.

    python scripts/gymnasium_vector_suite.py                  # both classes
    python scripts/gymnasium_vector_suite.py --only shoal -k test_async_vector_env
    python scripts/gymnasium_vector_suite.py --gymnasium-git ~/src/Gymnasium --commit main

What it does:
  1. extracts `tests/` (only that: the *installed* gymnasium package is what
     runs) from a Gymnasium git dir or checkout at --commit (default
     3f0476a8c, the commit docs/results.md names, if the repository has it,
     else HEAD) into a temporary folder (or --keep DIR);
  2. writes there a pytest.ini (the commit's [tool.pytest.ini_options]) and a
     conftest.py of its own that, with SHOAL_PATCH=1, puts
     shoal.pool.AsyncVectorEnv in place of gymnasium.vector.AsyncVectorEnv
     (and of gymnasium.vector.async_vector_env.AsyncVectorEnv) before any test
     module imports it, then checks after collection that every collected test
     module's `AsyncVectorEnv` name is shoal's class;
  3. runs `pytest tests/vector` twice, with gymnasium's class and with
     shoal's, each writing a junit xml, and prints passed / failed / error /
     skipped per class and the tests that pass with gymnasium's class but fail
     or error (or are missing) with shoal's.

Exit status: 0 if no test passes with gymnasium's class and fails with
shoal's; 1 if some do; 2 if the suite could not be run (no git dir, unknown
commit, pytest crashed or timed out, the class under test was not the one
expected).
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import tomllib
import xml.etree.ElementTree as ET

DEFAULT_GIT = "/work/.mirror/Farama-Foundation+Gymnasium"
DEFAULT_COMMIT = "3f0476a8c"
MARKER = ".shoal-gymnasium-suite"
HEADER_TAG = "shoal-suite: AsyncVectorEnv under test ="
EXPECTED_MODULE = {"gymnasium": "gymnasium.vector.", "shoal": "shoal."}

CONFTEST = '''\
"""Written by shoal's scripts/gymnasium_vector_suite.py (not part of Gymnasium).

SHOAL_PATCH=1: shoal.pool.AsyncVectorEnv replaces gymnasium's AsyncVectorEnv
under every name the tests reach it by. This file sits above tests/, so it
loads before any test module (and before a tests/conftest.py of Gymnasium's,
which still loads as usual).
"""
import os
import sys

import gymnasium.vector
import gymnasium.vector.async_vector_env

PATCHED = os.environ.get("SHOAL_PATCH") == "1"
if PATCHED:
    from shoal.pool import AsyncVectorEnv as _Shoal

    gymnasium.vector.AsyncVectorEnv = _Shoal
    gymnasium.vector.async_vector_env.AsyncVectorEnv = _Shoal
    # gymnasium.make_vec(..., vectorization_mode="async") looks up
    # gym.vector.AsyncVectorEnv at call time: covered by the line above.

_UNDER_TEST = gymnasium.vector.AsyncVectorEnv
_ROOT = os.path.dirname(os.path.abspath(__file__))


def pytest_report_header(config):
    cls = _UNDER_TEST
    return [f"%s {cls.__module__}.{cls.__qualname__} (SHOAL_PATCH={int(PATCHED)})"]


def pytest_collection_finish(session):
    tests_pkg = sys.modules.get("tests")
    if tests_pkg is not None:
        where = os.path.abspath(getattr(tests_pkg, "__file__", "") or "")
        assert where.startswith(_ROOT + os.sep), (
            f"the `tests` package was imported from {where}, not from {_ROOT}")
    assert gymnasium.vector.AsyncVectorEnv is _UNDER_TEST
    assert gymnasium.vector.async_vector_env.AsyncVectorEnv is _UNDER_TEST
    for name, module in list(sys.modules.items()):
        if name == "tests" or name.startswith("tests."):
            seen = getattr(module, "AsyncVectorEnv", _UNDER_TEST)
            assert seen is _UNDER_TEST, (
                f"{name}.AsyncVectorEnv is {seen!r}, not {_UNDER_TEST!r}")
''' % HEADER_TAG


def fail(msg: str) -> "NoReturn":  # noqa: F821
    print(f"gymnasium_vector_suite: {msg}", file=sys.stderr)
    sys.exit(2)


def git(git_dir: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", f"--git-dir={git_dir}", *args],
                          capture_output=True, check=check)


def resolve_git_dir(path: str) -> str:
    """A bare git dir, a checkout (its .git), or a mirror folder holding repo/."""
    if not os.path.isdir(path):
        fail(f"no Gymnasium git dir at {path} (pass --gymnasium-git DIR: a git "
             "dir or a checkout of https://github.com/Farama-Foundation/Gymnasium)")
    for cand in (os.path.join(path, ".git"), path, os.path.join(path, "repo")):
        if os.path.exists(cand) and git(cand, "rev-parse", "--git-dir",
                                        check=False).returncode == 0:
            return cand
    fail(f"{path} is not a git dir or checkout (nor has one at .git or repo/)")


def resolve_commit(git_dir: str, rev: str | None) -> tuple[str, str]:
    if rev is None:
        ok = git(git_dir, "cat-file", "-e", f"{DEFAULT_COMMIT}^{{commit}}", check=False)
        rev = DEFAULT_COMMIT if ok.returncode == 0 else "HEAD"
    out = git(git_dir, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    if out.returncode != 0:
        fail(f"commit {rev!r} not found in {git_dir}")
    sha = out.stdout.decode().strip()
    subject = git(git_dir, "log", "-1", "--format=%cs %s", sha).stdout.decode().strip()
    return sha, subject


def prepare(git_dir: str, sha: str, dest: str) -> None:
    """Extract tests/ at sha into dest; write pytest.ini and our conftest.py."""
    if os.path.exists(dest) and os.listdir(dest):
        if not os.path.exists(os.path.join(dest, MARKER)):
            fail(f"--keep {dest} is not empty and was not made by this script")
        for name in os.listdir(dest):
            p = os.path.join(dest, name)
            shutil.rmtree(p) if os.path.isdir(p) and not os.path.islink(p) else os.remove(p)
    os.makedirs(dest, exist_ok=True)
    open(os.path.join(dest, MARKER), "w").close()

    archive = git(git_dir, "archive", "--format=tar", sha, "tests", check=False)
    if archive.returncode != 0:
        fail(f"git archive {sha} tests failed: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    if not os.path.isdir(os.path.join(dest, "tests", "vector")):
        fail(f"commit {sha} has no tests/vector")

    # The commit's own pytest options (filterwarnings), as a pytest.ini that
    # also pins the rootdir to dest.
    opts: dict = {}
    pyproject = git(git_dir, "show", f"{sha}:pyproject.toml", check=False)
    if pyproject.returncode == 0:
        data = tomllib.loads(pyproject.stdout.decode())
        opts = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
    lines = ["[pytest]"]
    for key, value in opts.items():
        if isinstance(value, list):
            lines.append(f"{key} =")
            lines += [f"    {v}" for v in value]
        else:
            lines.append(f"{key} = {value}")
    with open(os.path.join(dest, "pytest.ini"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(dest, "conftest.py"), "w") as f:
        f.write(CONFTEST)


def run_pytest(dest: str, which: str, args: argparse.Namespace) -> dict:
    junit = os.path.join(dest, f"junit-{which}.xml")
    log = os.path.join(dest, f"pytest-{which}.log")
    for p in (junit, log):
        if os.path.exists(p):
            os.remove(p)
    cmd = [sys.executable, "-m", "pytest", "tests/vector", "-p", "no:cacheprovider",
           "--rootdir", dest, "-c", os.path.join(dest, "pytest.ini"),
           f"--junitxml={junit}", "-o", "junit_family=xunit1",
           "-o", f"faulthandler_timeout={args.faulthandler_timeout}", "-rfE"]
    if args.k:
        cmd += ["-k", args.k]
    if args.workers:
        cmd += ["-n", str(args.workers)]
    env = dict(os.environ)
    env.pop("SHOAL_PATCH", None)
    if which == "shoal":
        env["SHOAL_PATCH"] = "1"
    print(f"[{which}] running pytest tests/vector (log: {log}) ...", flush=True)
    t0 = time.monotonic()
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=dest, env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            fail(f"[{which}] pytest ran past --timeout {args.timeout} s; see {log}")
    elapsed = time.monotonic() - t0
    text = open(log, errors="replace").read()
    tail = "\n".join(text.splitlines()[-25:])
    if rc not in (0, 1, 5):
        fail(f"[{which}] pytest exited {rc}; log tail:\n{tail}")
    under_test = [ln.split("=", 1)[1].strip() for ln in text.splitlines()
                  if ln.startswith(HEADER_TAG)]
    if not under_test:
        fail(f"[{which}] the run did not report its AsyncVectorEnv class; log tail:\n{tail}")
    if not under_test[0].startswith(EXPECTED_MODULE[which]):
        fail(f"[{which}] the run tested {under_test[0]}, expected a class from "
             f"{EXPECTED_MODULE[which]}*")
    if not os.path.exists(junit):
        fail(f"[{which}] pytest wrote no junit xml; log tail:\n{tail}")
    summary = next((ln for ln in reversed(text.splitlines()) if " in " in ln and
                    ("passed" in ln or "failed" in ln or "skipped" in ln
                     or "no tests ran" in ln)), "")
    print(f"[{which}] {under_test[0]}: {summary.strip('= ')} "
          f"({elapsed:.0f} s wall, pytest rc {rc})", flush=True)
    return {"class": under_test[0], "outcomes": parse_junit(junit), "rc": rc}


def parse_junit(path: str) -> dict[str, tuple[str, str]]:
    """test id -> (outcome, message); outcome in passed/failed/error/skipped."""
    results: dict[str, tuple[str, str]] = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        file = case.get("file") or ""
        classname = case.get("classname") or ""
        module = file[:-3].replace("/", ".") if file.endswith(".py") else ""
        parts = [file or classname]
        if module and classname.startswith(module + "."):
            parts += classname[len(module) + 1:].split(".")
        parts.append(case.get("name") or "")
        tid = "::".join(parts)
        tags = {child.tag: child for child in case}
        for outcome, tag in (("failed", "failure"), ("error", "error"), ("skipped", "skipped")):
            if tag in tags:
                el = tags[tag]
                msg = (el.get("message") or "").strip()
                body = (el.text or "").strip()
                results[tid] = (outcome, msg if msg else body.splitlines()[-1] if body else "")
                if outcome != "skipped" and body:
                    results[tid] = (outcome, msg + "\n" + "\n".join(body.splitlines()[-12:]))
                break
        else:
            results[tid] = ("passed", "")
    return results


def counts(outcomes: dict[str, tuple[str, str]]) -> dict[str, int]:
    c = {"passed": 0, "failed": 0, "error": 0, "skipped": 0}
    for outcome, _ in outcomes.values():
        c[outcome] += 1
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gymnasium-git", default=DEFAULT_GIT, metavar="DIR",
                    help="a Gymnasium git dir or checkout (default: %(default)s)")
    ap.add_argument("--commit", default=None, metavar="REV",
                    help=f"default: {DEFAULT_COMMIT} if the repository has it, else HEAD")
    ap.add_argument("--keep", default=None, metavar="DIR",
                    help="extract into DIR and leave it there (default: a temp folder, removed)")
    ap.add_argument("-k", default=None, metavar="EXPR", help="passed to pytest -k")
    ap.add_argument("--only", choices=("gymnasium", "shoal", "both"), default="both")
    ap.add_argument("--workers", type=int, default=0,
                    help="pytest-xdist workers (-n); needs pytest-xdist installed")
    ap.add_argument("--timeout", type=float, default=3600,
                    help="seconds allowed for each pytest run (default: %(default)s)")
    ap.add_argument("--faulthandler-timeout", type=int, default=300,
                    help="pytest dumps stacks of a test running longer (default: %(default)s)")
    args = ap.parse_args()

    if args.workers:
        try:
            import xdist  # noqa: F401
        except ImportError:
            fail("--workers needs pytest-xdist, which is not installed")

    git_dir = resolve_git_dir(args.gymnasium_git)
    sha, subject = resolve_commit(git_dir, args.commit)
    import gymnasium
    print(f"Gymnasium tests at {sha[:12]} ({subject}) from {git_dir}")
    print(f"installed gymnasium {gymnasium.__version__} ({os.path.dirname(gymnasium.__file__)})")

    dest = os.path.abspath(args.keep) if args.keep else tempfile.mkdtemp(prefix="gym-vector-suite-")
    try:
        prepare(git_dir, sha, dest)
        which = ["gymnasium", "shoal"] if args.only == "both" else [args.only]
        runs = {w: run_pytest(dest, w, args) for w in which}
    finally:
        if not args.keep:
            shutil.rmtree(dest, ignore_errors=True)

    print()
    print(f"| class under test | passed | failed | error | skipped |")
    print(f"|---|---:|---:|---:|---:|")
    for w, r in runs.items():
        c = counts(r["outcomes"])
        print(f"| {r['class']} | {c['passed']} | {c['failed']} | {c['error']} | {c['skipped']} |")
    for w, r in runs.items():
        bad = sorted(t for t, (o, _) in r["outcomes"].items() if o in ("failed", "error"))
        if bad:
            print(f"\nfailed/error with {w}'s class ({len(bad)}):")
            for t in bad:
                print(f"  {t}")

    if set(runs) != {"gymnasium", "shoal"}:
        return 0
    gym, sh = runs["gymnasium"]["outcomes"], runs["shoal"]["outcomes"]
    regressions = [t for t, (o, _) in sorted(gym.items())
                   if o == "passed" and sh.get(t, ("missing", ""))[0] in ("failed", "error", "missing")]
    gained = [t for t, (o, _) in gym.items() if o != "passed" and sh.get(t, ("",))[0] == "passed"]
    lost_to_skip = [t for t, (o, _) in gym.items() if o == "passed" and sh.get(t, ("",))[0] == "skipped"]
    print(f"\npass with shoal's class but not with gymnasium's: {len(gained)}")
    if lost_to_skip:
        print(f"pass with gymnasium's class, skipped with shoal's ({len(lost_to_skip)}):")
        for t in sorted(lost_to_skip):
            print(f"  {t}: {sh[t][1].splitlines()[0] if sh[t][1] else ''}")
    print(f"pass with gymnasium's class, fail/error with shoal's: {len(regressions)}")
    for t in regressions:
        outcome, msg = sh.get(t, ("missing", "not in shoal's run"))
        print(f"  {t} [{outcome}]")
        for ln in msg.splitlines():
            print(f"      {ln}")
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
