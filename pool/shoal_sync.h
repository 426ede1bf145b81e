/* shoal_sync.h — handing commands to worker processes through shared memory.
 *
 * One control block per worker, in the pool's shared region. The parent
 * writes `command` and bumps `request`; the worker runs the command and sets
 * `done = request`. Neither side pickles anything or makes a syscall on the
 * fast path.
 *
 * Waiting is the whole game on small machines: the parent and the workers
 * share few cores, so pure spinning starves the very process being waited
 * for. A waiter therefore spins a few hundred cycles (hand-offs that are
 * already done), then calls sched_yield (gives the core to whoever has
 * work) for up to SHOAL_YIELD_NS, then sleeps on a futex, so an idle pool
 * burns no core. The waker only makes the futex syscall when the waiter has
 * said it sleeps. A waiter sleeps at once when a yield shows the core is
 * contended (SHOAL_CONTENDED_NS): other jobs' timeslices would make each
 * hand-off wait milliseconds.
 */
#ifndef SHOAL_SYNC_H
#define SHOAL_SYNC_H

#include <stdint.h>
#include <time.h>
#include <sched.h>
#include <errno.h>
#include <unistd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "shoal_block.h"

#ifndef SHOAL_SPIN_ITERS
#define SHOAL_SPIN_ITERS 32 /* measured: 16-64 beat 256 with 2 workers + parent on 2 cores */
#endif
#ifndef SHOAL_YIELD_NS
#define SHOAL_YIELD_NS 2000000LL /* 2 ms of yielding, then sleep */
#endif
/* Contended cores. When other processes keep the cores busy (other jobs, a
 * learner's threads), a waiter that yields stays runnable: the scheduler
 * lets it spin out its share, preempts it, and runs the busy process for a
 * whole timeslice (milliseconds), while the hand-off it waits for has long
 * arrived. A task woken from a futex sleep instead runs at once. So a
 * waiter that finds its core was taken from it for SHOAL_CONTENDED_NS or
 * more between two of its clock reads (on a free core they are a
 * microsecond apart, and the pool's own processes hand a core back within
 * a short step) marks the process contended, and for SHOAL_CONTENDED_HOLD_NS
 * after that its waits sleep instead of yielding (each hand-off then costs
 * a futex wake: a few microseconds, not a timeslice). Then yielding is
 * tried again. */
#ifndef SHOAL_CONTENDED_NS
#define SHOAL_CONTENDED_NS 500000LL
#endif
#ifndef SHOAL_CONTENDED_HOLD_NS
#define SHOAL_CONTENDED_HOLD_NS 100000000LL
#endif

typedef struct {
    /* written by the parent */
    uint32_t request;          /* bumped once per command */
    uint32_t command;          /* SHOAL_CMD_* */
    uint32_t worker_sleeping;  /* set by the worker while in futex wait on request */
    uint32_t pad0_[13];
    /* written by the worker (own cache line) */
    uint32_t done;             /* = request once the command has run */
    uint32_t parent_sleeping;  /* set by the parent while in futex wait on done */
    uint32_t status;           /* Python workers: SHOAL_STATUS_* of the last command */
    uint32_t pad1_;
    uint64_t busy_ns;          /* time spent running commands, summed (read with no lock:
                                  one aligned word, a diagnostic) */
    int64_t busy_since;        /* Python workers: when the command being run arrived */
    uint32_t pad2_[8];
} shoal_ctrl;

typedef char shoal_ctrl_is_128_bytes[sizeof(shoal_ctrl) == 128 ? 1 : -1];

