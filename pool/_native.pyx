# cython: language_level=3, boundscheck=False, wraparound=False
"""The hot path between the pool and its worker processes (see shoal_sync.h)."""

from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

from cpython.buffer cimport PyBUF_FORMAT, PyBUF_ND, PyBUF_STRIDES
from libc.errno cimport errno

import os

import numpy as np

cdef extern from "shoal_sync.h" nogil:
    ctypedef struct shoal_ctrl:
        pass
    ctypedef struct shoal_block_ops:
        pass
    enum:
        SHOAL_CMD_STEP
        SHOAL_CMD_RESET
        SHOAL_CMD_CLOSE
        SHOAL_CMD_STEP_SELECTED
    void shoal_send(shoal_ctrl* ctrl, int first, int count, uint32_t command)
    int shoal_wait_done(shoal_ctrl* ctrl, int first, int count, int64_t timeout_ns, int64_t yield_ns)
    int shoal_wait_done_briefly(shoal_ctrl* ctrl, int first, int count, int64_t timeout_ns, int64_t* began_ns)
    int64_t shoal_now_ns()
    enum: SHOAL_YIELD_NS
    void shoal_worker_loop(shoal_ctrl* ctrl, shoal_block_ops* ops)
    uint32_t shoal_next_request(shoal_ctrl* ctrl, uint32_t seen, int64_t yield_ns)
    void shoal_report_done(shoal_ctrl* ctrl, uint32_t request, uint32_t status)
    uint64_t shoal_busy_ns(const shoal_ctrl* ctrl)
    int shoal_watch_parent(int fd, int pid, int is_parent)
    ctypedef struct shoal_rank_word:
        pass
    void shoal_rank_arrive(shoal_rank_word* words, int rank, uint32_t gen)
    int shoal_ranks_wait(shoal_rank_word* words, int world, uint32_t gen, int64_t timeout_ns, int64_t yield_ns)

ctypedef struct ctrl_words:  # the fields of shoal_ctrl read from Python
    uint32_t request
    uint32_t command
    uint32_t worker_sleeping
    uint32_t pad0_[13]
    uint32_t done
    uint32_t parent_sleeping
    uint32_t status
    uint32_t pad1_
    uint64_t busy_ns
    int64_t busy_since
    uint32_t pad2_[8]

cdef extern from "sys/mman.h" nogil:
    void* mmap(void* addr, size_t length, int prot, int flags, int fd, long offset)
    int munmap(void* addr, size_t length)
    enum:
        PROT_READ
        PROT_WRITE
        MAP_SHARED
        MAP_PRIVATE
        MAP_ANONYMOUS
        MAP_FIXED
        MAP_NORESERVE
    void* MAP_FAILED

CMD_STEP = SHOAL_CMD_STEP
CMD_RESET = SHOAL_CMD_RESET
CMD_CLOSE = SHOAL_CMD_CLOSE
CMD_MESSAGE = 4  # Python workers only: read the next message from the pipe
CMD_STEP_SELECTED = SHOAL_CMD_STEP_SELECTED   # step the envs whose step_selected entry is set
CTRL_BYTES = 128


def watch_parent(int pidfd, int pid, bint is_parent):
    """Worker side: start a thread that _exit()s this process once process
    `pid` (the pool's) has exited; pidfd: a pidfd of it, or -1 to poll the
    pid instead (see shoal_sync.h). No cost on the hot path."""
    cdef int err = shoal_watch_parent(pidfd, pid, is_parent)
    if err:
        raise OSError(err, "cannot start the parent watcher thread")


cdef class SharedMapping:
    """A shared, writable mapping of `size` bytes of the file `fd`, as
    Python's mmap.mmap(fd, size) but keeping no descriptor of its own
    (mmap keeps a duplicate for as long as the object lives, and so does
    every array carved from it: one descriptor for each closed pool whose
    arrays a user kept). It unmaps when the last reference, the arrays'
    too, is gone."""
    cdef char* address
    cdef Py_ssize_t size
    cdef Py_ssize_t shape[1]
    cdef Py_ssize_t strides[1]

    def __cinit__(self, int fd, Py_ssize_t size):
        self.address = NULL
        if size <= 0:
            raise ValueError(f"a mapping needs a positive size, got {size}")
        cdef void* result = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        if result == MAP_FAILED:
            code = errno
            raise OSError(code, os.strerror(code))
        self.address = <char*>result
        self.size = size
        self.shape[0] = size
        self.strides[0] = 1

    def __dealloc__(self):
        if self.address != NULL:
            munmap(self.address, self.size)

    def __len__(self):
        return self.size

    def __getbuffer__(self, Py_buffer* view, int flags):
        view.buf = self.address
        view.obj = self
        view.len = self.size
        view.readonly = 0
        view.itemsize = 1
        view.format = NULL   # NULL: unsigned bytes, as "B"
        if flags & PyBUF_FORMAT:
            view.format = b"B"
        view.ndim = 1
        view.shape = NULL
        if flags & PyBUF_ND:
            view.shape = self.shape
        view.strides = NULL
        if (flags & PyBUF_STRIDES) == PyBUF_STRIDES:
            view.strides = self.strides
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer* view):
        pass


