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
