"""Data-parallel training across processes, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 -m shoal train cartpole
    torchrun --nnodes 2 --node-rank R --rdzv-endpoint HOST:PORT --nproc-per-node 8 -m shoal train snake

torchrun starts one trainer per rank and tells it who it is through the
environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE). Each rank
owns its own pool and rollouts; after every minibatch's backward pass the
gradients are averaged across ranks (one sum of the flattened gradients, as
CleanRL's multi-GPU PPO all-reduces them), so every rank takes the same
optimizer step and the weights never drift apart. Ranks that share one
machine under gloo sum through shared memory (NodeSum), the others through
torch.distributed. Rollout inference is the
plain policy: there is no DDP wrapper to keep out of the way.

This module holds only the collective operations the trainer needs; the
training loop (shoal/train.py) decides when to call them. Without torchrun
(or with one rank) `Dist.single()` is used: every operation is the
identity and torch.distributed is never initialised.
"""
from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import mmap
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist
# Imported here, before any process group exists: its functions take
# `group=group.WORLD` as default arguments, bound at first import, and torch
# imports it lazily (the first optimizer made imports torch._dynamo, which
# imports it). Imported after init_process_group, those defaults hold the
# live group, destroy_process_group cannot free it, gloo's worker threads
# outlive Dist.close(), and one releasing its last collective while the
# interpreter shuts down aborts the rank ("terminate called without an
# active exception": 5 of 45 two-rank runs with the trainer's sums through gloo).
import torch.distributed.nn.functional  # noqa: F401

from shoal.rank_watch import end_with_launcher

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")

# Below this many floats (ranks x elements), gloo sums by all-gather: one
# exchange, where its all-reduce takes several. Measured on the 2-core dev
# VM, 2 ranks: all-gather 0.8-1.4 ms, all-reduce 2.0-2.5 ms, for 4.7 k and
# 126 k floats (docs/results.md, "Scaling out"). Past it, the all-reduce's
# traffic (independent of the rank count) wins.
GATHER_SUM_MAX_FLOATS = 1 << 22

# NodeSum's first slot size; a larger tensor grows it (collectively), up to
# NODE_SUM_MAX_BYTES for all ranks' slots of one set (the region holds two):
# past it a sum is bandwidth-bound, and the backend's all-reduce needs no
# memory per rank.
NODE_SUM_FIRST_BYTES = 1 << 20
NODE_SUM_MAX_BYTES = 1 << 28


