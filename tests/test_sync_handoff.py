"""The shoal_sync.h hand-off, one component at a time, in the EnvPool manner
(one control block per worker; the parent bumps `request`, the worker sets
`done`): counters wrapping past UINT32_MAX, the sleeping flags, no lost
wake-up over many commands in a row, and waiting when nothing is pending.

A C harness (below) includes pool/shoal_sync.h itself and runs the real
functions with threads standing in for processes; it interposes syscall()
so futex waits can be made untimed (a lost wake-up then hangs, and the
harness's watchdog reports it instead of the 100 ms naps hiding it). It is
built with `cc` twice: with the header's defaults, and with
SHOAL_YIELD_NS=0 so that both sides go to futex sleep on nearly every wait.
The last tests drive the same words through shoal.pool._native, as the
Python workers do.
"""
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from shoal.pool import _native
from shoal.pool.layout import CTRL_BYTES

ROOT = Path(__file__).resolve().parent.parent
CC = shutil.which("cc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (`cc`) on PATH to build the hand-off harness")

HARNESS = r'''/* Test harness for pool/shoal_sync.h: threads stand in for the pool's
 * processes (the hand-off only touches the shared words and futexes, which
 * behave the same between threads as between processes sharing a mapping).
 *
 * syscall() is interposed to count futex waits / wakes and, where a case
 * asks for it, to make every futex wait untimed: the waiter's 100 ms naps
 * then cannot hide a lost wake-up, which becomes a hang the watchdog
 * reports. Usage: harness CASE [N]; prints OK on success, else FAIL ... and
 * exits 1. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "shoal_sync.h"

static int g_untimed;                /* futex waits ignore their timeout */
static uint64_t g_waits, g_wakes;    /* futex syscalls made */

long syscall(long number, ...) {
    static long (*real)(long, ...);
    if (!real) real = (long (*)(long, ...))dlsym(RTLD_NEXT, "syscall");
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    if (number == SYS_futex) {
        if (a[1] == FUTEX_WAIT) {
            __atomic_add_fetch(&g_waits, 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&g_untimed, __ATOMIC_SEQ_CST)) a[3] = 0;
        } else if (a[1] == FUTEX_WAKE) {
            __atomic_add_fetch(&g_wakes, 1, __ATOMIC_SEQ_CST);
        }
    }
    return real(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

#define FAIL(...) do { printf("FAIL %s:%d: ", __FILE__, __LINE__); printf(__VA_ARGS__); \
    printf("\n"); fflush(stdout); _exit(1); } while (0)
#define CHECK(c) do { if (!(c)) FAIL("%s", #c); } while (0)
#define SEC 1000000000LL

static void* watchdog_main(void* arg) {
    struct timespec t = {(time_t)(intptr_t)arg, 0};
    nanosleep(&t, NULL);
    printf("FAIL watchdog: still running after %ld s (a lost wake-up?)\n", (long)(intptr_t)arg);
    fflush(stdout);
    _exit(2);
    return NULL;
}

static void start_watchdog(long seconds) {
    pthread_t t;
    pthread_create(&t, NULL, watchdog_main, (void*)(intptr_t)seconds);
    pthread_detach(t);
}

/* ---- a worker: shoal_worker_loop over a block that records its commands --- */

#define MAX_WORKERS 4
static shoal_ctrl ctrls[MAX_WORKERS] __attribute__((aligned(64)));

typedef struct {
    int index;
    uint64_t runs;               /* commands run (CLOSE excluded) */
    uint32_t last_command;
    uint64_t input, output;      /* payload: output = 2 * input, written by the command */
    int64_t hold_ns;             /* a command takes this long */
    uint32_t parent_slept;       /* parent_sleeping seen set during a command */
    volatile int gate;           /* > 0: the command blocks until it is 0 */
    shoal_block_ops ops;
    pthread_t thread;
    clockid_t clock;
} worker;

static worker workers[MAX_WORKERS];

static void run_block(void* ctx, int command) {
    worker* w = ctx;
    w->runs++;
    w->last_command = (uint32_t)command;
    w->output = 2 * w->input;
    if (w->hold_ns > 0) {
        int64_t until = shoal_now_ns() + w->hold_ns;
        while (shoal_now_ns() < until) {
            struct timespec t = {0, 1000000L};
            nanosleep(&t, NULL);
            if (shoal_load(&ctrls[w->index].parent_sleeping)) w->parent_slept = 1;
        }
    }
    while (__atomic_load_n(&w->gate, __ATOMIC_ACQUIRE)) {
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
}

static void* worker_main(void* arg) {
    worker* w = arg;
    shoal_worker_loop(&ctrls[w->index], &w->ops);
    return NULL;
}

static void start_workers(int n) {
    for (int i = 0; i < n; i++) {
        workers[i].index = i;
        workers[i].ops.run = run_block;
        workers[i].ops.ctx = &workers[i];
        CHECK(pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0);
        CHECK(pthread_getcpuclockid(workers[i].thread, &workers[i].clock) == 0);
    }
}

static void close_workers(int n) {
    shoal_send(ctrls, 0, n, SHOAL_CMD_CLOSE);
    CHECK(shoal_wait_done(ctrls, 0, n, 5 * SEC, SHOAL_YIELD_NS) == -1);
    for (int i = 0; i < n; i++) pthread_join(workers[i].thread, NULL);
}

static int64_t cpu_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (int64_t)ts.tv_sec * SEC + ts.tv_nsec;
}

static void wait_flag(uint32_t* flag, int64_t timeout_ns) {
    int64_t until = shoal_now_ns() + timeout_ns;
    while (!shoal_load(flag)) {
        if (shoal_now_ns() > until) FAIL("flag never set");
        struct timespec t = {0, 1000000L};
        nanosleep(&t, NULL);
    }
}

/* ---- cases ----------------------------------------------------------------- */

/* request / done near UINT32_MAX: commands keep flowing through the wrap. */
static void case_wrap(int n) {
    g_untimed = 1;
    const uint32_t starts[2] = {UINT32_MAX - 3, UINT32_MAX};
    for (int w = 0; w < 2; w++) {
        /* A worker loop starts from request 0: a pool whose counters are
         * already at `start` looks to it like one pending request. */
        ctrls[w].request = starts[w];
        ctrls[w].command = 9;
    }
    start_workers(2);
    CHECK(shoal_wait_done(ctrls, 0, 2, 5 * SEC, SHOAL_YIELD_NS) == -1);
    for (int w = 0; w < 2; w++) CHECK(workers[w].runs == 1 && ctrls[w].done == starts[w]);
    for (int k = 0; k < n; k++) {
        for (int w = 0; w < 2; w++) workers[w].input = (uint64_t)k * 10 + w;
        shoal_send(ctrls, 0, 2, 100 + (k % 2));
        if (shoal_wait_done(ctrls, 0, 2, 5 * SEC, SHOAL_YIELD_NS) != -1) FAIL("command %d not done", k);
        for (int w = 0; w < 2; w++) {
            const uint32_t expect = starts[w] + 1u + (uint32_t)k;
            if (ctrls[w].request != expect || ctrls[w].done != expect)
                FAIL("worker %d after %d: request %u done %u, expected %u", w, k, ctrls[w].request,
                     ctrls[w].done, expect);
            CHECK(workers[w].runs == 2 + (uint64_t)k);
            CHECK(workers[w].last_command == 100u + (uint32_t)(k % 2));
            CHECK(workers[w].output == 2 * ((uint64_t)k * 10 + w));
        }
    }
    if (n >= 4) CHECK(ctrls[0].request < starts[0] && ctrls[1].request < starts[1]); /* both wrapped */
    close_workers(2);
}

/* Python workers' API: shoal_next_request / shoal_report_done across the wrap. */
typedef struct { uint32_t seen; uint64_t served; } py_worker;

static void* py_worker_main(void* arg) {
    py_worker* p = arg;
    for (;;) {
        uint32_t request = shoal_next_request(&ctrls[0], p->seen, 0);
        if (request == p->seen) continue;
        p->seen = request;
        uint32_t command = shoal_load(&ctrls[0].command);
        p->served++;
        shoal_report_done(&ctrls[0], request, command == SHOAL_CMD_CLOSE ? 0 : command + 1000);
        if (command == SHOAL_CMD_CLOSE) return NULL;
    }
}

static void case_wrap_next_request(int n) {
    g_untimed = 1;
    const uint32_t start = UINT32_MAX - 2;
    ctrls[0].request = ctrls[0].done = start;
    py_worker p = {start, 0};
    pthread_t t;
    CHECK(pthread_create(&t, NULL, py_worker_main, &p) == 0);
    for (int k = 0; k < n; k++) {
        shoal_send(ctrls, 0, 1, 50 + k % 3);
        if (shoal_wait_done(ctrls, 0, 1, 5 * SEC, 0) != -1) FAIL("command %d not done", k);
        CHECK(ctrls[0].done == start + 1u + (uint32_t)k);
        CHECK(shoal_load(&ctrls[0].status) == 1050u + (uint32_t)(k % 3));
        CHECK(p.served == (uint64_t)k + 1);
    }
    shoal_send(ctrls, 0, 1, SHOAL_CMD_CLOSE);
    CHECK(shoal_wait_done(ctrls, 0, 1, 5 * SEC, 0) == -1);
    pthread_join(t, NULL);
}

/* A worker asleep on the futex is woken by the next command (only the wake
 * can wake it: waits are untimed), and a parent asleep on `done` likewise. */
static void case_sleep(int n) {
    g_untimed = 1;
    start_workers(1);
    for (int k = 0; k < n; k++) {
        wait_flag(&ctrls[0].worker_sleeping, 5 * SEC);
        uint64_t wakes = __atomic_load_n(&g_wakes, __ATOMIC_SEQ_CST);
        shoal_send(ctrls, 0, 1, SHOAL_CMD_STEP);
        if (shoal_wait_done(ctrls, 0, 1, 5 * SEC, SHOAL_YIELD_NS) != -1) FAIL("sleeping worker not woken (%d)", k);
        CHECK(__atomic_load_n(&g_wakes, __ATOMIC_SEQ_CST) > wakes); /* the sender saw the flag */
        CHECK(workers[0].runs == (uint64_t)k + 1);
    }
    /* the parent sleeps through a long command and is woken by done */
    workers[0].hold_ns = 60000000LL;
    uint64_t wakes = __atomic_load_n(&g_wakes, __ATOMIC_SEQ_CST);
    shoal_send(ctrls, 0, 1, SHOAL_CMD_STEP);
    CHECK(shoal_wait_done(ctrls, 0, 1, 5 * SEC, 0) == -1);
    CHECK(workers[0].parent_slept == 1);
    CHECK(shoal_load(&ctrls[0].parent_sleeping) == 0);
    CHECK(__atomic_load_n(&g_wakes, __ATOMIC_SEQ_CST) >= wakes + 1);
    workers[0].hold_ns = 0;
    close_workers(1);
}

/* Many commands in a row, both sides going to sleep as often as they can
 * (build with SHOAL_YIELD_NS=0): no wake-up is lost. */
static void case_burst(int n) {
    g_untimed = 1;
    const int W = 2;
    start_workers(W);
    for (int k = 0; k < n; k++) {
        const int first = k % 3 == 2 ? k % W : 0, count = k % 3 == 2 ? 1 : W; /* all, or one */
        for (int w = first; w < first + count; w++) workers[w].input = (uint64_t)k * 7 + w;
        shoal_send(ctrls, first, count, SHOAL_CMD_STEP + (k & 1));
        if (shoal_wait_done(ctrls, first, count, 10 * SEC, k % 2 ? 0 : SHOAL_YIELD_NS) != -1)
            FAIL("command %d lost", k);
        for (int w = first; w < first + count; w++) {
            CHECK(workers[w].output == 2 * ((uint64_t)k * 7 + w));
            CHECK(workers[w].last_command == (uint32_t)(SHOAL_CMD_STEP + (k & 1)));
        }
    }
    uint64_t total = 0;
    for (int w = 0; w < W; w++) {
        CHECK(ctrls[w].done == ctrls[w].request);
        total += workers[w].runs;
    }
    CHECK(total == (uint64_t)n / 3 * (2 * W + 1) + (uint64_t)(n % 3) * W);
    printf("futex waits %llu wakes %llu\n", (unsigned long long)g_waits, (unsigned long long)g_wakes);
    close_workers(W);
}

/* Waiting when nothing is pending. */
static void case_idle(int n) {
    (void)n;
    g_untimed = 0; /* here the timeouts are the point */
    start_workers(2);
    /* nothing sent: the parent's wait is over at once, without a syscall */
    uint64_t waits = __atomic_load_n(&g_waits, __ATOMIC_SEQ_CST);
    int64_t t0 = shoal_now_ns();
    CHECK(shoal_wait_done(ctrls, 0, 2, 5 * SEC, SHOAL_YIELD_NS) == -1);
    CHECK(shoal_now_ns() - t0 < 100000000LL);
    /* idle workers sleep: flag set, next to no CPU over 300 ms */
    for (int w = 0; w < 2; w++) wait_flag(&ctrls[w].worker_sleeping, 5 * SEC);
    int64_t cpu0 = cpu_ns(workers[0].clock) + cpu_ns(workers[1].clock);
    struct timespec t = {0, 300000000L};
    nanosleep(&t, NULL);
    int64_t idle_cpu = cpu_ns(workers[0].clock) + cpu_ns(workers[1].clock) - cpu0;
    if (idle_cpu > 30000000LL) FAIL("idle workers used %lld ns of CPU in 300 ms", (long long)idle_cpu);
    (void)waits;
    /* a busy worker: the parent's wait times out on it (sleeping, not
     * spinning), names it, and a later wait sees it finish */
    workers[1].gate = 1;
    shoal_send(ctrls, 0, 2, SHOAL_CMD_STEP);
    int64_t cpu_parent = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
    t0 = shoal_now_ns();
    int busy = shoal_wait_done(ctrls, 0, 2, 250000000LL, SHOAL_YIELD_NS);
    int64_t waited = shoal_now_ns() - t0;
    cpu_parent = cpu_ns(CLOCK_THREAD_CPUTIME_ID) - cpu_parent;
    if (busy != 1) FAIL("wait_done returned %d, expected 1", busy);
    if (waited < 250000000LL || waited > 2 * SEC) FAIL("timed out after %lld ns", (long long)waited);
    if (cpu_parent > 50000000LL) FAIL("waiting parent used %lld ns of CPU", (long long)cpu_parent);
    CHECK(shoal_load(&ctrls[1].parent_sleeping) == 0);
    /* shoal_wait on its own: 0 after the timeout, 1 once the word moves */
    uint32_t word = 5, sleeping = 0;
    t0 = shoal_now_ns();
    CHECK(shoal_wait(&word, 5, 0, &sleeping, 150000000LL, 1000000LL) == 0);
    CHECK(shoal_now_ns() - t0 >= 150000000LL && sleeping == 0);
    CHECK(shoal_wait(&word, 5, 1, &sleeping, 0, 0) == 1);
    __atomic_store_n(&workers[1].gate, 0, __ATOMIC_RELEASE);
    CHECK(shoal_wait_done(ctrls, 0, 2, 5 * SEC, SHOAL_YIELD_NS) == -1);
    CHECK(workers[0].runs == 1 && workers[1].runs == 1);
    close_workers(2);
}

int main(int argc, char** argv) {
    if (argc < 2) FAIL("usage: harness CASE [N]");
    const int n = argc > 2 ? atoi(argv[2]) : 100;
    start_watchdog(10);
    if (!strcmp(argv[1], "wrap")) case_wrap(n);
    else if (!strcmp(argv[1], "wrap_next_request")) case_wrap_next_request(n);
    else if (!strcmp(argv[1], "sleep")) case_sleep(n);
    else if (!strcmp(argv[1], "burst")) case_burst(n);
    else if (!strcmp(argv[1], "idle")) case_idle(n);
    else FAIL("unknown case %s", argv[1]);
    printf("OK %s\n", argv[1]);
    return 0;
}
'''


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    """name -> path of the harness built with the header's defaults
    ("default") and with SHOAL_YIELD_NS=0 ("no_yield")."""
    folder = tmp_path_factory.mktemp("sync_harness")
    src = folder / "harness.c"
    src.write_text(HARNESS)
    built = {}
    for name, defines in (("default", []), ("no_yield", ["-DSHOAL_YIELD_NS=0"])):
        exe = folder / name
        build = subprocess.run([CC, "-O2", "-Wall", "-Wno-unused-function", *defines, f"-I{ROOT / 'pool'}",
                                f"-I{ROOT / 'envs'}", str(src), "-o", str(exe), "-lpthread", "-ldl"],
                               capture_output=True, text=True, timeout=120)
        assert build.returncode == 0, f"cc failed:\n{build.stderr}"
        built[name] = exe
    return built


