# vec_binding.pxi — the Cython side of every env binding, included textually.
#
# An env's binding.pyx includes its header and shoal_vec.h (with
# SHOAL_VEC_ENV, the env's prefix, defined), declares the header's types
# under the generic names env_t, obs_t and act_t (with the fields it reads
# itself), and then includes this file, which declares the rest once for
# every env: the sizes, the spaces, the episode record and the vector loop,
# through generic C names that expand to the env's own. It exports the
# header's spec (AGENTS_PER_ENV, OBS_ELEMENTS, ACT_ELEMENTS, OBS_DTYPE,
# ACT_DTYPE, OBS_LOW, OBS_HIGH, ACT_NVEC, MAX_EPISODE_STEPS), from which
# shoal.envs.header_spec builds the env's EnvSpec. What is generated: `Block`,
# which steps a contiguous block of envs in place inside buffers it is
# handed, without the GIL and without any per-env Python object or per-step
# allocation.

from libc.stdint cimport uint8_t, uint64_t, int64_t
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

import numpy as np

cdef extern from *:
    """
    /* The env's vector loop and sizes under generic names (SHOAL_VEC_ENV is
     * still the prefix the binding included shoal_vec.h with). */
    #define SHOAL_BINDING_(name) SHOAL_CAT(SHOAL_VEC_ENV, name)
    #define SHOAL_BINDING_COUNT(table) (sizeof(table) / sizeof((table)[0]))
    enum {
        shoal_binding_agents = SHOAL_BINDING_(agents),
        shoal_binding_obs_size = SHOAL_BINDING_(obs_size),
        shoal_binding_act_size = SHOAL_BINDING_(act_size),
        shoal_binding_max_steps = SHOAL_BINDING_(max_steps),
        shoal_binding_obs_lows = SHOAL_BINDING_COUNT(SHOAL_BINDING_(obs_low)),
        shoal_binding_obs_highs = SHOAL_BINDING_COUNT(SHOAL_BINDING_(obs_high))
    };
    /* The spaces' tables have the sizes the header says (else: a negative
     * array size, named after the table, at compile time). */
    typedef char SHOAL_BINDING_(obs_low_needs_1_or_obs_size_entries)[
        shoal_binding_obs_lows == 1 || shoal_binding_obs_lows == shoal_binding_obs_size ? 1 : -1];
    typedef char SHOAL_BINDING_(obs_high_needs_1_or_obs_size_entries)[
        shoal_binding_obs_highs == 1 || shoal_binding_obs_highs == shoal_binding_obs_size ? 1 : -1];
    typedef char SHOAL_BINDING_(act_nvec_needs_act_size_entries)[
        SHOAL_BINDING_COUNT(SHOAL_BINDING_(act_nvec)) == shoal_binding_act_size ? 1 : -1];
    /* Table entries read in whatever type the header wrote them. */
    static double shoal_binding_obs_low(int k) { return (double)SHOAL_BINDING_(obs_low)[k]; }
    static double shoal_binding_obs_high(int k) { return (double)SHOAL_BINDING_(obs_high)[k]; }
    static long long shoal_binding_act_nvec(int k) { return (long long)SHOAL_BINDING_(act_nvec)[k]; }
    /* setup.py stamps the header's digest (shoal.envs.header_digest); a
     * build without it (an out-of-tree setup) exports "" and is not checked. */
    #ifndef SHOAL_HEADER_DIGEST
    #define SHOAL_HEADER_DIGEST ""
    #endif
    static const char *shoal_binding_header_digest = SHOAL_HEADER_DIGEST;
    #define shoal_binding_vec_reset SHOAL_BINDING_(vec_reset)
    #define shoal_binding_vec_step SHOAL_BINDING_(vec_step)
    #define shoal_binding_vec_step_selected SHOAL_BINDING_(vec_step_selected)
    """
    enum:
        AGENTS "shoal_binding_agents"
        OBS_SIZE "shoal_binding_obs_size"
        ACT_SIZE "shoal_binding_act_size"
        _MAX_STEPS "shoal_binding_max_steps"
        _OBS_LOWS "shoal_binding_obs_lows"
        _OBS_HIGHS "shoal_binding_obs_highs"
    double _obs_low "shoal_binding_obs_low"(int k)
    double _obs_high "shoal_binding_obs_high"(int k)
    long long _act_nvec "shoal_binding_act_nvec"(int k)
    const char *_header_digest "shoal_binding_header_digest"
    ctypedef struct shoal_episode:
        pass
    void vec_reset "shoal_binding_vec_reset"(env_t* envs, shoal_episode* eps, int64_t n,
        const uint8_t* requests, const uint64_t* seeds, obs_t* obs, float* rew,
        uint8_t* term, uint8_t* trunc, uint8_t* mask) noexcept nogil
    void vec_step "shoal_binding_vec_step"(env_t* envs, shoal_episode* eps, int64_t n,
        const act_t* act, obs_t* obs, float* rew, uint8_t* term, uint8_t* trunc,
        uint8_t* mask, obs_t* final_obs, int mode) noexcept nogil
    void vec_step_selected "shoal_binding_vec_step_selected"(env_t* envs, shoal_episode* eps,
        int64_t n, const uint8_t* selected, const act_t* act, obs_t* obs, float* rew,
        uint8_t* term, uint8_t* trunc, uint8_t* mask, obs_t* final_obs, int mode) noexcept nogil