static inline uint32_t shoal_load(const uint32_t* p) {
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

static inline int64_t shoal_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* When this process last found a core taken from it while waiting. */
static int64_t shoal_contended_at = INT64_MIN / 2;

static inline int shoal_contended(int64_t now) {
    return now - __atomic_load_n(&shoal_contended_at, __ATOMIC_RELAXED) < SHOAL_CONTENDED_HOLD_NS;
}

/* `before` and `now`: two clock reads of a wait, with a yield between them. */
static inline void shoal_note_gap(int64_t before, int64_t now) {
    if (now - before >= SHOAL_CONTENDED_NS) __atomic_store_n(&shoal_contended_at, now, __ATOMIC_RELAXED);
}

static inline void shoal_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline void shoal_futex_wait(uint32_t* word, uint32_t value, int64_t timeout_ns) {
    struct timespec ts = {(time_t)(timeout_ns / 1000000000LL), (long)(timeout_ns % 1000000000LL)};
    syscall(SYS_futex, word, FUTEX_WAIT, value, &ts, NULL, 0);
}

static inline void shoal_futex_wake(uint32_t* word) {
    syscall(SYS_futex, word, FUTEX_WAKE, 0x7fffffff, NULL, NULL, 0);
}

/* Publish a new value of *word and wake its waiter if it sleeps. seq_cst on
 * both sides (here and in shoal_wait) rules out a lost wake-up: either the
 * waiter sees the new value or we see its sleeping flag. */
static inline void shoal_publish(uint32_t* word, uint32_t value, uint32_t* sleeping) {
    __atomic_store_n(word, value, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleeping, __ATOMIC_SEQ_CST)) shoal_futex_wake(word);
}

/* Wait until (*word == value) if until_equal, else until (*word != value).
 * Returns 1 when the condition holds, 0 after timeout_ns (< 0: no timeout). */
static inline int shoal_wait(uint32_t* word, uint32_t value, int until_equal,
                             uint32_t* sleeping, int64_t timeout_ns, int64_t yield_ns) {
#define SHOAL_READY(v) (until_equal ? (v) == value : (v) != value)
    for (int i = 0; i < SHOAL_SPIN_ITERS; i++) {
        if (SHOAL_READY(shoal_load(word))) return 1;
        shoal_cpu_relax();
    }
    const int64_t start = shoal_now_ns();
    int64_t waited = 0, before = start;
    while (waited < yield_ns && !shoal_contended(before)) {   /* (contended: sleep at once) */
        sched_yield();
        const int64_t now = shoal_now_ns();
        shoal_note_gap(before, now);
        if (SHOAL_READY(shoal_load(word))) return 1;
        waited = now - start;
        if (timeout_ns >= 0 && waited >= timeout_ns) return 0;
        before = now;
    }
    for (;;) {
        __atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
        uint32_t seen = __atomic_load_n(word, __ATOMIC_SEQ_CST);
        if (SHOAL_READY(seen)) {
            __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
            return 1;
        }
        int64_t nap = 100000000LL; /* wake every 100 ms to honour the timeout */
        if (timeout_ns >= 0 && timeout_ns - waited < nap) nap = timeout_ns - waited;
        if (nap > 0) shoal_futex_wait(word, seen, nap);
        __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
        if (SHOAL_READY(shoal_load(word))) return 1;
        waited = shoal_now_ns() - start;
        if (timeout_ns >= 0 && waited >= timeout_ns) return 0;
    }
#undef SHOAL_READY
}

/* Worker: add the time since `since` to busy_ns (only this worker writes it). */
static inline void shoal_add_busy(shoal_ctrl* ctrl, int64_t since) {
    __atomic_store_n(&ctrl->busy_ns, ctrl->busy_ns + (uint64_t)(shoal_now_ns() - since), __ATOMIC_RELAXED);
}

/* Parent: a worker's busy_ns so far (it may be running). */
static inline uint64_t shoal_busy_ns(const shoal_ctrl* ctrl) {
    return __atomic_load_n(&ctrl->busy_ns, __ATOMIC_RELAXED);
}

/* Worker: wait for the next request after `seen`; returns it (the command
 * is then in ctrl->command). Used by Python workers, which run their own loop. */
static inline uint32_t shoal_next_request(shoal_ctrl* ctrl, uint32_t seen, int64_t yield_ns) {
    shoal_wait(&ctrl->request, seen, 0, &ctrl->worker_sleeping, -1, yield_ns);
    ctrl->busy_since = shoal_now_ns();
    return shoal_load(&ctrl->request);
}

/* Worker: report `request` done, with `status` (ordered before done). */
static inline void shoal_report_done(shoal_ctrl* ctrl, uint32_t request, uint32_t status) {
    shoal_add_busy(ctrl, ctrl->busy_since);
    __atomic_store_n(&ctrl->status, status, __ATOMIC_RELAXED);
    shoal_publish(&ctrl->done, request, &ctrl->parent_sleeping);
}

/* Parent: hand `command` to workers [first, first + count). */
static inline void shoal_send(shoal_ctrl* ctrl, int first, int count, uint32_t command) {
    for (int w = first; w < first + count; w++) {
        __atomic_store_n(&ctrl[w].command, command, __ATOMIC_RELAXED);
        shoal_publish(&ctrl[w].request, ctrl[w].request + 1, &ctrl[w].worker_sleeping);
    }
}