def run_case(harness, build, case, n=None):
    args = [str(harness[build]), case] + ([str(n)] if n is not None else [])
    started = time.monotonic()
    result = subprocess.run(args, capture_output=True, text=True, timeout=30)
    elapsed = time.monotonic() - started
    assert result.returncode == 0 and f"OK {case}" in result.stdout, \
        f"{case} ({build}) exited {result.returncode}:\n{result.stdout}{result.stderr}"
    return result.stdout, elapsed


@needs_cc
@pytest.mark.parametrize("build", ["default", "no_yield"])
def test_counters_wrap_past_uint32_max(harness, build):
    """request / done start 3 and 0 below UINT32_MAX; 200 commands later
    both have wrapped, every command ran once, in order, with its payload."""
    run_case(harness, build, "wrap", 200)


@needs_cc
@pytest.mark.parametrize("build", ["default", "no_yield"])
def test_python_worker_calls_wrap_past_uint32_max(harness, build):
    """shoal_next_request / shoal_report_done (the Python workers' loop)
    across the wrap, with each command's status."""
    run_case(harness, build, "wrap_next_request", 200)


@needs_cc
@pytest.mark.parametrize("build", ["default", "no_yield"])
def test_sleeping_worker_and_parent_are_woken(harness, build):
    """A worker that set worker_sleeping (in futex wait) is woken by the next
    command, 20 times (the sender made the wake syscall); a parent asleep on
    done through a 60 ms command is woken by the worker."""
    run_case(harness, build, "sleep", 20)


