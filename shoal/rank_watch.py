"""A torchrun rank ends with its launcher. Torch-free, so that `shoal
train` arms it first thing, before its imports (torch's take seconds): a
launcher killed while its ranks were still starting left them waiting for
its store as orphans (reparented before they armed it, they could not tell
that their launcher had gone)."""
from __future__ import annotations

import ctypes
import os
import signal
import sys

_launcher_pid: int | None = None   # the parent when first armed


def end_with_launcher() -> None:
    """SIGTERM this rank when its launcher (torchrun's agent) dies, as when
    it is SIGKILLed by a scheduler or the OOM killer: torchrun starts each
    rank in a session of its own, so it would otherwise train on as an
    orphan holding the run folder. SIGTERM is the trainer's clean stop (a
    checkpoint, exit 143). Call it as early as the rank can; a later call
    checks that the parent is still the one the first call saw. Linux only
    (prctl PR_SET_PDEATHSIG)."""
    global _launcher_pid
    if not sys.platform.startswith("linux"):
        return
    if _launcher_pid is None:
        _launcher_pid = os.getppid()
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0)
    # It died before the prctl took effect (or since the first call): this
    # rank was reparented. (A parent that is pid 1 at the first call may be
    # the launcher itself: torchrun as a container's entrypoint.)
    if os.getppid() != _launcher_pid:
        os.kill(os.getpid(), signal.SIGTERM)