def forget_mapping(size_t address, size_t length):
    """Replace [address, address + length) of this process with fresh private
    anonymous memory: drops an inherited shared mapping (another pool's
    region) without leaving a hole that a stray access would fault on."""
    cdef void* result = mmap(<void*>address, length, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0)
    if result == MAP_FAILED:
        raise OSError("cannot replace an inherited mapping")


def send(size_t ctrl_address, int first, int count, int command):
    """Hand `command` to workers [first, first + count) without waiting."""
    shoal_send(<shoal_ctrl*>ctrl_address, first, count, command)


YIELD_S = SHOAL_YIELD_NS / 1e9  # default: yield this long before sleeping


# Shorter than this, a call keeps the GIL: the first part of a wait_done,
# and a block of envs whose last two calls were shorter (envs/vec_binding.pxi,
# envs/mujoco/binding.py read it from here).
HOLD_GIL_S = 100e-6


def wait_done(size_t ctrl_address, int first, int count, double timeout_s, double yield_s=YIELD_S):
    """Wait for workers [first, first + count); -1 when all are done, else the
    index of a worker still busy after timeout_s. yield_s: how long to yield
    the core before sleeping on a futex.

    The first HOLD_GIL_S of the wait keep the GIL (spinning, then yielding
    the core); then the wait releases it (and yields, then sleeps). A wait
    of microseconds (a small pool's step) that gave it up got it back from
    a busy Python thread only after that thread's switch interval (5 ms):
    CartPole with 8 envs stepped 600x slower beside one."""
    cdef shoal_ctrl* ctrl = <shoal_ctrl*>ctrl_address
    cdef int64_t timeout_ns = <int64_t>(timeout_s * 1e9)
    cdef int64_t yield_ns = <int64_t>(yield_s * 1e9)
    cdef int64_t began = 0
    cdef int busy = shoal_wait_done_briefly(ctrl, first, count, min(timeout_ns, <int64_t>(HOLD_GIL_S * 1e9)),
                                            &began)
    if busy < 0:   # (the usual case: no clock read)
        return busy
    cdef int64_t left = timeout_ns - (shoal_now_ns() - began)
    if left <= 0:
        return busy
    with nogil:
        busy = shoal_wait_done(ctrl, busy, first + count - busy, left, yield_ns)
    return busy


RANK_WORD_BYTES = 64


def ranks_meet(size_t words_address, int rank, int world, uint32_t generation, double timeout_s,
               bint arrive=True, double yield_s=YIELD_S):
    """Rank `rank` of `world` (one node, a shared region of RANK_WORD_BYTES
    per rank at words_address) arrives at `generation` (arrive=False: it
    already has, an earlier call timed out) and waits for the others: -1
    once all have arrived, else the first rank still missing after
    timeout_s (GIL released meanwhile). Its writes before arriving are
    visible to every rank after theirs returns -1."""
    cdef shoal_rank_word* words = <shoal_rank_word*>words_address
    cdef int64_t timeout_ns = <int64_t>(timeout_s * 1e9)
    cdef int64_t yield_ns = <int64_t>(yield_s * 1e9)
    cdef int missing
    with nogil:
        if arrive:
            shoal_rank_arrive(words, rank, generation)
        missing = shoal_ranks_wait(words, world, generation, timeout_ns, yield_ns)
    return missing


def serve(size_t ctrl_address, size_t ops_address):
    """Worker side: run commands for one block until CLOSE (GIL released)."""
    with nogil:
        shoal_worker_loop(<shoal_ctrl*>ctrl_address, <shoal_block_ops*>ops_address)