cdef extern from "shoal_block.h":
    ctypedef struct shoal_block_ops:
        void (*run)(void* ctx, int command) noexcept nogil
        void* ctx
    enum:
        SHOAL_CMD_STEP
        SHOAL_CMD_RESET
        SHOAL_CMD_STEP_SELECTED

ENV_BYTES = sizeof(env_t)
AGENTS_PER_ENV = AGENTS
OBS_ELEMENTS = OBS_SIZE
ACT_ELEMENTS = ACT_SIZE

# The numpy dtypes of the header's obs_t / act_t, told apart by what a cast
# keeps (a fraction: float; -1: signed), so the pool can allocate and check
# buffers of the C element types without each binding spelling them out.
cdef obs_t _obs_half = <obs_t>0.5
cdef obs_t _obs_minus_one = <obs_t>-1
cdef act_t _act_half = <act_t>0.5
cdef act_t _act_minus_one = <act_t>-1
OBS_DTYPE = np.dtype(("f" if _obs_half != 0 else "i" if _obs_minus_one < 0 else "u") + str(sizeof(obs_t)))
ACT_DTYPE = np.dtype(("f" if _act_half != 0 else "i" if _act_minus_one < 0 else "u") + str(sizeof(act_t)))


def _obs_bound(values):
    # One entry: a scalar (every element); else a read-only array per element.
    array = np.array(values, dtype=OBS_DTYPE)
    if array.size == 1:
        return array[0].item()
    array.flags.writeable = False
    return array


# The header's spaces and step limit (P_obs_low, P_obs_high, P_act_nvec,
# P_max_steps; 0: no limit).
OBS_LOW = _obs_bound([_obs_low(k) for k in range(_OBS_LOWS)])
OBS_HIGH = _obs_bound([_obs_high(k) for k in range(_OBS_HIGHS)])
ACT_NVEC = tuple(int(_act_nvec(k)) for k in range(ACT_SIZE))
HEADER_DIGEST = _header_digest.decode()   # of the header this was built from ("": not stamped)
MAX_EPISODE_STEPS = _MAX_STEPS if _MAX_STEPS > 0 else None


cdef size_t _address(object array, object dtype, Py_ssize_t count) except 0:
    """Base address of a C-contiguous numpy array holding `count` items of dtype."""
    if not isinstance(array, np.ndarray):
        raise TypeError(f"expected a numpy array, got {type(array).__name__}")
    if array.dtype != np.dtype(dtype) or not array.flags.c_contiguous:
        raise ValueError(f"expected a C-contiguous {np.dtype(dtype)} array, got "
                         f"{array.dtype} (contiguous={array.flags.c_contiguous})")
    if array.size < count:
        raise ValueError(f"buffer holds {array.size} items, {count} needed")
    return <size_t>array.__array_interface__["data"][0]


cdef struct BlockView:
    # Where one block's rows live; everything the nogil loop touches.
    env_t* envs
    shoal_episode* episodes
    const uint8_t* requests
    const uint8_t* selected
    const uint64_t* seeds
    const act_t* actions
    obs_t* obs
    obs_t* final_obs
    float* rewards
    uint8_t* terminals
    uint8_t* truncations
    uint8_t* masks
    int64_t count
    int mode


cdef void _run_block(void* ctx, int command) noexcept nogil:
    cdef BlockView* b = <BlockView*>ctx
    if command == SHOAL_CMD_STEP:
        vec_step(b.envs, b.episodes, b.count, b.actions, b.obs, b.rewards,
                 b.terminals, b.truncations, b.masks, b.final_obs, b.mode)
    elif command == SHOAL_CMD_RESET:
        vec_reset(b.envs, b.episodes, b.count, b.requests, b.seeds, b.obs,
                  b.rewards, b.terminals, b.truncations, b.masks)
    elif command == SHOAL_CMD_STEP_SELECTED:
        vec_step_selected(b.envs, b.episodes, b.count, b.selected, b.actions, b.obs, b.rewards,
                          b.terminals, b.truncations, b.masks, b.final_obs, b.mode)


# A block whose last two calls took less than this keeps the GIL
# (Block._run); the pool's rule, pool/_native.pyx.
from shoal.pool._native import HOLD_GIL_S as _HOLD_GIL_S
cdef int64_t HOLD_GIL_NS = <int64_t>(_HOLD_GIL_S * 1e9)


cdef inline int64_t _now_ns() noexcept nogil:
    cdef timespec t
    clock_gettime(CLOCK_MONOTONIC, &t)
    return <int64_t>t.tv_sec * 1000000000 + t.tv_nsec