@needs_cc
@pytest.mark.parametrize("build", ["default", "no_yield"])
def test_many_commands_in_a_row_lose_no_wake_up(harness, build):
    """5000 commands back to back to two workers (both, or one of them),
    futex waits untimed: a lost wake-up would hang (the watchdog fails it)."""
    out, elapsed = run_case(harness, build, "burst", 5000)
    assert elapsed < 20, out


@needs_cc
def test_waiting_when_nothing_is_pending(harness):
    """Nothing sent: wait_done returns at once. Idle workers sleep (flag set,
    < 30 ms of CPU over 300 ms). A worker stuck in its command: wait_done
    times out after 250 ms naming it, having slept, and sees it finish later;
    shoal_wait alone returns 0 after its timeout."""
    run_case(harness, "default", "idle")


# ---- the same words through shoal.pool._native (the Python workers' path) ----

def control_block(workers=1):
    control = np.zeros(workers * CTRL_BYTES // 4 + 16, np.uint32)
    offset = (-control.__array_interface__["data"][0] % 64) // 4  # cache-line aligned, as in a pool
    words = control[offset:offset + workers * CTRL_BYTES // 4]
    return words, words.__array_interface__["data"][0]


REQUEST, COMMAND, WORKER_SLEEPING, DONE, PARENT_SLEEPING, STATUS = 0, 1, 2, 16, 17, 18


def serve_python(address, seen, served):
    """A Python worker's loop (as in shoal.pool.python_pool), status = command + 1000."""
    while True:
        seen, command = _native.next_request(address, seen, 0.0)
        served.append((seen, command))
        if command == _native.CMD_CLOSE:
            _native.report_done(address, seen, 0)
            return
        _native.report_done(address, seen, command + 1000)


def test_native_exports_wrap_and_report_status():
    words, address = control_block()
    start = 2**32 - 3
    words[REQUEST] = words[DONE] = start
    served = []
    worker = threading.Thread(target=serve_python, args=(address, start, served), daemon=True)
    worker.start()
    try:
        for k in range(8):
            _native.send(address, 0, 1, 50 + k)
            assert _native.wait_done(address, 0, 1, 5.0, 0.0) == -1
            assert words[REQUEST] == words[DONE] == (start + 1 + k) % 2**32
            assert _native.worker_status(address, 0) == 1050 + k
            assert words[STATUS] == 1050 + k
        assert [s for s, _ in served] == [(start + 1 + k) % 2**32 for k in range(8)]
    finally:
        _native.send(address, 0, 1, _native.CMD_CLOSE)
        assert _native.wait_done(address, 0, 1, 5.0) == -1
        worker.join(5)
    assert not worker.is_alive()


def test_native_wait_done_times_out_on_a_busy_worker_then_sees_it_finish():
    words, address = control_block(2)
    started = time.monotonic()
    assert _native.wait_done(address, 0, 2, 5.0) == -1  # nothing pending: at once
    assert time.monotonic() - started < 1.0
    _native.send(address, 0, 2, _native.CMD_STEP)
    _native.report_done(address, words[REQUEST], 0)  # worker 0 done, worker 1 busy
    started = time.monotonic()
    assert _native.wait_done(address, 0, 2, 0.2, 0.001) == 1
    assert time.monotonic() - started >= 0.2
    assert words[CTRL_BYTES // 4 + PARENT_SLEEPING] == 0
    threading.Timer(0.05, _native.report_done, (address + CTRL_BYTES, int(words[CTRL_BYTES // 4 + REQUEST]), 7)).start()
    assert _native.wait_done(address, 0, 2, 5.0, 0.0) == -1
    assert _native.worker_status(address, 1) == 7


def voluntary_switches(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError("no voluntary_ctxt_switches in /proc/<pid>/status")


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs 2 usable cores (a busy one and the parent's)")
def test_a_worker_whose_core_another_process_keeps_busy_sleeps_between_steps(no_leaks):
    """On a core another process keeps busy (another job, a learner's
    threads), a waiting worker that only yielded stayed runnable: the
    scheduler ran the busy process a whole timeslice each step, while the
    parent's command waited (CartPole 8 envs: 2.5 k steps/s beside two busy
    processes, docs/results.md). The worker must see the contention and
    sleep on its futex between steps instead (a voluntary context switch
    per step), where a wake-up runs it at once."""
    import shoal
    cores = sorted(os.sched_getaffinity(0))
    pool = shoal.make("CartPole", 8, num_workers=1, parent_share=False, seed=0)
    worker = pool._workers.processes[0].pid
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        os.sched_setaffinity(worker, {cores[0]})
        os.sched_setaffinity(busy.pid, {cores[0]})
        actions = np.zeros(8, np.int32)
        for _ in range(50):   # (the worker finds its core contended)
            pool.step(actions)
        before = voluntary_switches(worker)
        for _ in range(200):
            pool.step(actions)
        assert voluntary_switches(worker) - before >= 100   # about one a step (yielding: none)
    finally:
        busy.kill()
        busy.wait()
        pool.close()
