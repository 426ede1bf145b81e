"""The benchmark's smoke mode runs end to end through the CLI.

Run from a temporary folder so that `-m shoal` imports the installed package,
not the repository's source folder."""
import os
import subprocess
import sys
from pathlib import Path


def test_shoal_bench_quick_prints_a_table(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick",
                          "--contenders", "c_loop,serial,sync,async"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "| C loop |" in out.stdout
    assert "shoal Serial" in out.stdout and "shoal processes sync" in out.stdout
    assert "CPU:" in out.stdout
    # what ran and under what load, for whoever reads the report later
    assert "- command: `shoal bench --quick --contenders c_loop,serial,sync,async`" in out.stdout
    assert "- load average (1, 5, 15 min) at the start:" in out.stdout
    from shoal.pool import available_cores
    if available_cores() > 1:   # the limit measured on every core at once, beside the computed one
        assert "| C loop x cores (measured) |" in out.stdout
        assert "shoal best / (C loop x cores, measured):" in out.stdout


def test_c_loop_on_every_core_at_once():
    """run_c_loop_all_cores: one rate per repeat, the processes' sum; bad
    arguments and a failing process are errors, not hangs."""
    import pytest
    import shoal.envs
    from shoal.bench import timing

    spec = shoal.envs.spec("Snake")   # 8 agent rows per env: each process gets its envs' rows
    table = timing.action_table(5 * spec.agents, spec)
    rates = timing.run_c_loop_all_cores(spec, 5, table, 2, 0.05, 0.0, 3)
    assert len(rates) == 3 and all(r > 0 for r in rates)
    with pytest.raises(ValueError, match="procs"):
        timing.run_c_loop_all_cores(spec, 1, table, 2, 0.05, 0.0, 1)
    with pytest.raises(RuntimeError, match="a C loop process failed: ValueError"):   # too few action rows
        timing.run_c_loop_all_cores(spec, 5, table[:, :spec.agents], 2, 0.05, 0.0, 1)


def test_unknown_command_is_an_error(tmp_path):
    out = subprocess.run([sys.executable, "-m", "shoal", "frobnicate"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode != 0 and "invalid choice" in out.stderr


def test_shoal_bench_python_section_quick(tmp_path):
    """The Python-env section alone: its table, every vectorizer, the ratios
    against their targets, and no main table (no C loop)."""
    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "python",
                          "--python-num-envs", "16", "--python-rounds", "2",
                          "--python-seconds", "0.02", "--warmup", "0.01"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "## Python env: gymnasium CartPole-v1" in text
    for row in ("| 16 | shoal.pool.AsyncVectorEnv |", "| 16 | gymnasium SyncVectorEnv | 1 |",
                "| 16 | gymnasium AsyncVectorEnv | 16 |"):
        assert row in text
    assert "us per step on one core" in text
    assert "| shoal / gymnasium AsyncVectorEnv | 16 | >= 8x |" in text
    assert "| shoal / gymnasium SyncVectorEnv | 16 | >= 1.3x |" in text
    assert "| C loop |" not in text


def test_shoal_bench_envs_section_quick(tmp_path):
    """The first-party envs section: a row per env with its agents, rates and targets."""
    import shoal.envs

    out = subprocess.run([sys.executable, "-m", "shoal", "bench", "--quick", "--contenders", "envs",
                          "--seconds", "0.03", "--warmup", "0.01"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "## First-party envs: agent-steps/s" in out.stdout
    scale = {"G": 1e9, "M": 1e6, "k": 1e3}

    def rate(cell):
        number, _, unit = cell.strip().partition(" ")
        return float(number) * scale.get(unit, 1.0)

    for name in shoal.envs.names("header"):
        assert f"| {name} |" in out.stdout
        row = next(line for line in out.stdout.splitlines() if line.startswith(f"| {name} |"))
        cells = row.strip("|").split("|")
        serial, live = rate(cells[4]), rate(cells[5])   # counted in the same runs
        assert 0 < live <= serial, row
    assert "| C loop |" not in out.stdout, "the main table is not run"


def test_bench_package_has_no_import_cycle():
    """shoal.bench's sections import the shared modules (timing, steppers,
    sections; python_envs also cartpole's env id), never the package itself;
    timing imports no part of shoal.bench."""
    import ast
    from pathlib import Path

    import shoal.bench

    timing, steppers, sections = "shoal.bench.timing", "shoal.bench.steppers", "shoal.bench.sections"
    allowed = {"timing": set(), "steppers": {timing}, "sections": {timing, steppers},
               "cartpole": {timing, steppers}, "envs": {timing},
               "python_envs": {timing, steppers, sections, "shoal.bench.cartpole"},
               "mujoco": {timing, steppers, sections}, "atari": {timing, steppers, sections}}
    folder = Path(shoal.bench.__file__).parent
    for name, ok in allowed.items():
        tree = ast.parse((folder / f"{name}.py").read_text())
        deps = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
                and n.module.startswith("shoal.bench")}
        deps |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
                 if a.name.startswith("shoal.bench")}
        assert deps <= ok, (name, deps)


def test_one_action_table_for_every_env():
    """CartPole's default table (the CartPole section's) and a spec's table
    (envs section, compare_cpu_gpu.py) come from the same builder."""
    import numpy as np

    import shoal.envs
    from shoal.bench.timing import ACTION_TABLE_ROWS, action_table

    cartpole = action_table(64)
    assert cartpole.shape == (ACTION_TABLE_ROWS, 64) and cartpole.dtype == np.int32
    assert np.array_equal(cartpole, action_table(64, shoal.envs.spec("CartPole")))
    assert set(np.unique(cartpole)) == {0, 1}
    explorer = shoal.envs.spec("Explorer")
    table = action_table(10, explorer, table_rows=8, dtype=np.int64)
    assert table.shape == (8, 10, len(explorer.action_nvec)) and table.dtype == np.int64
    assert (table < np.asarray(explorer.action_nvec)).all() and table.flags.c_contiguous


def test_pool_overhead_script_splits_a_step(tmp_path):
    """scripts/pool_overhead.py: one row per (num_envs, workers) whose parts
    are consistent: the workers' busy time fits in the step's wall time."""
    script = Path(__file__).resolve().parents[1] / "scripts" / "pool_overhead.py"
    out_md = tmp_path / "overhead.md"
    out = subprocess.run([sys.executable, str(script), "--num-envs", "256", "1024", "--workers", "1", "2",
                          "--seconds", "0.1", "--warmup", "0.02", "--out", str(out_md)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rows = [line.strip("|").split("|") for line in out_md.read_text().splitlines()
            if line.startswith("| ") and line[2].isdigit()]
    assert [(int(r[0]), int(r[1])) for r in rows] == [(256, 1), (256, 2), (1024, 1), (1024, 2)]
    for r in rows:
        wall, busy_mean, busy_max, share = float(r[4]), float(r[5]), float(r[6]), float(r[9])
        assert 0 < busy_mean <= busy_max <= wall * 1.01 + 1, r
        # busy share = busy mean / wall, printed to 2 places from times printed
        # in whole us (a loaded machine's workers may get so little CPU that it
        # prints 0.00)
        assert abs(share - busy_mean / wall) <= 0.005 + 1 / wall and share <= 1.01, r


def test_bad_values_are_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    """A NaN or infinite duration (a timing loop that never ends: --seconds
    nan hung), no contenders, a section's own bad flag and an --out that
    cannot be written are refused at once, not after minutes of measuring."""
    import pytest

    from shoal import bench
    from shoal.bench import python_envs

    monkeypatch.setattr(python_envs, "run", lambda *a, **k: pytest.fail("measured before refusing"))
    for argv, expected in ((["--seconds", "nan"], "expected a finite number"),
                           (["--mujoco-seconds", "inf", "--contenders", "python,mujoco"], "expected a finite number"),
                           (["--contenders", ""], "expected at least one of"),
                           (["--contenders", "python,mujoco", "--mujoco-seconds", "-1"], "--mujoco-seconds > 0"),
                           (["--contenders", "python", "--out", str(tmp_path / "no" / "r.md")],
                            f"folder {tmp_path / 'no'} does not exist")):
        with pytest.raises(SystemExit) as exit_:
            bench.main(["--quick", *argv])
        assert exit_.value.code == 2 or expected in str(exit_.value.code), argv
        assert expected in capsys.readouterr().err + str(exit_.value.code), argv


def test_a_closed_stdout_or_stderr_loses_neither_the_run_nor_its_out_file(tmp_path):
    """The report goes to --out before stdout (a reader gone, `| true`, lost
    both), and a progress stream whose reader left stops showing, not the run."""
    import io

    from shoal.progress import Progress

    class Gone(io.StringIO):
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

    shown = Progress("plain", stream=Gone())
    shown.task("bench", 2)
    shown.start("one")
    shown.done("ok")
    assert shown.mode == "none"
    out = tmp_path / "report.md"
    quick = ["--quick", "--contenders", "python", "--python-num-envs", "4", "--python-rounds", "1",
             "--python-seconds", "0.01", "--warmup", "0"]
    p = subprocess.Popen([sys.executable, "-P", "-m", "shoal", "bench", *quick, "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    p.stdout.close()   # the reader leaves at once (`| true`): printing the report is a broken pipe
    err = p.stderr.read()
    assert p.wait(timeout=120) == 0, err[-2000:]
    assert out.read_text().startswith("# shoal benchmark") and "Traceback" not in err, err[-2000:]
    # --out that cannot be written (here a folder made in its place): the report still printed
    (tmp_path / "taken.md").mkdir()
    p = subprocess.run([sys.executable, "-P", "-m", "shoal", "bench", *quick, "--out", str(tmp_path / "taken.md")],
                       capture_output=True, text=True, timeout=120)
    assert "is a folder; expected a file path" in p.stderr   # refused up front
    from shoal import bench
    assert bench.write_whole(str(tmp_path / "no" / "r.md"), "text") is not None   # later: an error, not a raise
    assert not os.path.exists(tmp_path / "no")


def test_an_out_file_the_disk_refuses_still_prints_the_report(tmp_path, monkeypatch, capsys):
    """--out written when the disk is full: the report still goes to stdout
    (it once was lost with the file), the run exits 1 saying why."""
    from shoal import bench
    monkeypatch.setattr(bench, "write_whole", lambda path, text: OSError(28, "No space left on device"))
    code = bench.main(["--quick", "--contenders", "python", "--python-num-envs", "4", "--python-rounds", "1",
                       "--python-seconds", "0.01", "--warmup", "0", "--progress", "none",
                       "--out", str(tmp_path / "r.md")])
    out, err = capsys.readouterr()
    assert code == 1 and out.startswith("# shoal benchmark")
    assert f"could not write --out {tmp_path / 'r.md'} (No space left on device)" in err


def test_cartpole_headline_compares_equal_workers_too():
    """shoal's async rows round odd worker counts up (two batches), so
    "best against best" can set 2 processes against 1 EnvPool thread: the
    headline also gives the ratio at each worker count both measured, and
    says that the two APIs do different work per step."""
    from shoal.bench import cartpole
    from shoal.bench.timing import Result
    results = [Result(cartpole.PROC_SYNC, 64, 1, [10.0]), Result(cartpole.PROC_ASYNC, 64, 2, [40.0]),
               Result(cartpole.ENVPOOL_SYNC, 64, 1, [2.0]), Result(cartpole.ENVPOOL_ASYNC, 64, 1, [4.0]),
               Result(cartpole.ENVPOOL_SYNC, 64, 3, [5.0])]
    assert cartpole.equal_workers_ratios(results) == [(1, 2.5)]   # workers=3: shoal has none
    text = "\n".join(cartpole.headline(results, 2, "1.2.5"))
    assert "(each at its best workers): 8.00" in text
    assert "at equal workers (processes vs threads): workers=1: 2.50" in text
    assert "API work differs" in text