def next_request(size_t ctrl_address, uint32_t seen, double yield_s=YIELD_S):
    """Worker side (Python workers): wait for a request after `seen`;
    returns (request, command). GIL released while waiting."""
    cdef shoal_ctrl* ctrl = <shoal_ctrl*>ctrl_address
    cdef uint32_t request
    cdef int64_t yield_ns = <int64_t>(yield_s * 1e9)
    with nogil:
        request = shoal_next_request(ctrl, seen, yield_ns)
    return request, (<ctrl_words*>ctrl_address).command


def report_done(size_t ctrl_address, uint32_t request, uint32_t status):
    """Worker side (Python workers): mark `request` done with `status`."""
    shoal_report_done(<shoal_ctrl*>ctrl_address, request, status)


def worker_busy_ns(size_t ctrl_address, int count):
    """Parent side: each of `count` workers' time spent running commands
    since it started, in ns (uint64 array; read while they run)."""
    busy = np.empty(count, np.uint64)
    cdef int k
    for k in range(count):
        busy[k] = shoal_busy_ns(<shoal_ctrl*>(ctrl_address + <size_t>k * sizeof(ctrl_words)))
    return busy


def worker_status(size_t ctrl_address, int worker):
    """Parent side: the status a worker reported with its last done."""
    return (<ctrl_words*>(ctrl_address + <size_t>worker * sizeof(ctrl_words))).status


ctypedef fused any_int:
    int8_t
    int16_t
    int32_t
    int64_t
    uint8_t
    uint16_t
    uint32_t
    uint64_t


# Action copies check a chunk at a time with no branch inside the loop (the
# compiler vectorizes it: at 65,536 CartPole rows the parent's copy was the
# step's serial part, ~1.7 ns a row as a branch per value), then look for the
# first bad row only in a chunk that has one.
DEF CHECK_CHUNK = 4096


cdef inline Py_ssize_t first_bad_int_row(const any_int* src, Py_ssize_t start, Py_ssize_t stop,
                                          Py_ssize_t cols, const int32_t* nvec) noexcept nogil:
    """The row of the first value in [start, stop) outside [0, nvec[column])."""
    cdef Py_ssize_t k
    cdef int64_t value
    for k in range(start, stop):
        value = <int64_t>src[k]   # uint64 above 2**63 turns negative: rejected
        if value < 0 or value >= nvec[k % cols]:
            return k // cols
    return -1


cdef Py_ssize_t copy_int_rows(const any_int* src, int32_t* dst, Py_ssize_t rows, Py_ssize_t cols,
                              const int32_t* limits) noexcept nogil:
    """copy_actions' loop, CHECK_CHUNK rows at a time; the first bad row or -1."""
    cdef Py_ssize_t first, last, i, j, k
    cdef uint32_t top32 = 0
    cdef uint64_t top64 = 0
    for first in range(0, rows, CHECK_CHUNK):
        last = min(first + CHECK_CHUNK, rows)
        if cols == 1:   # Discrete: one flat, vectorized loop
            for k in range(first, last):
                if any_int is int64_t or any_int is uint64_t:
                    top64 |= <uint64_t>src[k] | (<uint64_t>limits[0] - 1 - <uint64_t>src[k])
                else:
                    top32 |= <uint32_t><int32_t>src[k] | (<uint32_t>limits[0] - 1 - <uint32_t><int32_t>src[k])
                dst[k] = <int32_t>src[k]
        else:           # MultiDiscrete: each column against its own limit
            for i in range(first, last):
                for j in range(cols):
                    k = i * cols + j
                    if any_int is int64_t or any_int is uint64_t:
                        top64 |= <uint64_t>src[k] | (<uint64_t>limits[j] - 1 - <uint64_t>src[k])
                    else:
                        top32 |= (<uint32_t><int32_t>src[k]
                                  | (<uint32_t>limits[j] - 1 - <uint32_t><int32_t>src[k]))
                    dst[k] = <int32_t>src[k]
        if (top64 >> 63) or (top32 >> 31):
            return first_bad_int_row(src, first * cols, last * cols, cols, limits)
    return -1


# Action copies of fewer values keep the GIL: they take microseconds, and
# giving it up would hand it to a busy Python thread for its switch interval.
cdef Py_ssize_t COPY_WITHOUT_GIL = 1 << 18


