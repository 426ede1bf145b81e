"""Data-parallel training under torchrun (shoal/distributed.py): the
gradient and obs-statistics averaging is exact, 2 ranks train CartPole to
its target and write one run folder, checkpoints move between distributed
and single-process runs, and a killed rank ends the job with no process
left behind. CPU and gloo only: these run on any machine."""
import csv
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from shoal import config, train  # noqa: E402
from shoal import distributed  # noqa: E402
from shoal.distributed import Dist  # noqa: E402

# The ranks' code lives in a module of its own: spawned children import it
# by name (pytest's importlib mode gives test modules names they cannot import).
from distributed_case import (R, SUM_PATHS, _rank_cannot_share, _rank_config_check, _rank_late, _rank_leaves, _rank_main, fake_rollout, make_data,  # noqa: E402
                              one_update, update_cfg)
from helpers import alive, children  # noqa: E402


def test_two_ranks_average_to_the_single_process_gradient(tmp_path):
    """One update on 2 ranks holding half the rows each gives the gradients
    (after averaging) and obs statistics of one process holding all rows,
    whichever way the sums travel (SUM_PATHS); both ranks hold the same
    values, bit for bit."""
    torch.multiprocessing.spawn(_rank_main, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    grads, rms = one_update(update_cfg(), fake_rollout(slice(0, R), make_data()), Dist.single())
    assert any(g.abs().sum() > 0 for g in grads.values())  # a real gradient, not all zeros
    for path in SUM_PATHS:
        ranks = [torch.load(tmp_path / f"rank{r}_{path}.pt") for r in range(2)]
        for name in grads:
            assert torch.equal(ranks[0]["grads"][name], ranks[1]["grads"][name]), (path, name)
        for r in ranks:
            for name, g in grads.items():
                torch.testing.assert_close(r["grads"][name], g, rtol=1e-5, atol=1e-6, msg=f"{path} {name}")
            for k, v in rms.items():
                torch.testing.assert_close(r["rms"][k], v, rtol=1e-12, atol=1e-12, msg=f"{path} {k}")


def test_node_sum_names_a_rank_that_left_within_a_second(tmp_path):
    """A rank waiting in a shared-memory sum for a rank that has exited
    raises DistError naming it (it checks the peer between wait slices)."""
    torch.multiprocessing.spawn(_rank_leaves, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    outcome = (tmp_path / "rank0.txt").read_text()
    assert outcome.startswith("DistError") and "rank 1" in outcome and "exited" in outcome, outcome
    assert float(outcome.split()[2]) < 1 + distributed.NodeSum.WAIT_SLICE_S, outcome


def test_node_sum_waits_for_a_late_rank(tmp_path):
    """A rank that arrives after several wait slices still meets the others."""
    torch.multiprocessing.spawn(_rank_late, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in range(2)] == ["3 3 3 3 3"] * 2


def test_node_sum_that_cannot_open_fails_on_every_rank(tmp_path):
    """If any rank cannot share the region, every rank's NodeSum.open raises
    (setup() then sums through gloo on all of them: no rank is left waiting)."""
    torch.multiprocessing.spawn(_rank_cannot_share, args=(str(tmp_path / "init"), str(tmp_path)), nprocs=2)
    for rank in range(2):
        outcome = (tmp_path / f"rank{rank}.txt").read_text()
        assert outcome.startswith("DistError: shared memory") and outcome.endswith("gloo sum 3"), outcome
        assert ("Too many open files" if rank == 0 else "on another rank") in outcome, outcome


@pytest.mark.parametrize("differ", ["", "config", "checkpoint"])
def test_ranks_started_with_different_configs_all_stop(tmp_path, differ):
    """A rank given another config (here update_epochs), or resuming
    another checkpoint (a stale copy on one node: it trained on with other
    weights, or hung in a sum), is a DistError on every rank at setup,
    before any sum can fall out of step; [train] run_dir may differ."""
    torch.multiprocessing.spawn(_rank_config_check, args=(str(tmp_path / "init"), str(tmp_path), differ),
                                nprocs=2)
    for rank in (0, 1):
        outcome = (tmp_path / f"rank{rank}.txt").read_text()
        if differ:
            assert outcome.startswith("DistError: the ranks were started with different configs"), outcome
            assert "different checkpoints (--resume" in outcome
        else:
            assert outcome == "same"


def test_world_split_is_checked_before_any_rank_waits():
    cfg = config.load("cartpole", ["--vec.num-envs", "30", "--vec.num-batches", "2"])
    with pytest.raises(config.ConfigError, match=r"num_envs = 30 .*multiple of 4"):
        train.check_world_split(cfg, 2)
    assert train.check_world_split(cfg, 1) == (30, None)
    cfg = config.load("cartpole", ["--vec.num-envs", "64", "--vec.backend", "multiprocessing",
                                   "--vec.num-batches", "2"])
    local, workers = train.check_world_split(cfg, 2)
    assert local == 32 and workers >= 2 and workers % 2 == 0   # whole batches, each with its workers
    # minibatches cut each rank's rows: 8 envs / 2 ranks x 16 steps = 64 rows per rank (it was
    # clamped to 64 one-row minibatches, which learnt nothing)
    cfg = config.load("cartpole", ["--vec.num-envs", "8", "--train.num-steps", "16",
                                   "--train.num-minibatches", "100"])
    with pytest.raises(config.ConfigError, match=r"num_minibatches = 100: expected at most each rank's batch size, "
                                                 r".* = 64"):
        train.check_world_split(cfg, 2)
    # an LSTM's minibatches are whole agent rows: 8 envs / 2 ranks = 4 rows per rank (and 8 in one process)
    cfg = config.load("cartpole", ["--vec.num-envs", "8", "--policy.lstm", "true", "--train.num-minibatches", "8"])
    with pytest.raises(config.ConfigError, match=r"num_minibatches = 8: expected at most each rank's agent rows, "
                                                 r".* = 4 \(with \[policy\] lstm"):
        train.check_world_split(cfg, 2)
    with pytest.raises(config.ConfigError, match=r"num_minibatches = 16: expected at most the agent rows, .* = 8"):
        config.load("cartpole", ["--vec.num-envs", "8", "--policy.lstm", "true", "--train.num-minibatches", "16"])


def test_nproc_misuse_is_a_clear_error(capsys, monkeypatch):
    from shoal import cli

    assert cli.main(["train", "cartpole", "--nproc", "0"]) == 2
    assert "--nproc 0: expected a number of processes >= 1" in capsys.readouterr().err
    monkeypatch.setenv("WORLD_SIZE", "2")   # already a rank of a torchrun job
    assert cli.main(["train", "cartpole", "--nproc=2"]) == 2
    assert "--nproc inside a torchrun job" in capsys.readouterr().err
    monkeypatch.delenv("WORLD_SIZE")
    assert cli.main(["train", "cartpole", "--nproc", "2", "--dist.backend", "nccl",
                     "--train.device", "cpu"]) == 2   # refused once, before torchrun starts ranks
    assert "shoal train: error: [dist] backend = nccl needs the learner on a GPU" in capsys.readouterr().err


def test_nproc_refuses_another_envs_checkpoint_before_torchrun(capsys, tmp_path):
    """--nproc checks --resume's checkpoint before torchrun starts, its env
    too: one error line (each rank printed it, with torchrun's lines)."""
    from shoal import cli
    run = tmp_path / "cp"
    train.train(config.load("cartpole", ["--train.total-timesteps", "512", "--train.eval-interval", "0",
                                         "--train.dashboard", "none", "--train.tensorboard", "false",
                                         "--vec.num-envs", "4", "--train.num-steps", "16"]), run_dir=str(run))
    capsys.readouterr()
    assert cli.main(["train", "snake", "--nproc", "2", "--resume", str(run / "checkpoint.pt")]) == 2
    err = capsys.readouterr().err
    assert err.count("error") == 1 and f"checkpoint {run / 'checkpoint.pt'} is for cartpole, not snake" in err, err


def test_a_gpu_the_machine_lacks_is_refused_before_torchrun(capsys, monkeypatch):
    """--train.device cuda (or cuda:N past the GPUs there are) is refused
    once, before torchrun, not by every rank after it started them."""
    import torch
    from shoal import cli, train

    monkeypatch.setattr(cli, "_torchrun", lambda n, args: pytest.fail("torchrun started"))
    if not torch.cuda.is_available():
        assert cli.main(["train", "cartpole", "--nproc", "2", "--train.device", "cuda"]) == 2
        assert "[train] device = cuda: CUDA is not available" in capsys.readouterr().err
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.raises(ValueError, match=r"device = cuda:1: this machine has 1 GPU\(s\), cuda:0 to cuda:0"):
        train.resolve_device("cuda:1")
    assert train.resolve_device("cuda:0") == torch.device("cuda", 0)


def test_a_rank_whose_launcher_is_pid_1_is_not_ended(monkeypatch):
    """A rank's parent may be pid 1 and alive: torchrun as a container's
    entrypoint, or a test run started from a background job. Such a rank
    once SIGTERMed itself at once; only a parent that changed between
    reading it and the prctl (the launcher died) ends it."""
    import ctypes
    import types

    from shoal import rank_watch
    killed, parents = [], iter([1, 1])
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: types.SimpleNamespace(prctl=lambda *args: 0))
    monkeypatch.setattr(os, "getppid", lambda: next(parents))
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(sig))
    monkeypatch.setattr(rank_watch, "_launcher_pid", None)
    rank_watch.end_with_launcher()
    assert killed == []
    monkeypatch.setattr(rank_watch, "_launcher_pid", None)
    parents = iter([4321, 1])   # reparented to init between the two reads: the launcher died
    rank_watch.end_with_launcher()
    assert killed == [signal.SIGTERM]


