"""Data-parallel training across processes, launched by torchrun.

    torchrun --standalone --nproc-per-node 2 -m shoal train cartpole
    torchrun --nnodes 2 --node-rank R --rdzv-endpoint HOST:PORT --nproc-per-node 8 -m shoal train snake

torchrun starts one trainer per rank and tells it who it is through the
environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE). Each rank
owns its own pool and rollouts; after every minibatch's backward pass the
gradients are averaged across ranks (one all-reduce of the flattened
gradients, as CleanRL's multi-GPU PPO does), so every rank takes the same
optimizer step and the weights never drift apart. Rollout inference is the
plain policy: there is no DDP wrapper to keep out of the way.

This module holds only the collective operations the trainer needs; the
training loop (shoal/train.py) decides when to call them. Without torchrun
(or with one rank) `Dist.single()` is used: every operation is the
identity and torch.distributed is never initialised.
"""
from __future__ import annotations

import datetime
import os
import socket
from dataclasses import dataclass

import torch
import torch.distributed as torch_dist

TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")

# Below this many floats (ranks x elements), gloo sums by all-gather: one
# exchange, where its all-reduce takes several. Measured on the 2-core dev
# VM, 2 ranks: all-gather 0.8-1.4 ms, all-reduce 2.0-2.5 ms, for 4.7 k and
# 126 k floats (docs/results.md, "Scaling out"). Past it, the all-reduce's
# traffic (independent of the rank count) wins.
GATHER_SUM_MAX_FLOATS = 1 << 22


class DistError(RuntimeError):
    """A distributed run that cannot start as configured."""


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


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
        one all-reduce of all gradients flattened into one buffer. A
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
        rank (the same result everywhere, bit for bit); else an all-reduce."""
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
        if self.enabled and torch_dist.is_initialized():
            torch_dist.destroy_process_group()

    def describe(self) -> str:
        return (f"rank {self.rank} of {self.world_size} (local {self.local_rank} of "
                f"{self.local_world_size} on {socket.gethostname()}, pid {os.getpid()}), {self.backend}")


def planned_world_size() -> int:
    """The number of ranks torchrun started (1 without torchrun): known
    before joining the process group, so a config that cannot be split
    over the ranks fails before any rank waits for the others."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        raise DistError(f"WORLD_SIZE={os.environ['WORLD_SIZE']!r}: expected an integer (set by torchrun)") from None


def planned_cores_per_rank() -> int:
    """This node's cores shared among its ranks (LOCAL_WORLD_SIZE of them)."""
    try:
        local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local = 1
    return max(1, usable_cores() // local)


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


def setup(cfg: dict, device: torch.device) -> tuple[Dist, torch.device]:
    """Join the process group torchrun prepared, or Dist.single() when not
    launched as one of several ranks. Returns (dist, this rank's device).
    Collectives time out after [dist] timeout seconds (then they raise),
    so a rank that stops answering ends the run instead of hanging it."""
    if not launched_by_torchrun():
        return Dist.single(), device
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank, local_world = _env_int("LOCAL_RANK"), _env_int("LOCAL_WORLD_SIZE")
    dc = {"backend": "auto", "timeout": 600.0, **cfg.get("dist", {})}
    device = rank_device(cfg["train"]["device"], local_rank)
    backend = pick_backend(dc["backend"], device, local_world)
    if device.type == "cuda":
        torch.cuda.set_device(device)
    timeout = datetime.timedelta(seconds=dc["timeout"])
    torch_dist.init_process_group(backend=backend, timeout=timeout,
                                  **({"device_id": device} if backend == "nccl" else {}))
    comm_device = device if backend == "nccl" else torch.device("cpu")
    return Dist(rank, world, local_rank, local_world, backend, comm_device), device
