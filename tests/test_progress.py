"""shoal.progress and the --progress option of `shoal bench` and `shoal play`:
progress goes to stderr (rich, plain lines or nothing), stdout is the same
in every mode. In-process runs at tiny sizes (a C-loop-only bench, a
few-step play): a second or two in all."""
import io
import re
import subprocess
import sys

import pytest

from shoal import cli, progress, render
from shoal.pool import available_cores
from shoal.progress import Progress


def script(p: Progress) -> None:
    """A task of two items (one with a detail line), then one of 8 steps."""
    p.task("cartpole", 2)
    p.start("C loop, num_envs=64")
    p.done("1.00 M steps/s")
    p.start("[odd] label")
    p.log("    a detail [bold]")
    p.done("FAILED: no")
    p.task("play", 8, unit="frames")
    for _ in range(8):
        p.advance()


def test_plain_lines_and_none():
    buf = io.StringIO()
    with Progress("plain", stream=buf) as p:
        script(p)
    assert buf.getvalue().splitlines() == [
        "[cartpole 1/2] C loop, num_envs=64 ... 1.00 M steps/s",
        "[cartpole 2/2] [odd] label ... ",
        "    a detail [bold]",
        "[cartpole 2/2] [odd] label FAILED: no",
        "[play] 2/8 frames", "[play] 4/8 frames", "[play] 6/8 frames", "[play] 8/8 frames"]
    buf = io.StringIO()
    with Progress("none", stream=buf) as p:
        script(p)
    assert buf.getvalue() == ""


def test_rich_forced_draws_without_crashing():
    pytest.importorskip("rich")
    from rich.console import Console

    buf = io.StringIO()
    with Progress("rich", console=Console(file=buf, force_terminal=True, width=100)) as p:
        script(p)
    text = buf.getvalue()
    assert "cartpole" in text and "8/8" in text and "a detail [bold]" in text   # no markup taken from labels
    assert "cartpole: C loop, num_envs=64: 1.00 M steps/s" in text


def test_auto_and_fallbacks(monkeypatch):
    assert Progress("auto", stream=io.StringIO()).mode == "plain"   # not a terminal

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    if progress.importlib.util.find_spec("rich") is not None:
        assert Progress("auto", stream=Terminal()).mode == "rich"
        # a Jupyter `!` cell's pseudo-terminal shows rich's cursor moves raw: plain there
        monkeypatch.setenv("JPY_PARENT_PID", "1234")
        assert Progress("auto", stream=Terminal()).mode == "plain"
        assert Progress("rich", stream=Terminal()).mode == "rich"   # asked for: given
        monkeypatch.delenv("JPY_PARENT_PID")
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: None)   # no rich
    assert Progress("auto", stream=Terminal()).mode == "plain"
    assert Progress("rich", stream=Terminal()).mode == "plain"
    with pytest.raises(ValueError):
        Progress("loud")


def masked(stdout: str) -> list[str]:
    """The report without its date, its command line (which names the
    --progress mode) and its measured numbers."""
    return [re.sub(r"\d+(\.\d+)?( [GMk])?", "#", line) for line in stdout.splitlines()
            if not line.startswith(("- date:", "- command:"))]


BENCH = ["--contenders", "c_loop", "--num-envs", "64", "--seconds", "0.01", "--warmup", "0", "--repeats", "1"]


def test_bench_progress_on_stderr_only(capsys):
    from shoal import bench

    outputs = {}
    for mode in ("plain", "none", "rich"):
        assert bench.main(BENCH + ["--progress", mode]) == 0
        outputs[mode] = capsys.readouterr()
    plain, none, rich = outputs["plain"], outputs["none"], outputs["rich"]
    assert "| C loop | 64 | 1 |" in plain.out
    assert masked(plain.out) == masked(none.out) == masked(rich.out)
    # the C loop, and on more than one core the C loop on every core at once
    cores = available_cores()
    expected = [r"\[cartpole 1/{n}\] C loop, num_envs=64, workers=1 \.\.\. .* steps/s"]
    if cores > 1:
        expected.append(rf"\[cartpole 2/{{n}}\] C loop x cores \(measured\), num_envs=64, workers={cores} \.\.\. .* steps/s")
    lines = plain.err.splitlines()
    assert len(lines) == len(expected), lines
    for line, pattern in zip(lines, expected):
        assert re.fullmatch(pattern.format(n=len(expected)), line), line
    assert none.err == ""
    assert "[cartpole" not in plain.out + none.out + rich.out


def test_play_progress_on_stderr_only(tmp_path, capsys):
    original = render.frame   # _play counts frames through it, and puts it back
    outputs = {}
    for mode in ("plain", "none", "rich"):
        out = tmp_path / f"{mode}.gif"
        assert cli.main(["play", "cartpole", "--steps", "7", "--out", str(out), "--progress", mode]) == 0
        assert out.exists()
        outputs[mode] = capsys.readouterr()
    assert render.frame is original
    with pytest.raises(SystemExit):   # CartPole has no heuristic policy
        cli.main(["play", "cartpole", "--policy", "heuristic", "--out", str(tmp_path / "x.gif"), "--progress", "plain"])
    assert render.frame is original
    capsys.readouterr()
    plain, none, rich = outputs["plain"], outputs["none"], outputs["rich"]
    assert plain.out.replace("plain.gif", "X") == none.out.replace("none.gif", "X") \
        == rich.out.replace("rich.gif", "X")
    assert plain.out.startswith("wrote ") and "8 frames of CartPole" in plain.out
    assert plain.err.splitlines() == ["[play CartPole] 2/8 frames", "[play CartPole] 4/8 frames",
                                      "[play CartPole] 6/8 frames", "[play CartPole] 8/8 frames",
                                      f"writing {tmp_path / 'plain.gif'}"]
    assert none.err == ""


def test_print_out_and_the_dashboards_console_go_quiet_when_stdouts_reader_left():
    """`shoal train ... | true`: the CLI's last lines (the train summary,
    eval's result) go through print_out, and the rich dashboard draws on
    stdout_console(); once the reader left, both drop their output and the
    run goes on, instead of a BrokenPipeError traceback (print) or rich's
    SystemExit(1), which skipped the run's closing steps."""
    code = ("import time\n"
            "from shoal.progress import print_out, stdout_console\n"
            "time.sleep(0.5)\n"   # the parent has closed its end by then
            "console = stdout_console()\n"
            "console.print('y')\n"
            "assert console.quiet\n"
            "first = print_out('x')\n"   # stdout is /dev/null now: written
            "assert first and print_out('again')\n"
            "print('done', flush=True)\n")
    for code in (code, code.replace("console.print('y')", "pass").replace(
            "assert console.quiet", "pass").replace("assert first and", "assert not first and")):
        p = subprocess.Popen([sys.executable, "-P", "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        p.stdout.close()
        err = p.stderr.read().decode()
        assert p.wait(timeout=60) == 0 and err == "", err


def test_train_help_into_a_closed_pipe_exits_quietly():
    """`shoal train cartpole --help | head -1`: the long help text met a
    reader that had left (BrokenPipeError traceback, exit 1); it now goes
    through print_out, as the CLI's other stdout lines."""
    p = subprocess.Popen([sys.executable, "-P", "-m", "shoal", "train", "cartpole", "--help"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()   # the reader leaves before the help is written
    err = p.stderr.read().decode()
    assert p.wait(timeout=60) == 0 and err == "", err