def test_a_rank_armed_early_notices_a_launcher_gone_by_setup(monkeypatch):
    """shoal train arms the death signal in its first lines; the check in
    distributed.setup() then compares the parent with the one armed
    against: a launcher that died during the rank's imports ends it (it
    once waited for the dead launcher's store as an orphan, SIGTERM held
    off by the trainer's handler)."""
    import ctypes
    import types

    from shoal import rank_watch
    killed, parent = [], [4321]
    monkeypatch.setattr(ctypes, "CDLL", lambda *a, **k: types.SimpleNamespace(prctl=lambda *args: 0))
    monkeypatch.setattr(os, "getppid", lambda: parent[0])
    monkeypatch.setattr(os, "kill", lambda pid, sig: killed.append(sig))
    monkeypatch.setattr(rank_watch, "_launcher_pid", None)
    rank_watch.end_with_launcher()   # the CLI's early call
    rank_watch.end_with_launcher()   # setup's: the launcher is there
    assert killed == []
    parent[0] = 1                    # reparented: the launcher died meanwhile
    rank_watch.end_with_launcher()
    assert killed == [signal.SIGTERM]


def test_a_rank_that_cannot_join_is_one_error_line(capsys, monkeypatch, tmp_path):
    """A stray WORLD_SIZE (a job wrapper's) without torchrun's other
    variables: shoal train's one error line, not a DistError traceback."""
    from shoal import cli

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setattr(os, "getppid", lambda: 1)   # as under nohup: checked before the launcher watch
    status = cli.main(["train", "cartpole", "--train.total-timesteps", "256", "--train.dashboard", "none",
                       "--train.run-dir", str(tmp_path / "runs")])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("shoal train: error: WORLD_SIZE > 1 but RANK is not set"), err
    assert "Traceback" not in err