/* Parent: wait for workers [first, first + count) to finish their command.
 * Returns -1 when all are done, else the first worker still busy after
 * timeout_ns (the caller checks it is alive and waits again). */
static inline int shoal_wait_done(shoal_ctrl* ctrl, int first, int count, int64_t timeout_ns,
                                  int64_t yield_ns) {
    for (int w = first; w < first + count; w++) {
        if (!shoal_wait(&ctrl[w].done, ctrl[w].request, 1, &ctrl[w].parent_sleeping, timeout_ns, yield_ns))
            return w;
    }
    return -1;
}

/* Parent: wait until workers [first, first + count) are done, for at most
 * timeout_ns in all, spinning a little, then yielding the core (workers
 * may need it: a parent spinning on a core of its two busy workers cut the
 * async pool's steps by 2.5x), with the clock read after every yield.
 * Returns -1, or the first worker still busy; *began_ns: when the
 * clock was first read (set whenever a worker was still busy after the
 * spin; workers done by then cost no clock read). A contended process
 * (above) sleeps on the futex here instead of yielding, the GIL still held
 * (a yield would wait out another process's timeslice, and a busy Python
 * thread given the GIL would keep it for its switch interval). */
static inline int shoal_wait_done_briefly(shoal_ctrl* ctrl, int first, int count, int64_t timeout_ns,
                                          int64_t* began_ns) {
    int64_t deadline = -1, before = 0;
    for (int w = first; w < first + count; w++) {
        for (int k = 0; shoal_load(&ctrl[w].done) != ctrl[w].request; k++) {
            if (k < SHOAL_SPIN_ITERS) {
                shoal_cpu_relax();
                continue;
            }
            const int64_t now = shoal_now_ns();
            if (deadline < 0) {
                *began_ns = before = now;
                deadline = now + timeout_ns;
            }
            shoal_note_gap(before, now);
            if (now >= deadline) return w;
            before = now;
            if (!shoal_contended(now))
                sched_yield();
            else if (!shoal_wait(&ctrl[w].done, ctrl[w].request, 1, &ctrl[w].parent_sleeping, deadline - now, 0))
                return w;
        }
    }
    return -1;
}

/* Worker: serve commands until CLOSE. (A dead parent ends the worker
 * through the watcher thread below, started before this loop.) */
static inline void shoal_worker_loop(shoal_ctrl* ctrl, shoal_block_ops* ops) {
    /* Requests count from 0 when the pool is created; the parent may have
     * sent the first one before this worker got here. */
    uint32_t seen = 0;
    for (;;) {
        if (!shoal_wait(&ctrl->request, seen, 0, &ctrl->worker_sleeping, -1, SHOAL_YIELD_NS)) return;
        seen = shoal_load(&ctrl->request);
        const uint32_t command = __atomic_load_n(&ctrl->command, __ATOMIC_RELAXED);
        if (command != SHOAL_CMD_CLOSE) {
            const int64_t start = shoal_now_ns();
            ops->run(ops->ctx, (int)command);
            shoal_add_busy(ctrl, start);
        }
        shoal_publish(&ctrl->done, seen, &ctrl->parent_sleeping);
        if (command == SHOAL_CMD_CLOSE) return;
    }
}

/* ---- ranks of one node meeting in shared memory ------------------------------
 *
 * Data-parallel training (shoal/distributed.py) sums gradients over the
 * ranks of one node through a shared region instead of sockets: each rank
 * writes its tensor to its own slot, then arrives at generation `gen` and
 * waits until every rank has. One word per rank, each on its own cache
 * line; waiting spins, yields, then sleeps on the futex of the word it
 * waits for, counting itself in that word's `sleepers` so the arriving rank
 * wakes it (the seq_cst store/load pairs on both sides rule out a lost
 * wake-up, as in shoal_publish / shoal_wait).
 */
typedef struct {
    uint32_t arrived;   /* the last generation this rank arrived at */
    uint32_t sleepers;  /* ranks in futex wait on `arrived` */
    uint32_t pad_[14];
} shoal_rank_word;

typedef char shoal_rank_word_is_64_bytes[sizeof(shoal_rank_word) == 64 ? 1 : -1];

