"""shoal train's TensorBoard log: the event file holds the same rows as log.csv."""
import csv
import glob

import pytest

pytest.importorskip("torch")
pytest.importorskip("tensorboard", reason="TensorBoard logging needs the tensorboard package (test extra)")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

from shoal import config, train  # noqa: E402


def test_event_file_reads_back_as_the_csv_log(tmp_path):
    cfg = config.load("cartpole", ["--train.dashboard", "none", "--train.tensorboard", "true",
                                   "--train.total-timesteps", "4096", "--train.checkpoint-interval", "0",
                                   "--train.eval-interval", "0", "--train.eval-episodes", "4"])
    train.train(cfg, run_dir=str(tmp_path))
    events = glob.glob(str(tmp_path / "events.out.tfevents.*"))
    assert len(events) == 1, "one TensorBoard event file in the run folder"
    acc = EventAccumulator(events[0])
    acc.Reload()
    rows = list(csv.DictReader(open(tmp_path / "log.csv")))
    for key in ("sps", "global_step", "v_loss"):
        assert key in acc.Tags()["scalars"], key
    logged = [(e.step, e.value) for e in acc.Scalars("global_step")]
    assert logged == [(int(r["global_step"]), float(r["global_step"])) for r in rows]
    v_loss = {e.step: e.value for e in acc.Scalars("v_loss")}
    for r in rows:
        if r["v_loss"] not in ("", "nan"):
            assert v_loss[int(r["global_step"])] == pytest.approx(float(r["v_loss"]), rel=1e-6)


def test_resuming_in_place_hides_the_steps_trained_again(tmp_path):
    """A run killed after logging past its last checkpoint, resumed in its
    folder: log.csv drops the rows after the checkpoint, and TensorBoard
    (reading every event file of the folder) must not keep them either,
    or its step axis holds rows of steps trained twice."""
    import shutil

    def cfg(total):
        return config.load("cartpole", ["--train.dashboard", "none", "--train.tensorboard", "true",
                                        "--train.total-timesteps", str(total), "--train.checkpoint-interval",
                                        "0", "--train.eval-interval", "0", "--train.eval-episodes", "2"])

    run = tmp_path / "run"
    first = train.train(cfg(2048), run_dir=str(run))
    shutil.copy(first["checkpoint"], tmp_path / "at_2048.pt")
    train.train(cfg(4096), resume=first["checkpoint"], run_dir=str(run))    # logs on to 4096
    shutil.copy(tmp_path / "at_2048.pt", run / "checkpoint.pt")               # ...then "killed" at 2048
    train.train(cfg(4096), resume=str(run / "checkpoint.pt"), run_dir=str(run))
    rows = list(csv.DictReader(open(run / "log.csv")))
    steps = [int(r["global_step"]) for r in rows]
    assert steps == sorted(steps) and len(set(steps)) == len(steps), steps
    acc = EventAccumulator(str(run))
    acc.Reload()
    logged = [e.step for e in acc.Scalars("global_step")]
    assert logged == steps, (logged, steps)