@pytest.mark.parametrize("error", [
    RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:4242: "
                 "Connection reset by peer\nException raised from recvAsync"),
    torch.distributed.DistNetworkError("Connection refused"),
])
def test_a_rank_that_lost_a_peer_in_a_collective_is_one_error_line(error, capsys, monkeypatch):
    """gloo's error for a peer gone mid-collective (multi-node runs,
    [dist] node_sum off): shoal train's one error line per rank, not a
    Python traceback each."""
    from shoal import cli

    def lose_a_peer(*args, **kwargs):
        raise error
    monkeypatch.setattr(train, "train", lose_a_peer)
    status = cli.main(["train", "cartpole", "--train.dashboard", "none"])
    err = capsys.readouterr().err
    assert status == 1 and err.startswith("shoal train: error: a collective over the ranks failed: another rank "
                                          "left or stopped answering ("), err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err


# ---- torchrun end to end ----------------------------------------------------
def shoal_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "shoal", *args]


def torchrun(nproc: int, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
            "-m", "shoal", *args]


def run(cmd: list[str], cwd, timeout: float = 240) -> subprocess.CompletedProcess:
    """cmd run in `cwd` (a test's tmp_path: never the checkout's root, where
    `python -m shoal` would import the source folder instead of the installed package)."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)


def failure(p: subprocess.CompletedProcess) -> str:
    """A failed run's output without torchrun's own traceback lines."""
    lines = (p.stdout + p.stderr).splitlines()
    return "\n".join(x for x in lines if not x.startswith(("  File", "    ")))[-4000:]


def test_torchrun_two_ranks_train_cartpole_to_its_target(tmp_path):
    """`shoal train cartpole --nproc 2` (torchrun underneath) reaches the
    target, rank 0 alone writes one run folder, and its checkpoint replays
    the stopping evaluation in shoal eval and resumes in a single-process run."""
    runs = tmp_path / "runs"
    p = run(shoal_cmd("train", "cartpole", "--nproc", "2", "--train.run-dir", str(runs),
                      "--train.dashboard", "plain", "--train.max-train-seconds", "60"), tmp_path)
    assert p.returncode == 0, failure(p)
    assert "reached the target return" in p.stdout, p.stdout
    assert p.stdout.count("trained ") == 1  # rank 0 reports, rank 1 stays quiet
    assert "rank 1 of 2" in p.stderr and "rank 0 of 2" in p.stderr
    folders = os.listdir(runs)
    assert len(folders) == 1, folders
    run_dir = runs / folders[0]
    with open(run_dir / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["world_size"] == "2"
    ckpt = run_dir / "checkpoint.pt"
    train_cfg = torch.load(ckpt, weights_only=False)["config"]["train"]

    def shoal_eval(*flags) -> float:
        e = run(shoal_cmd("eval", "cartpole", "--checkpoint", str(ckpt),
                          "--episodes", str(train_cfg["eval_episodes"]), *flags), tmp_path)
        assert e.returncode == 0, e.stderr
        return float(e.stdout.split("mean return")[1].split()[0])

    # The checkpoint is the policy that met the target: shoal eval replays the
    # evaluation that stopped the run, episode for episode.
    stopping_eval = float(rows[-1]["eval_return"])
    assert stopping_eval >= 475
    replayed = shoal_eval("--seed", str(train.eval_seeds(train_cfg)[0]))
    assert replayed == pytest.approx(stopping_eval, abs=0.006)
    # On unseen episodes it balances far beyond an untrained policy (~20): the
    # run stops at the first evaluation >= 475, so a held-out one may fall a
    # little short of 475 (469.7 seen: 15 of 16 episodes at 500).
    assert shoal_eval() >= 300

    # ... and the distributed run's checkpoint goes on in one process
    steps = torch.load(ckpt, weights_only=False)["progress"]["global_step"]
    cfg = config.load("cartpole", ["--train.dashboard", "none", "--train.eval-interval", "0",
                                   "--train.total-timesteps", str(steps + 2048), "--train.max-train-seconds", "0",
                                   "--train.eval-episodes", "4"])
    summary = train.train(cfg, resume=str(ckpt), run_dir=str(run_dir))
    assert summary["global_step"] >= steps + 2048 and summary["world_size"] == 1


def test_single_process_checkpoint_resumes_on_two_ranks(tmp_path):
    cfg = config.load("cartpole", ["--train.dashboard", "none", "--train.eval-interval", "0",
                                   "--train.total-timesteps", "2048", "--train.eval-episodes", "4",
                                   "--train.tensorboard", "false"])
    first = train.train(cfg, run_dir=str(tmp_path / "run"))
    target = first["global_step"] + 4096
    # node_sum off: this run keeps the trainer's sums through gloo covered (the others use NodeSum)
    p = run(torchrun(2, "train", "cartpole", "--resume", first["checkpoint"], "--run-dir", str(tmp_path / "run"),
                     "--train.total-timesteps", str(target), "--train.dashboard", "none",
                     "--train.eval-interval", "0", "--train.eval-episodes", "4", "--dist.node-sum", "off",
                     "--policy.hidden-size", "32"), tmp_path)
    assert p.returncode == 0, failure(p)
    assert "gloo: " in p.stderr and "shared memory" not in p.stderr, p.stderr[-2000:]
    # the checkpoint's policy wins over the flag: said once, by rank 0, not once per rank
    assert p.stderr.count("its [policy] hidden_size = 64 replaces the command line's hidden_size = 32") == 1, \
        p.stderr[-2000:]
    progress = torch.load(first["checkpoint"], weights_only=False)["progress"]
    assert progress["global_step"] >= target
    with open(tmp_path / "run" / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows[-1]["world_size"] == "2"   # appended to the single-process run's log


# One rank of test_a_closed_rank_leaves_no_gloo_thread: the trainer's
# sequence (join, make an optimizer, sum gradients through gloo, leave),
# then the names of the threads still running in this process.
RANK_AFTER_CLOSE = """
import os, torch
from shoal import distributed
dist, _ = distributed.setup({"train": {"device": "cpu"}, "dist": {"node_sum": "off", "timeout": 60.0}},
                            torch.device("cpu"))
