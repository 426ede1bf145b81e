import gc
import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass

import pytest


def shm_entries() -> set[str]:
    return set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()


def child_pids() -> set[int]:
    """Live (non-zombie) children of this process."""
    pids = set()
    try:
        with open(f"/proc/{os.getpid()}/task/{os.getpid()}/children") as f:
            candidates = [int(p) for p in f.read().split()]
    except FileNotFoundError:
        return pids
    for pid in candidates:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        # multiprocessing's own helpers live as long as the test process
        if state != "Z" and b"resource_tracker" not in cmdline and b"forkserver" not in cmdline:
            pids.add(pid)
    return pids


def open_fds() -> dict[int, str]:
    """This process's open descriptors: fd -> what it points at."""
    fds = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            fds[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # the descriptor listdir itself used, already closed
    return fds


def memfd_mappings() -> Counter:
    """Lines of /proc/self/maps that map a memfd (a pool's region is one)."""
    with open("/proc/self/maps") as f:
        return Counter(line.rstrip("\n") for line in f if "memfd:" in line)


def _helper_fds() -> set[int]:
    """Descriptors multiprocessing keeps for the whole process (its
    forkserver and resource tracker, started on first use by some test)."""
    fds = set()
    try:
        from multiprocessing import forkserver, resource_tracker
        for fd in (forkserver._forkserver._forkserver_alive_fd, resource_tracker._resource_tracker._fd):
            if fd is not None:
                fds.add(fd)
    except (ImportError, AttributeError):
        pass
    return fds


@dataclass(frozen=True)
class LeakSnapshot:
    fds: dict
    memfds: Counter
    children: frozenset
    shm: frozenset


def _held_by_another_process(shm_name: str) -> bool:
    """Whether a live process outside this one and its descendants maps or
    opens /dev/shm/`shm_name`: another program's (a neighbour job's
    multiprocessing lock), not a leak of this test. Scanned only for a new
    entry, which is rare."""
    path = f"/dev/shm/{shm_name}"
    try:   # (glibc maps a semaphore under its temporary name: match the inode)
        inode = str(os.stat(path).st_ino)
    except OSError:
        return True   # gone already: nobody's leak
    ours = {os.getpid()}
    todo = [os.getpid()]
    while todo:
        try:
            with open(f"/proc/{todo[-1]}/task/{todo.pop()}/children") as f:
                kids = [int(p) for p in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            kids = []
        ours.update(kids)
        todo += kids
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in ours:
            continue
        try:
            with open(f"/proc/{entry}/maps") as maps:
                for line in maps:
                    fields = line.split(maxsplit=5)
                    if len(fields) == 6 and fields[4] == inode and fields[5].startswith("/dev/shm/"):
                        return True
            if any(os.stat(f"/proc/{entry}/fd/{fd}").st_ino == int(inode)
                   and os.readlink(f"/proc/{entry}/fd/{fd}").startswith("/dev/shm/")
                   for fd in os.listdir(f"/proc/{entry}/fd")):
                return True
        except OSError:   # gone meanwhile, or not ours to read
            continue
    return False


def leak_snapshot() -> LeakSnapshot:
    return LeakSnapshot(open_fds(), memfd_mappings(), frozenset(child_pids()), frozenset(shm_entries()))


def leaks_since(before: LeakSnapshot) -> list[str]:
    """What this process holds now and did not hold at `before`, in words."""
    problems = []
    now = open_fds()
    helpers = _helper_fds()
    # multiprocessing's shared-memory heap (/dev/shm/pym-*: arenas that
    # gymnasium's own AsyncVectorEnv opens on first use) lives as long as the process
    heap = {fd for fd, target in now.items() if target.startswith("/dev/shm/pym-")}
    kept_before = {fd for fd in before.fds if fd not in helpers and fd not in heap}
    kept_now = {fd for fd in now if fd not in helpers and fd not in heap}
    if len(kept_now) > len(kept_before):
        new_fds = {fd: now[fd] for fd in sorted(kept_now) if before.fds.get(fd) != now[fd]}
        problems.append(f"open descriptors: {len(kept_before)} before, {len(kept_now)} after; new: {new_fds}")
    memfds = memfd_mappings() - before.memfds
    if memfds:
        problems.append(f"memfd mappings left behind: {sorted(memfds)}")
    children = child_pids() - before.children
    if children:
        problems.append(f"child processes left behind: {sorted(children)}")
    shm = {name for name in shm_entries() - before.shm if not _held_by_another_process(name)}
    if shm:
        problems.append(f"/dev/shm entries left behind: {sorted(shm)}")
    return problems


def assert_no_leaks(before: LeakSnapshot, settle_s: float = 5.0) -> None:
    """Fails unless, within settle_s (gc runs and workers exit
    asynchronously), the process is back to `before`: no more open
    descriptors, no new memfd mapping, no new child process, no new
    /dev/shm entry."""
    deadline = time.monotonic() + settle_s
    while True:
        gc.collect()
        problems = leaks_since(before)
        if not problems or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    assert not problems, "resources left behind: " + "; ".join(problems)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.shoal_call_failed = report.failed
    return report


@pytest.fixture
def no_leaks(request):
    """Asserts that a test leaves no open descriptor, memfd mapping, child
    process or /dev/shm entry behind (see assert_no_leaks).

    Fixtures that use this one (a pool fixture) are finished before it
    checks; pytest itself still holds their values (item.funcargs) until the
    test's teardown is over, so those references are dropped first. After a
    failed test its traceback keeps the test's locals (pools, arrays) alive:
    then only child processes and /dev/shm are checked."""
    gc.collect()
    before = leak_snapshot()
    yield before
    funcargs = getattr(request.node, "funcargs", None)
    if isinstance(funcargs, dict):
        for name in [n for n in funcargs if n != "no_leaks"]:
            del funcargs[name]
    if getattr(request.node, "shoal_call_failed", False):
        before = LeakSnapshot(open_fds(), memfd_mappings(), before.children, before.shm)
    assert_no_leaks(before)


@pytest.fixture(autouse=True, scope="session")
def _temp_files_in_pytest_tmp(tmp_path_factory):
    """Temp files the tests leave behind go under pytest's own temp folder,
    which pytest prunes, instead of piling up in /tmp: those of this process
    (tempfile: SB3's learn() makes an SB3-<date> folder per call) and of the
    processes it starts (TMPDIR: torchrun keeps a torchelastic_* log folder;
    children killed on purpose cannot remove their pymp-* folder)."""
    folder = str(tmp_path_factory.mktemp("temp_files"))
    saved = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"] = tempfile.tempdir = folder
    yield
    if saved[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved[0]
    tempfile.tempdir = saved[1]