def _exited(pid: int) -> bool:
    """Whether process `pid` is gone or a zombie: torchrun reaps its ranks
    only when it shuts them all down, so a rank that exited stays a zombie,
    which os.kill(pid, 0) still finds."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return False


class DistError(RuntimeError):
    """A distributed run that cannot start as configured, or whose peer stopped answering."""


class NodeSum:
    """Sums over the ranks of one node through shared memory, for gloo runs
    whose ranks all share this machine ([dist] node_sum = auto).

    A gloo collective between two local processes costs 0.8-2.5 ms on the
    2-core dev VM (docs/results.md, "Scaling out") where a hand-off through
    shared memory costs microseconds; with a collective per minibatch that
    is the difference between 2 ranks losing to one process and not.

    The region is a memfd of rank 0, opened by the others through
    /proc/<pid>/fd (nothing is ever left in /dev/shm). Its layout: one
    64-byte word per rank (pool/shoal_sync.h, shoal_rank_word), then two
    slot sets of `world` slots of `capacity` bytes. A sum:
    copy the tensor into this rank's slot of set (generation % 2), meet the
    other ranks at that generation (pool/_native.ranks_meet), add the slots
    in rank order: every rank computes the same sum, bit for bit, as the
    all-gather path does. The sets alternate, so a rank that starts the
    next sum cannot overwrite a slot another rank is still reading: it
    cannot pass the next meeting before that rank has finished reading."""

    WAIT_SLICE_S = 0.5   # between slices: Ctrl-C, and whether the missing rank still lives

    def __init__(self, rank: int, world: int, pids: list[int], timeout_s: float):
        """Not mapped yet: see open()."""
        from shoal.pool import _native

        self._native = _native
        self.rank, self.world, self.pids, self.timeout_s = rank, world, pids, timeout_s
        self.slots_offset = world * _native.RANK_WORD_BYTES
        self.memory = self.region = None
        self.capacity = 0

    @classmethod
    def open(cls, rank: int, world: int, capacity: int, timeout_s: float) -> "NodeSum":
        """Collective (every rank calls it): rank 0 makes the region, the
        others map it. Raises DistError on every rank if any rank cannot."""
        pids = [0] * world
        torch_dist.all_gather_object(pids, os.getpid())
        node = cls(rank, world, pids, timeout_s)
        node._map(capacity)
        return node

    def _map(self, capacity: int) -> None:
        """Collective: a fresh region with slots of `capacity` bytes (rounded
        up to 64), its rank words at generation 0."""
        capacity = -(-capacity // 64) * 64
        size = self.slots_offset + 2 * self.world * capacity
        fd, memory, error = -1, None, ""
        try:
            if self.rank == 0:
                fd = os.memfd_create("shoal-node-sum", os.MFD_CLOEXEC)
                os.ftruncate(fd, size)
        except OSError as e:
            error = f"rank 0: {e}"
        where = [(os.getpid(), fd)]
        torch_dist.broadcast_object_list(where, src=0)
        try:
            if self.rank != 0 and where[0][1] >= 0:
                fd = os.open(f"/proc/{where[0][0]}/fd/{where[0][1]}", os.O_RDWR | os.O_CLOEXEC)
            if fd >= 0:
                memory = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            error = f"rank {self.rank}: {e}"
        failed = torch.tensor([0.0 if memory is not None else 1.0])
        torch_dist.all_reduce(failed)   # after it, every rank has mapped (or failed): fds may close
        if fd >= 0:
            os.close(fd)                # the mapping keeps the memory
        if failed.item():
            if memory is not None:
                memory.close()
            raise DistError(f"shared memory between the ranks of this node failed "
                            f"({error or 'on another rank'})")
        self.memory, self.capacity, self.generation = memory, capacity, 0
        self.region = torch.frombuffer(memory, dtype=torch.uint8)
        self.words_address = self.region.data_ptr()

    def sum(self, x: torch.Tensor) -> torch.Tensor:
        """x (a CPU tensor, the same shape and dtype on every rank) summed
        over the ranks: a new tensor."""
        nbytes = x.numel() * x.element_size()
        if nbytes > self.capacity:              # every rank sees the same size: they grow together
            self.close()                        # (doubling, but never past Dist._sum's limit)
            self._map(max(nbytes, min(2 * self.capacity, NODE_SUM_MAX_BYTES // self.world)))
        self.generation = (self.generation + 1) & 0xFFFFFFFF
        set_offset = self.slots_offset + (self.generation % 2) * self.world * self.capacity
        slots = self.region[set_offset:set_offset + self.world * self.capacity].view(self.world, self.capacity)
        slots[self.rank, :nbytes].view(x.dtype).view(x.shape).copy_(x)
        self._meet()
        return slots[:, :nbytes].view(x.dtype).view(self.world, *x.shape).sum(0)

    def _meet(self) -> None:
        start = time.monotonic()
        slice_s = min(self.WAIT_SLICE_S, self.timeout_s)
        missing = self._native.ranks_meet(self.words_address, self.rank, self.world, self.generation, slice_s)
        while missing >= 0:
            waited = time.monotonic() - start
            if _exited(self.pids[missing]):
                raise DistError(f"rank {missing} (pid {self.pids[missing]}) exited while rank {self.rank} "
                                f"waited for it in a sum over the ranks")
            if waited >= self.timeout_s:
                raise DistError(f"rank {missing} did not reach sum {self.generation} within [dist] timeout = "
                                f"{self.timeout_s:g} s (rank {self.rank} waited)")
            missing = self._native.ranks_meet(self.words_address, self.rank, self.world, self.generation,
                                              min(slice_s, self.timeout_s - waited), arrive=False)

    def close(self) -> None:
        memory, self.memory, self.region = self.memory, None, None
        try:
            if memory is not None:
                memory.close()
        except BufferError:   # a view of the region still lives: the mapping goes with it
            pass


@dataclass
class Dist:
    """Who this process is in a data-parallel run, and the collectives.

    rank / world_size: across all nodes; local_rank / local_world_size:
    on this node (they pick the GPU and the share of the node's cores).
    backend: "gloo" or "nccl"; None for a single process."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    backend: str | None = None
    device: torch.device = torch.device("cpu")  # where collective tensors live (cuda for nccl)
    node_sum: NodeSum | None = None             # sums through shared memory (all ranks on this node, gloo)

    @classmethod
    def single(cls) -> "Dist":
        return cls()

    @property
    def enabled(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes the run folder, logs and checkpoints."""
        return self.rank == 0

    # ---- collectives: the identity for a single process ----
    def average_gradients(self, params) -> None:
        """Replace each parameter's gradient by its mean over the ranks:
        one sum (_sum) of all gradients flattened into one buffer. A
        parameter without a gradient on this rank counts as zero (every
        rank must send the same layout)."""
        if not self.enabled:
            return
        params = [p for p in params if p.requires_grad]
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = self._sum(torch.cat([g.reshape(-1) for g in grads]).to(self.device))
        flat /= self.world_size
        offset = 0
        for p in params:
            n = p.numel()
            p.grad = flat[offset:offset + n].view_as(p).to(p.device)
            offset += n

    def all_reduce_sum(self, x: torch.Tensor) -> torch.Tensor:
        """x summed over the ranks (a new tensor on x's device)."""
        if not self.enabled:
            return x
        return self._sum(x.detach().to(self.device, copy=True)).to(x.device)

    def _sum(self, x: torch.Tensor) -> torch.Tensor:
        """x (contiguous, on self.device) summed over the ranks. Small
        tensors over gloo: gathered, then summed in rank order on every
        rank (the same result everywhere, bit for bit); else an all-reduce.
        With every rank on this node: the same sum through shared memory."""
        if self.node_sum is not None and x.numel() * x.element_size() * self.world_size <= NODE_SUM_MAX_BYTES:
            return self.node_sum.sum(x)
        if self.backend == "gloo" and x.numel() * self.world_size <= GATHER_SUM_MAX_FLOATS:
            gathered = x.new_empty((self.world_size, *x.shape))
            torch_dist.all_gather(list(gathered.unbind(0)), x)
            return gathered.sum(0)
        torch_dist.all_reduce(x, op=torch_dist.ReduceOp.SUM)
        return x

    def sum_floats(self, values: list[float]) -> list[float]:
        """Plain numbers summed over the ranks, in one collective."""
        if not self.enabled:
            return list(values)
        return self.all_reduce_sum(torch.tensor(values, dtype=torch.float64)).tolist()

    def broadcast_module(self, module: torch.nn.Module) -> None:
        """Rank 0's parameters and buffers (obs statistics included) copied to every rank."""
        if not self.enabled:
            return
        for t in module.state_dict().values():
            buf = t.detach().to(self.device, copy=True)
            torch_dist.broadcast(buf, src=0)
            t.copy_(buf.to(t.device))

    def barrier(self) -> None:
        if self.enabled:
            torch_dist.barrier()

    def close(self) -> None:
        if self.node_sum is not None:
            self.node_sum.close()
            self.node_sum = None
        if self.enabled and torch_dist.is_initialized():
            torch_dist.destroy_process_group()

    def describe(self) -> str:
        sums = ", sums through shared memory" if self.node_sum is not None else ""
        return (f"rank {self.rank} of {self.world_size} (local {self.local_rank} of "
                f"{self.local_world_size} on {socket.gethostname()}, pid {os.getpid()}), {self.backend}{sums}")


def planned_world_size() -> int:
    """The number of ranks torchrun started (1 without torchrun): known
    before joining the process group, so a config that cannot be split
    over the ranks fails before any rank waits for the others."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise DistError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r}: expected an integer (set by torchrun)") from None


def planned_cores_per_rank() -> int:
    """This node's cores (its affinity mask and a container's CPU quota:
    shoal.pool.available_cores) shared among its ranks (LOCAL_WORLD_SIZE of
    them)."""
    from shoal.pool import available_cores

    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, available_cores() // local)


def planned_main_rank() -> bool:
    """True unless torchrun's RANK names another rank than 0: before the
    process group exists, it says which rank prints the run's notes once."""
    return os.environ.get("RANK", "0").strip() in ("0", "")


def launched_by_torchrun() -> bool:
    """True when torchrun's variables say this process is one of several ranks."""
    return planned_world_size() > 1


def _env_int(name: str) -> int:
    value = os.environ.get(name)
    if value is None:
        raise DistError(f"WORLD_SIZE > 1 but {name} is not set: start distributed runs with torchrun "
                        f"(torchrun --nproc-per-node N -m shoal train ENV), which sets "
                        f"{', '.join(TORCHRUN_VARS)}")
    try:
        return int(value)
    except ValueError:
        raise DistError(f"{name}={value!r}: expected an integer (set by torchrun)") from None


def pick_backend(requested: str, device: torch.device, local_world_size: int) -> str:
    """[dist] backend: auto is nccl when the learner is on a GPU and each of
    this node's ranks has a GPU of its own (nccl refuses two ranks on one
    GPU), else gloo."""
    if requested != "auto":
        if requested == "nccl" and device.type != "cuda":
            raise DistError("[dist] backend = nccl needs the learner on a GPU ([train] device = cuda); "
                            "use gloo (or auto) for a CPU learner")
        return requested
    if device.type == "cuda" and torch.cuda.device_count() >= local_world_size:
        return "nccl"
    return "gloo"


def rank_device(name: str, local_rank: int) -> torch.device:
    """The learner's device for this rank: `cuda` or `auto` (with a GPU)
    means this node's GPU number local_rank (modulo the GPUs present);
    an explicit cuda:N is kept (ranks may share a GPU), cpu stays cpu."""
    if name in ("cuda", "auto") and torch.cuda.is_available():
        return torch.device("cuda", local_rank % torch.cuda.device_count())
    if name == "auto":
        return torch.device("cpu")
    return torch.device(name)


def check_same_config(cfg: dict, device: torch.device, checkpoint_digest: str | None = None) -> None:
    """DistError on every rank unless all ranks were started with the same
    config (flags and ini files; [train] run_dir aside): ranks that differ
    (an ini edited on one node, a flag given to one rank) would fall out of
    step in their sums and train on corrupted gradients until the timeout.
    One collective: the max of each rank's (digest, -digest)."""
    shared = {section: {key: value for key, value in keys.items()
                        if (section, key) != ("train", "run_dir")} for section, keys in cfg.items()}
    # (and the checkpoint each resumes, by content: a stale copy on one node
    # would load other weights and optimizer state, and the ranks diverge)
    text = json.dumps([shared, checkpoint_digest], sort_keys=True, default=str)
    digest = int.from_bytes(hashlib.sha256(text.encode()).digest()[:7], "big")
    both = torch.tensor([digest, -digest], dtype=torch.int64, device=device)
    torch_dist.all_reduce(both, op=torch_dist.ReduceOp.MAX)
    if int(both[0]) != digest or int(both[1]) != -digest:
        raise DistError("the ranks were started with different configs (flags or ini files) or resume "
                        "different checkpoints (--resume, by content): every rank must get the same ones, "
                        "or their weights and sums fall out of step")


@contextlib.contextmanager
def _sigterm_kills():
    """SIGTERM's default action (the process ends) while the block runs:
    joining the group waits in torch's C++ (its store's connect retries
    when a signal interrupts it), where a Python handler, such as the
    trainer's clean stop, never runs, so a rank whose launcher is gone
    would wait out the store's timeout. Nothing is trained yet to save."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) in (signal.SIG_IGN, signal.SIG_DFL, None):
        yield
        return
    held = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, held)


def setup(cfg: dict, device: torch.device, checkpoint_digest: str | None = None) -> tuple[Dist, torch.device]:
    """Join the process group torchrun prepared, or Dist.single() when not
    launched as one of several ranks. Returns (dist, this rank's device).
    Collectives time out after [dist] timeout seconds (then they raise),
    so a rank that stops answering ends the run instead of hanging it."""
    if not launched_by_torchrun():
        return Dist.single(), device
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank, local_world = _env_int("LOCAL_RANK"), _env_int("LOCAL_WORLD_SIZE")
    end_with_launcher()   # armed already by shoal train's first lines: checks the launcher is there
    dc = {"backend": "auto", "timeout": 600.0, "node_sum": "auto", **cfg.get("dist", {})}
    device = rank_device(cfg["train"]["device"], local_rank)
    backend = pick_backend(dc["backend"], device, local_world)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=dc["timeout"])
    with _sigterm_kills():
        torch_dist.init_process_group(backend=backend, timeout=timeout,
                                      **({"device_id": device} if backend == "nccl" else {}))
    comm_device = device if backend == "nccl" else torch.device("cpu")
    check_same_config(cfg, comm_device, checkpoint_digest)
    dist = Dist(rank, world, local_rank, local_world, backend, comm_device)
    if dc["node_sum"] == "auto" and backend == "gloo" and local_world == world:
        try:
            dist.node_sum = NodeSum.open(rank, world, NODE_SUM_FIRST_BYTES, dc["timeout"])
        except DistError as e:   # every rank gets it (NodeSum.open agrees): all go on through gloo
            if rank == 0:
                print(f"shoal train: {e}; summing through gloo instead", file=sys.stderr, flush=True)
    return dist, device
