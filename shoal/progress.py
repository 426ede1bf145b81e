"""Progress of long command-line work (`shoal bench`, `shoal play`).

One display, four modes (the same as `shoal train`'s [train] dashboard):

  auto   rich when it is installed and the stream is a terminal, else plain
  rich   a rich progress bar: a row per task with its current item, N/M and time
  plain  short lines: one per item (`start` ... `done`), or one per quarter
         of a task counted with `advance`
  none   nothing

Progress goes to stderr by default, so that what a command prints on stdout
(bench's tables, play's summary) stays clean for piping. The rich display is
refreshed only when something changes (no refresh thread: the benchmark
forks worker processes and times tight loops while it is up).

    with Progress(mode) as progress:
        progress.task("cartpole", total=len(jobs))
        for job in jobs:
            progress.start(f"{job.name}, num_envs={job.n}")
            progress.done(f"{rate} steps/s")     # or progress.done(f"FAILED: {e}")
            progress.log("a detail line")       # printed above the bar
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from typing import TextIO

MODES = ("auto", "rich", "plain", "none")
REFRESH_SECONDS = 0.1   # rich: `advance` redraws at most this often


def add_argument(p: argparse.ArgumentParser, what: str) -> None:
    """The --progress option of a command showing the progress of `what`."""
    p.add_argument("--progress", choices=MODES, default="auto",
                   help=f"progress of {what} on stderr: rich (a progress bar), plain (short lines), none, "
                        f"or auto (default: rich when installed and stderr is a terminal, else plain)")


def live_terminal(stream: TextIO) -> bool:
    """Whether `stream` is a terminal that acts on rich's cursor moves: a
    tty, but not the pseudo-terminal of a Jupyter `!` cell (JPY_PARENT_PID
    set), whose output Jupyter shows raw (a new table every refresh)."""
    isatty = getattr(stream, "isatty", None)
    return isatty is not None and isatty() and "JPY_PARENT_PID" not in os.environ


def resolve(mode: str, stream: TextIO) -> str:
    """The mode that runs: "auto" becomes rich or plain; rich without rich
    installed falls back to plain."""
    if mode not in MODES:
        raise ValueError(f"unknown progress mode {mode!r}; expected one of {', '.join(MODES)}")
    have_rich = importlib.util.find_spec("rich") is not None
    if mode == "auto":
        return "rich" if have_rich and live_terminal(stream) else "plain"
    if mode == "rich" and not have_rich:
        return "plain"
    return mode


class Progress:
    """A progress display over tasks of known size (see the module's doc).

    console: a rich Console to draw on (tests: Console(file=StringIO(),
    force_terminal=True)); by default one on `stream`."""

    def __init__(self, mode: str = "auto", stream: TextIO | None = None, console=None):
        self.stream = stream if stream is not None else sys.stderr
        self.mode = "rich" if console is not None and mode == "rich" else resolve(mode, self.stream)
        self._console = console
        self._bar = None          # rich.progress.Progress, started with the first task
        self._task = None         # the current task: its rich id
        self._name = ""
        self._total = 0
        self._completed = 0
        self._label = ""
        self._unit = ""
        self._open_line = False   # plain: a `start` line waits for its `done`
        self._drawn = 0.0         # rich: when `advance` last redrew

    # ---- tasks and items ---------------------------------------------------------------
    def task(self, name: str, total: int, unit: str = "") -> None:
        """Begin a task of `total` items (or steps, named `unit`); the one before ends."""
        self._end_line()
        if self.mode == "rich" and self._task is not None:
            self._rich().update(self._task, description=self._describe(finished=True))
        self._name, self._total, self._completed, self._label = name, max(0, total), 0, ""
        self._unit = unit
        if self.mode == "rich":
            bar = self._rich()
            self._task = bar.add_task(name, total=self._total)
            bar.refresh()

    def start(self, label: str) -> None:
        """The next item is `label` (plain: "[name i/N] label ..." with no newline yet)."""
        self._end_line()
        self._label = label
        if self.mode == "rich":
            self._rich().update(self._task, description=self._describe(), refresh=True)
        elif self.mode == "plain":
            self._print(f"[{self._name} {self._completed + 1}/{self._total}] {label} ...", end=" ",
                        flush=True)
            self._open_line = True

    def done(self, note: str = "") -> None:
        """The current item is finished; `note` is its outcome (a rate, FAILED: why)."""
        self._completed += 1
        if self.mode == "rich":
            bar = self._rich()
            if note:
                bar.console.print(f"{self._name}: {self._label}: {note}", markup=False, highlight=False)
            bar.update(self._task, completed=self._completed, refresh=True)
        elif self.mode == "plain":
            if not self._open_line:
                self._print(f"[{self._name} {self._completed}/{self._total}] {self._label}", end=" ")
            self._print(note, flush=True)
            self._open_line = False

    def advance(self, steps: int = 1) -> None:
        """`steps` more steps of the task done (no line per call: plain
        prints at each quarter of the task and at its end)."""
        before, self._completed = self._completed, self._completed + steps
        if self.mode == "rich":
            now = time.monotonic()   # redrawn at most every REFRESH_SECONDS, and at the end
            refresh = now - self._drawn >= REFRESH_SECONDS or self._completed >= self._total
            self._rich().update(self._task, completed=self._completed, refresh=refresh)
            self._drawn = now if refresh else self._drawn
        elif self.mode == "plain" and self._total:
            quarter = lambda k: 4 * min(k, self._total) // self._total  # noqa: E731
            if quarter(self._completed) > quarter(before):
                self._print(f"[{self._name}] {min(self._completed, self._total)}/{self._total} "
                            f"{self._unit}".rstrip(), flush=True)

    def log(self, line: str) -> None:
        """A detail line (rich: printed above the bar)."""
        if self.mode == "rich":
            self._rich().console.print(line, markup=False, highlight=False)
        elif self.mode == "plain":
            self._end_line()
            self._print(line, flush=True)

    # ---- the display ---------------------------------------------------------------------
    def close(self) -> None:
        """End the display (rich: the bar stays on screen as it last was)."""
        self._end_line()
        if self._bar is not None:
            if self._task is not None:
                self._bar.update(self._task, description=self._describe(finished=True))
            self._bar.stop()
            self._bar = self._task = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _describe(self, finished: bool = False) -> str:
        if finished or not self._label or self._completed >= self._total:
            return self._name
        return f"{self._name}: {self._label}"

    def _print(self, *args, **kwargs) -> None:
        """A plain-mode line on the stream; if its reader left (a closed
        pipe), the display stops and the work goes on."""
        try:
            print(*args, file=self.stream, **kwargs)
        except BrokenPipeError:
            self.mode = "none"
            self._open_line = False

    def _end_line(self) -> None:
        if self._open_line:
            self._print(flush=True)
            self._open_line = False

    def _rich(self):
        if self._bar is None:
            from rich.console import Console
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn,
                                       TimeElapsedColumn)

            console = self._console if self._console is not None else Console(file=self.stream)
            self._bar = RichProgress(TextColumn("{task.description}", markup=False), BarColumn(), MofNCompleteColumn(),
                                     TimeElapsedColumn(), console=console, auto_refresh=False)
            self._bar.start()
        return self._bar


def print_out(line: str) -> bool:
    """print `line` to stdout; if its reader has left (`shoal ... | head -1`),
    stdout goes to /dev/null from then on (so that the exit's flush finds no
    broken pipe either) and the caller's work goes on. False once it left."""
    try:
        print(line, flush=True)
        return True
    except BrokenPipeError:
        silence_stdout()
        return False


def silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null (its reader has left)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def stdout_console():
    """A rich Console on stdout that, when stdout's reader leaves, goes
    quiet and lets the work go on (rich's own raises SystemExit(1): a
    finished `shoal train | true` run exited 1, skipping its closing steps)."""
    from rich.console import Console

    class QuietOnBrokenPipe(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            silence_stdout()

    return QuietOnBrokenPipe()
