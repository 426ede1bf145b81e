"""The `no_leaks` fixture catches what it claims to: a pool's memfd mapping,
a descriptor and a child process left behind (each leaked on purpose inside
a test that itself uses no_leaks, then released so the outer check passes)."""
import os
import subprocess
import sys

import numpy as np
import pytest

from shoal.pool import Multiprocessing

from conftest import assert_no_leaks, leak_snapshot, shm_entries

SHORT = 0.3  # settle time for the checks that must fail


def test_leaked_pool_mapping_fails_the_check(no_leaks):
    inner = leak_snapshot()
    pool = Multiprocessing("CartPole", 4, num_workers=1)
    pool.reset(seed=0)
    obs = pool.obs  # a view: keeps the pool's memfd mapped after close()
    pool.close()
    assert shm_entries() == inner.shm  # what the old fixture looked at: a memfd is not there
    with pytest.raises(AssertionError, match="memfd mappings left behind"):
        assert_no_leaks(inner, settle_s=SHORT)
    assert obs.shape == (4, 4)
    del obs
    assert_no_leaks(inner)


def test_pool_left_open_fails_the_check(no_leaks):
    inner = leak_snapshot()
    pool = Multiprocessing("CartPole", 4, num_workers=1)
    with pytest.raises(AssertionError) as failure:
        assert_no_leaks(inner, settle_s=SHORT)
    message = str(failure.value)
    assert "memfd mappings left behind" in message
    assert "child processes left behind" in message
    assert "open descriptors" in message  # the region's memfd itself
    pool.close()
    del pool
    assert_no_leaks(inner)


def test_leaked_descriptor_fails_the_check(no_leaks):
    inner = leak_snapshot()
    fd = os.memfd_create("leak-test", os.MFD_CLOEXEC)
    try:
        with pytest.raises(AssertionError, match="open descriptors.*memfd:leak-test"):
            assert_no_leaks(inner, settle_s=SHORT)
    finally:
        os.close(fd)
    assert_no_leaks(inner)


def test_leaked_child_fails_the_check(no_leaks):
    inner = leak_snapshot()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(AssertionError, match=f"child processes left behind: \\[{child.pid}\\]"):
            assert_no_leaks(inner, settle_s=SHORT)
    finally:
        child.kill()
        child.wait()
    assert_no_leaks(inner)


def test_a_clean_test_passes(no_leaks):
    inner = leak_snapshot()
    with Multiprocessing("CartPole", 4, num_workers=2) as pool:
        obs, info = pool.reset(seed=0)
        pool.step(np.zeros(4, np.int32))
    del obs, info   # views of the pool's memory
    assert_no_leaks(inner)


def test_another_programs_dev_shm_entry_is_not_a_leak(tmp_path):
    """A neighbour job's multiprocessing lock (/dev/shm/sem.mp-*, made while
    a test runs) is not this test's leak; the same entry left by nobody is."""
    import time

    inner = leak_snapshot()
    ready = tmp_path / "ready"
    # double fork: the lock's holder is not a descendant of this process
    neighbour = subprocess.run([sys.executable, "-c", f"""
import multiprocessing as mp, os, pathlib, time
if os.fork() == 0:
    os.setsid()
    lock = mp.get_context("spawn").Lock()   # a named semaphore, kept for its children
    pathlib.Path({str(ready)!r}).write_text(str(os.getpid()))
    time.sleep(30)
    os._exit(0)
"""], timeout=60, stderr=subprocess.DEVNULL)   # (its resource tracker warns when it is killed)
    assert neighbour.returncode == 0
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    holder = int(ready.read_text())
    try:
        assert shm_entries() - inner.shm, "the neighbour's lock made no /dev/shm entry"
        assert_no_leaks(inner, settle_s=SHORT)
        stray = "sem.shoal-leak-test"
        with open(f"/dev/shm/{stray}", "w"):
            pass
        try:
            with pytest.raises(AssertionError, match=stray):
                assert_no_leaks(inner, settle_s=SHORT)
        finally:
            os.unlink(f"/dev/shm/{stray}")
    finally:
        os.kill(holder, 9)