net = torch.nn.Linear(3, 3)
optimizer = torch.optim.Adam(net.parameters())   # (torch imports torch.distributed.nn.functional here)
net(torch.ones(2, 3)).sum().backward()
dist.average_gradients(net.parameters())
optimizer.step()
dist.barrier()
dist.close()
threads = sorted(open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task"))
print(" ".join(threads))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads thread names from /proc (Linux)")
def test_a_closed_rank_leaves_no_gloo_thread(tmp_path):
    """Dist.close() frees the process group, so gloo's worker threads are
    gone before the interpreter shuts down. A group kept alive (by default
    arguments that torch binds to it on a late import) left them running,
    and one releasing its last collective during shutdown aborted the rank
    (SIGABRT, "terminate called without an active exception")."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
               "WORLD_SIZE": "2", "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": "2"}
        procs.append(subprocess.Popen([sys.executable, "-c", RANK_AFTER_CLOSE], env=env, cwd=tmp_path,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-3000:]
        threads = out.split()
        assert threads and not [t for t in threads if "gloo" in t], threads


def session_pids(sid: int) -> list[int]:
    """Live processes of session `sid` (torchrun, its ranks, their pool workers)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # fields[3]: session id; Z: a zombie
                pids.append(int(entry))
    return pids


def signal_a_rank(cmd: list[str], cwd, rank: int, sig: int, after_s: float, ready=None) -> tuple:
    """Run the 2-rank torchrun job `cmd`, send `sig` to rank `rank` once
    both ranks have started, `ready()` (if given) is true, and `after_s`
    more seconds passed (training under way): (the finished process, its
    whole output, seconds from the signal to its end)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True, cwd=cwd)
    try:
        pids, lines = {}, []
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:  # each rank's start line names its pid
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("shoal train: rank"):
                pids[int(line.split()[3])] = int(line.split("pid ")[1].split(")")[0])
        assert len(pids) == 2, "".join(lines)
        while ready is not None and not ready() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(after_s)
        signalled = time.monotonic()
        os.kill(pids[rank], sig)
        out, _ = proc.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return proc, "".join(lines) + out, took


def test_a_killed_rank_ends_the_job_naming_it_and_leaves_no_process(tmp_path):
    cmd = torchrun(2, "train", "cartpole", "--run-dir", str(tmp_path / "run"), "--vec.backend", "multiprocessing",
                   "--vec.num-envs", "64", "--train.max-train-seconds", "0", "--train.total-timesteps", "100_000_000",
                   "--train.target-return", "0", "--train.eval-interval", "0", "--train.dashboard", "none")
    proc, out, took = signal_a_rank(cmd, tmp_path, 1, signal.SIGKILL, after_s=1.0)
    assert proc.returncode != 0
    assert "rank      : 1" in out and "SIGKILL" in out, out[-3000:]
    assert took < 30, took
    deadline = time.monotonic() + 10
    while session_pids(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert session_pids(proc.pid) == []


def test_ranks_end_when_their_launcher_is_killed(tmp_path):
    """SIGKILL to the launcher (a scheduler's hard kill, the OOM killer):
    each rank, in a session of its own, gets SIGTERM (PR_SET_PDEATHSIG),
    writes its checkpoint and exits, instead of training on as an orphan."""
    launcher = subprocess.Popen(
        shoal_cmd("train", "cartpole", "--nproc", "2", "--train.run-dir", str(tmp_path / "runs"),
                  "--train.dashboard", "none", "--train.total-timesteps", "100000000",
                  "--train.max-train-seconds", "120", "--train.target-return", "0",
                  "--train.checkpoint-interval", "0.5"),
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ranks: list[int] = []
    try:
        # Killed only once a periodic checkpoint exists: a rank stopped in
        # the middle of an update (waiting on the other's gradients) keeps
        # the last whole one, and one stopped before its first update gives
        # its folder back; on a loaded machine a fixed wait met either.
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not list((tmp_path / "runs").glob("*/checkpoint.pt")):
            time.sleep(0.2)
        ranks = children(launcher.pid)
        assert len(ranks) == 2, f"expected 2 ranks under the launcher, found {ranks}"
        launcher.kill()
        launcher.wait(10)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and any(alive(pid) for pid in ranks):
            time.sleep(0.2)
        assert not any(alive(pid) for pid in ranks), "ranks outlived their launcher"
        assert list((tmp_path / "runs").glob("*/checkpoint.pt")), "rank 0 wrote no checkpoint on SIGTERM"
    finally:
        for pid in [launcher.pid, *ranks]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_zombie_rank_counts_as_exited():
    """torchrun reaps its ranks only when it shuts them all down: a rank
    that exited is a zombie until then, which os.kill(pid, 0) still finds;
    a rank waiting for it in a shared-memory sum must see it gone (it hung
    until torchrun's 30 s grace killed it, no checkpoint written)."""
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:   # exited, not yet reaped
            with open(f"/proc/{child}/stat") as f:
                if f.read().rpartition(")")[2].split()[0] == "Z":
                    break
            time.sleep(0.01)
        os.kill(child, 0)                                   # found all the same
        assert distributed._exited(child)
        assert not distributed._exited(os.getpid())
    finally:
        os.waitpid(child, 0)
    assert distributed._exited(child)                       # reaped: gone


def test_a_signal_to_one_rank_stops_every_rank_at_the_next_update(tmp_path):
    """SIGTERM to rank 1 alone (a scheduler signalling one process, or a
    rank that got the signal while the other was inside an update): the
    ranks hold it to the update's collective and stop together there, so
    rank 0 writes its final checkpoint and nobody waits in a sum for a rank
    that left."""
    cmd = torchrun(2, "train", "cartpole", "--run-dir", str(tmp_path / "run"), "--vec.num-envs", "8",
                   "--train.max-train-seconds", "0", "--train.total-timesteps", "100_000_000",
                   "--train.target-return", "0", "--train.eval-interval", "0", "--train.dashboard", "none",
                   "--train.checkpoint-interval", "0")
    log = tmp_path / "run" / "log.csv"   # a row: an update is done (before it, a stop discards the run)
    _, out, took = signal_a_rank(cmd, tmp_path, 1, signal.SIGTERM, after_s=0.5,
                                 ready=lambda: log.exists() and len(log.read_text().splitlines()) > 1)
    assert took < 20, (took, out[-3000:])
    assert "terminated: writing a final checkpoint" in out, out[-3000:]
    saved = torch.load(tmp_path / "run" / "checkpoint.pt", weights_only=False)
    assert saved["progress"]["update"] > 0, saved["progress"]