cdef class Block:
    """Envs [start, stop) of a pool, stepped in place in the pool's buffers.

    `buffers` is a `shoal.pool.layout.Buffers` (or anything with the same
    arrays): rows of env i are rows i*AGENTS .. (i+1)*AGENTS-1 of every row
    buffer. `mode` is the autoreset mode (0 NEXT_STEP, 1 SAME_STEP,
    2 DISABLED); `keep_final_obs` makes SAME_STEP copy the last obs of each
    finished episode into `buffers.final_obs`.
    """
    cdef BlockView view
    cdef shoal_block_ops ops
    cdef object buffers  # keeps the memory alive while we hold its pointers
    cdef int64_t last_call_ns, call_before_ns  # how long the last two steps / resets took

    def __init__(self, buffers, Py_ssize_t start, Py_ssize_t stop, int mode,
                 bint keep_final_obs=False):
        cdef Py_ssize_t n, rows, row0
        n = buffers.num_envs
        if not 0 <= start < stop <= n:
            raise ValueError(f"block [{start}, {stop}) is not inside [0, {n})")
        if mode not in (0, 1, 2):
            raise ValueError(f"autoreset mode must be 0, 1 or 2, got {mode}")
        self.buffers = buffers
        self.view.count = stop - start
        self.view.mode = mode
        rows = n * AGENTS
        row0 = start * AGENTS
        self.view.envs = (<env_t*>_address(buffers.env_states, np.uint8, n * sizeof(env_t))) + start
        self.view.episodes = (<shoal_episode*>_address(buffers.episodes, buffers.episodes.dtype, n)) + start
        self.view.requests = (<uint8_t*>_address(buffers.reset_requests, np.uint8, n)) + start
        self.view.selected = (<uint8_t*>_address(buffers.step_selected, np.uint8, n)) + start
        self.view.seeds = (<uint64_t*>_address(buffers.seeds, np.uint64, n)) + start
        self.view.actions = (<act_t*>_address(buffers.actions, ACT_DTYPE, rows * ACT_SIZE)) + row0 * ACT_SIZE
        self.view.obs = (<obs_t*>_address(buffers.obs, OBS_DTYPE, rows * OBS_SIZE)) + row0 * OBS_SIZE
        self.view.rewards = (<float*>_address(buffers.rewards, np.float32, rows)) + row0
        self.view.terminals = (<uint8_t*>_address(buffers.terminals, np.bool_, rows)) + row0
        self.view.truncations = (<uint8_t*>_address(buffers.truncations, np.bool_, rows)) + row0
        self.view.masks = (<uint8_t*>_address(buffers.masks, np.bool_, rows)) + row0
        self.view.final_obs = NULL
        if keep_final_obs:
            self.view.final_obs = (<obs_t*>_address(buffers.final_obs, OBS_DTYPE, rows * OBS_SIZE)) + row0 * OBS_SIZE
        self.ops.run = _run_block
        self.ops.ctx = <void*>&self.view

    cdef void _run(self, int command):
        """`command` over the block, without the GIL only if the last two
        calls took HOLD_GIL_NS or more (two: one call the OS preempted is not
        a long block). A call of microseconds gains no other thread anything
        by releasing it, and getting it back from a busy Python thread waits
        out that thread's switch interval (5 ms): Serial CartPole with 8
        envs stepped 60x slower beside one such thread."""
        cdef int64_t began, took
        if min(self.last_call_ns, self.call_before_ns) < HOLD_GIL_NS:
            began = _now_ns()
            _run_block(&self.view, command)
            took = _now_ns() - began
        else:
            with nogil:   # (timed before the GIL is taken back, which can wait)
                began = _now_ns()
                _run_block(&self.view, command)
                took = _now_ns() - began
        self.call_before_ns, self.last_call_ns = self.last_call_ns, took

    def step(self):
        """Step every env of the block once (actions read from the buffer)."""
        self._run(SHOAL_CMD_STEP)

    def reset(self):
        """Reset the envs whose reset_requests entry is RESET or RESEED."""
        self._run(SHOAL_CMD_RESET)

    def step_selected(self):
        """Step the envs whose step_selected entry is nonzero; the others stay as they are."""
        self._run(SHOAL_CMD_STEP_SELECTED)

    def run_steps(self, act_t[:, ::1] action_table, Py_ssize_t steps, Py_ssize_t first_row=0):
        """The plain C loop, for benchmarks: `steps` steps of the block in one
        nogil call, step t reading its actions from row (first_row + t) %
        len(action_table) (a caller chaining calls passes where it stopped)."""
        cdef Py_ssize_t t, k = action_table.shape[0]
        cdef BlockView view = self.view
        if action_table.shape[1] != view.count * AGENTS * ACT_SIZE:
            raise ValueError(f"action_table rows need {view.count * AGENTS * ACT_SIZE} actions")
        with nogil:
            for t in range(steps):
                view.actions = &action_table[(first_row + t) % k, 0]
                _run_block(&view, SHOAL_CMD_STEP)

    @property
    def ops_address(self):
        """Address of this block's C ops table, for the worker loop."""
        return <size_t>&self.ops
