"""The exact-math case of tests/test_distributed.py: one PPO update of a
fresh CartPole policy on fake rollout rows, on 2 gloo ranks holding half the
rows each or in one process holding them all. A module of its own so that
torch.multiprocessing.spawn's children can import _rank_main by name."""
import os
import time
import types

import torch

from shoal import config, train
from shoal import distributed
from shoal.distributed import Dist

T, R = 8, 6  # steps x rows of the whole batch; each of 2 ranks holds R / 2 rows


def fake_rollout(rows: slice, data: dict) -> types.SimpleNamespace:
    """A Rollout's tensors (time-major, T + 1 obs) restricted to `rows`."""
    ro = types.SimpleNamespace(device=torch.device("cpu"), T=T, R=rows.stop - rows.start, initial_state=None)
    for k, v in data.items():
        setattr(ro, k, v[:, rows].clone())
    return ro


def make_data() -> dict:
    g = torch.Generator().manual_seed(3)
    return {"obs": torch.randn(T + 1, R, 4, generator=g) * 3 + 1,
            "actions": torch.randint(0, 2, (T, R, 1), generator=g),
            "logprobs": -torch.rand(T, R, generator=g),
            "values": torch.randn(T + 1, R, generator=g),
            "rewards": torch.randn(T, R, generator=g),
            "dones": (torch.rand(T + 1, R, generator=g) < 0.2).float(),
            "masks": torch.ones(T + 1, R)}


def one_update(cfg: dict, ro, dist: Dist) -> tuple[dict, dict]:
    """(gradients, obs statistics) after one ppo_update of a fresh policy on `ro`."""
    torch.manual_seed(0)
    policy = train.policy_from_config(train.shoal.env_spec("cartpole"), cfg["policy"])
    optimizer = torch.optim.Adam(policy.parameters(), lr=1e-3)
    train.ppo_update(policy, optimizer, ro, cfg, dist)
    grads = {n: p.grad.clone() for n, p in policy.named_parameters()}
    return grads, {k: v.clone() for k, v in policy.obs_rms.state_dict().items()}


def update_cfg() -> dict:
    # One minibatch, one epoch: the update is one optimizer step, whose gradients
    # the ranks' average must equal. norm_adv off: it standardises per minibatch,
    # which a rank does over its own rows only (as in any data-parallel PPO).
    return config.load("cartpole", ["--train.num-minibatches", "1", "--train.update-epochs", "1",
                                    "--train.norm-adv", "false", "--policy.normalize-obs", "true"])


SUM_PATHS = ("all_gather", "all_reduce", "node_sum")


def _rank_main(rank: int, init_file: str, out: str) -> None:
    """One rank of the exact-math case, once per way sums travel (SUM_PATHS),
    in one process group (a spawn per path would start torch twice more):
    writes out/rank<rank>_<path>.pt."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    dist = Dist(rank=rank, world_size=2, local_rank=rank, local_world_size=2, backend="gloo")
    default_gather_max = distributed.GATHER_SUM_MAX_FLOATS
    half = R // 2
    for path in SUM_PATHS:
        # all_reduce: every gloo sum by all-reduce, none gathered
        distributed.GATHER_SUM_MAX_FLOATS = 0 if path == "all_reduce" else default_gather_max
        if path == "node_sum":   # 64-byte slots: the gradient sum grows them first
            dist.node_sum = distributed.NodeSum.open(rank, 2, 64, timeout_s=60)
        grads, rms = one_update(update_cfg(), fake_rollout(slice(rank * half, (rank + 1) * half), make_data()), dist)
        torch.save({"grads": grads, "rms": rms}, os.path.join(out, f"rank{rank}_{path}.pt"))
        if dist.node_sum is not None:
            dist.node_sum.close()
            dist.node_sum = None
    dist.close()


def _rank_leaves(rank: int, init_file: str, out: str) -> None:
    """Rank 1 exits after joining the node's shared memory; rank 0 then sums
    and writes what it raised to out/rank0.txt."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    node_sum = distributed.NodeSum.open(rank, 2, 1024, timeout_s=60)
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    try:
        node_sum.sum(torch.ones(8))
        outcome = "returned"
    except distributed.DistError as e:
        outcome = f"DistError after {time.monotonic() - start:.2f} s: {e}"
    with open(os.path.join(out, "rank0.txt"), "w") as f:
        f.write(outcome)
    os._exit(0)


def _rank_cannot_share(rank: int, init_file: str, out: str) -> None:
    """Rank 0 cannot make the shared region: NodeSum.open must raise on both
    ranks (so that setup() sends both through gloo), and gloo still works."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    if rank == 0:
        def refuse(*args):
            raise OSError(24, "Too many open files")
        os.memfd_create = refuse
    try:
        distributed.NodeSum.open(rank, 2, 1024, timeout_s=60)
        outcome = "opened"
    except distributed.DistError as e:
        outcome = f"DistError: {e}"
    x = torch.tensor([float(rank + 1)])
    torch.distributed.all_reduce(x)
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(f"{outcome}; gloo sum {x.item():g}")
    torch.distributed.destroy_process_group()


def _rank_late(rank: int, init_file: str, out: str) -> None:
    """Rank 1 reaches the sum 1.2 s late (past two of rank 0's wait slices):
    both ranks still get the sum."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    node_sum = distributed.NodeSum.open(rank, 2, 1024, timeout_s=60)
    if rank == 1:
        time.sleep(1.2)
    total = node_sum.sum(torch.full((5,), float(rank + 1)))
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(" ".join(f"{v:g}" for v in total.tolist()))
    torch.distributed.destroy_process_group()


def _rank_config_check(rank: int, init_file: str, out: str, differ: str) -> None:
    """Both ranks check their configs and resumed checkpoints' digests;
    rank 1's differs in `differ`: "config" (an update_epochs of its own),
    "checkpoint" (another digest), or "" (only [train] run_dir). Each
    writes what check_same_config did to out/rank<k>.txt."""
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=2)
    cfg = config.load("cartpole")
    digest = "a" * 64
    if rank == 1:
        cfg["train"]["run_dir"] = "elsewhere"
        if differ == "config":
            cfg["train"]["update_epochs"] += 1
        elif differ == "checkpoint":
            digest = "b" * 64
    try:
        distributed.check_same_config(cfg, torch.device("cpu"), digest)
        outcome = "same"
    except distributed.DistError as e:
        outcome = f"DistError: {e}"
    with open(os.path.join(out, f"rank{rank}.txt"), "w") as f:
        f.write(outcome)
    torch.distributed.destroy_process_group()