def copy_actions(const any_int[:, ::1] actions, int32_t[:, ::1] out, const int32_t[::1] nvec):
    """Copy (rows, len(nvec)) integer actions of any width into the pool's
    int32 action rows `out`, checking each against [0, nvec[j]) (before the
    cast, so huge values cannot wrap into range). Returns the index of the
    first bad row, else -1; after a bad row the contents of `out` are
    unspecified (the caller steps nothing, and the next call rewrites every
    row). One pass, no temporary: the gymnasium path's int64 actions cost
    what int32 ones do.

    The check is branch-free: v is in [0, n) exactly when neither v nor
    n - 1 - v has its top bit set, computed in unsigned arithmetic of 32
    bits (sources of up to 32 bits, sign-extended) or 64 bits; n < 2**31."""
    cdef Py_ssize_t rows = actions.shape[0], cols = actions.shape[1], bad_row
    if cols != nvec.shape[0] or out.shape[0] != rows or out.shape[1] != cols:
        raise ValueError(f"actions are {rows} x {cols}, expected {out.shape[0]} x {nvec.shape[0]}")
    if rows * cols == 0:
        return -1
    if rows * cols < COPY_WITHOUT_GIL:
        return copy_int_rows(&actions[0, 0], &out[0, 0], rows, cols, &nvec[0])
    with nogil:
        bad_row = copy_int_rows(&actions[0, 0], &out[0, 0], rows, cols, &nvec[0])
    return bad_row


ctypedef fused any_float:
    float
    double


cdef Py_ssize_t copy_float_rows(const any_float* src, float* dst, Py_ssize_t total,
                                Py_ssize_t cols) noexcept nogil:
    """copy_float_actions' loop over `total` values; the first bad row or -1."""
    cdef Py_ssize_t start, stop, k
    cdef const uint32_t* dst_bits = <const uint32_t*>dst   # the floats written, as bits (-fno-strict-aliasing)
    cdef uint32_t top
    for start in range(0, total, CHECK_CHUNK):
        stop = min(start + CHECK_CHUNK, total)
        for k in range(start, stop):
            dst[k] = <float>src[k]
        top = 0
        for k in range(start, stop):
            top |= (dst_bits[k] & 0x7f800000u) + 0x00800000u
        if top >> 31:
            for k in range(start, stop):
                if (dst_bits[k] & 0x7f800000u) == 0x7f800000u:
                    return k // cols
    return -1


def copy_float_actions(const any_float[:, ::1] actions, float[:, ::1] out):
    """Copy (rows, cols) float32/float64 Box actions into the pool's float32
    action rows `out`, checking that each is finite (NaN and infinities are
    refused: an env would turn them into garbage state; so is a finite
    double beyond float32, which becomes one). Returns the index of the
    first bad row, else -1; after a bad row the contents of `out` are
    unspecified (the caller steps nothing). Bounds are not checked:
    out-of-bounds values reach the env, which documents what it does with
    them (MuJoCo: clamped to ctrlrange).

    Branch-free as copy_actions: a float32 is not finite exactly when its
    exponent bits are all ones, and adding one exponent step to them then
    carries into the top bit."""
    cdef Py_ssize_t rows = actions.shape[0], cols = actions.shape[1]
    cdef Py_ssize_t total = rows * cols, bad_row
    if out.shape[0] != rows or out.shape[1] != cols:
        raise ValueError(f"actions are {rows} x {cols}, expected {out.shape[0]} x {out.shape[1]}")
    if total == 0:
        return -1
    if total < COPY_WITHOUT_GIL:
        return copy_float_rows(&actions[0, 0], &out[0, 0], total, cols)
    with nogil:
        bad_row = copy_float_rows(&actions[0, 0], &out[0, 0], total, cols)
    return bad_row


# ---- a pool's call lock ----------------------------------------------------------
cdef extern from "pythread.h":
    unsigned long PyThread_get_thread_ident()


cdef class CallLock:
    """Which thread is in a pool's call (owner; 0: none). Taken and dropped
    in C with the GIL held: no other thread runs meanwhile, and Python runs
    signal handlers only between bytecodes, never inside these methods, so
    a Ctrl-C or SIGTERM cannot split taking the lock from noting its owner.
    A handler can still interrupt just outside them: the lock then stays
    held by this thread with no call running, which the pool recognises
    (mine() and no call of its on the stack) and takes back. Cheaper than a
    threading.Lock, whose methods go through Python attribute lookups."""
    cdef public unsigned long owner

    def enter(self):
        """Take the lock for this thread if it is free; True if taken."""
        if self.owner != 0:
            return False
        self.owner = PyThread_get_thread_ident()
        return True

    def leave(self):
        """Release the lock if this thread holds it; True if released."""
        if self.owner != PyThread_get_thread_ident():
            return False
        self.owner = 0
        return True

    def mine(self):
        """Whether this thread holds the lock."""
        return self.owner == PyThread_get_thread_ident()
