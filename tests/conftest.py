import os

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
        except FileNotFoundError:
            continue
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        # multiprocessing's own helpers live as long as the test process
        if state != "Z" and b"resource_tracker" not in cmdline and b"forkserver" not in cmdline:
            pids.add(pid)
    return pids


@pytest.fixture
def no_leaks():
    """Asserts that a test leaves no /dev/shm entry and no child process."""
    shm_before, children_before = shm_entries(), child_pids()
    yield
    import gc
    import time
    gc.collect()
    deadline = time.monotonic() + 5
    while child_pids() - children_before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert child_pids() - children_before == set(), "child processes left behind"
    assert shm_entries() - shm_before == set(), "shared-memory segments left behind"