static inline int shoal_reached(const shoal_rank_word* w, uint32_t gen) {
    return (int32_t)(__atomic_load_n(&w->arrived, __ATOMIC_SEQ_CST) - gen) >= 0;  /* wraps */
}

static inline void shoal_rank_arrive(shoal_rank_word* words, int rank, uint32_t gen) {
    __atomic_store_n(&words[rank].arrived, gen, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&words[rank].sleepers, __ATOMIC_SEQ_CST)) shoal_futex_wake(&words[rank].arrived);
}

/* Wait until ranks [0, world) have all arrived at `gen`. Returns -1 when
 * they have, else the first rank still missing after timeout_ns (the caller
 * checks that rank is alive and waits again). */
static inline int shoal_ranks_wait(shoal_rank_word* words, int world, uint32_t gen, int64_t timeout_ns,
                                   int64_t yield_ns) {
    const int64_t start = shoal_now_ns();
    int64_t yielded_at = -1;
    for (int r = 0; r < world; r++) {
        shoal_rank_word* w = &words[r];
        int i = 0;
        while (!shoal_reached(w, gen)) {
            const int64_t now = shoal_now_ns(), waited = now - start;
            if (waited >= timeout_ns) return r;
            if (yielded_at >= 0) shoal_note_gap(yielded_at, now);
            yielded_at = -1;
            if (i < SHOAL_SPIN_ITERS) {
                shoal_cpu_relax();
                i++;
            } else if (waited < yield_ns && !shoal_contended(now)) {
                yielded_at = now;
                sched_yield();
            } else {
                __atomic_fetch_add(&w->sleepers, 1, __ATOMIC_SEQ_CST);
                const uint32_t seen = __atomic_load_n(&w->arrived, __ATOMIC_SEQ_CST);
                if ((int32_t)(seen - gen) < 0) {
                    int64_t nap = timeout_ns - waited;
                    if (nap > 100000000LL) nap = 100000000LL;
                    shoal_futex_wait(&w->arrived, seen, nap);
                }
                __atomic_fetch_sub(&w->sleepers, 1, __ATOMIC_SEQ_CST);
            }
        }
    }
    return -1;
}

/* ---- workers die with the pool's process ------------------------------------
 *
 * A worker must not outlive the process that created its pool, whatever
 * start method made it and whichever thread created the pool. So each
 * worker runs one detached thread that sleeps in poll() on a pidfd of that
 * process (readable once the whole process has exited, zombie or not) and
 * then _exit()s the worker. It costs nothing per step: the hand-off above
 * never looks at it. PR_SET_PDEATHSIG is not used: it fires when the
 * creating *thread* exits, and under forkserver it points at the forkserver.
 * Without a pidfd (kernel < 5.3) the thread polls every 200 ms instead:
 * getppid() when the pool's process is the worker's parent, else kill(pid, 0).
 */
typedef struct {
    int fd;          /* pidfd of the pool's process, or -1 */
    pid_t pid;       /* the pool's process */
    int is_parent;   /* it is this worker's parent (fork, spawn) */
} shoal_watch;

static inline int shoal_watched_gone(const shoal_watch* w) {
    if (w->is_parent) return getppid() != w->pid;
    return kill(w->pid, 0) != 0 && errno == ESRCH;
}

static void* shoal_watch_main(void* arg) {
    shoal_watch w = *(shoal_watch*)arg;
    for (;;) {
        if (w.fd >= 0) {
            struct pollfd p = {w.fd, POLLIN, 0};
            int r = poll(&p, 1, -1);
            if (r > 0) break;
            if (r < 0 && errno != EINTR) w.fd = -1; /* fall back to polling the pid */
        } else {
            if (shoal_watched_gone(&w)) break;
            struct timespec nap = {0, 200000000L};
            nanosleep(&nap, NULL);
        }
    }
    _exit(1);
    return NULL;
}

/* Start the watcher thread; 0 on success, else an errno value. */
static inline int shoal_watch_parent(int fd, pid_t pid, int is_parent) {
    static shoal_watch w; /* one watcher per worker process */
    w.fd = fd;
    w.pid = pid;
    w.is_parent = is_parent;
    pthread_attr_t attr;
    pthread_t thread;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    int err = pthread_create(&thread, &attr, shoal_watch_main, &w);
    pthread_attr_destroy(&attr);
    return err;
}

#endif /* SHOAL_SYNC_H */
