# cython: language_level=3
"""The binding of shoal's Atari envs (see envs/atari/__init__.py for what an
env is): the pool's Block over ale-py's emulator.

ale-py ships the emulator as a Python extension and no C headers, so the
emulator is driven through its Python ALEInterface, from inside the block:

- The C part (below) is an env under the prefix `atari` for shoal_vec.h:
  `atari_env` (the worker's handle on one env: its slot in shared memory,
  its AtariGame, sizes) and atari_seed / atari_reset / atari_step, which
  call through three function pointers. The vector loop, autoreset and
  episode bookkeeping are shoal_vec.h's, as for every env.
- The function pointers are set to `noexcept with gil` functions of this
  module, which run one AtariGame (ALE calls, max-pool, resize, frame
  stack) and write the env's obs row. A worker releases the GIL while it
  serves the block; each env call takes it back (uncontended there).
- Shared memory (the pool's env_states) holds `atari_state`, pointer-free:
  the last step's lives and frame numbers (gymnasium's step info). The
  emulators, frame buffers, frame stacks and no-op RNGs live in the
  worker's AtariGames (the obs row is only written: a caller may change it).

An exception inside an env call is kept, the block's remaining env calls are
skipped, and then: Block.step() / reset() / run_steps() raise it (the Serial
pool and SingleEnv); a worker prints it to stderr and exits, which its pool
reports as a dead worker (WorkerError) and closes.
"""

cimport cython
from cpython.mem cimport PyMem_Calloc, PyMem_Free
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy
from posix.unistd cimport _exit

import sys
import traceback

import numpy as np
from gymnasium.utils import seeding

from shoal.envs import EnvSpec, SpecMismatchError, check_spec_against_binding
from shoal.envs.atari import INSTALL_HINT, ROM_IDS

cdef extern from *:
    """
    #include <stdint.h>
    #include "shoal_env.h"
    #include "shoal_block.h"

    /* One env's part of the pool's shared memory (env_states): its info
     * after the last step or reset (gymnasium's keys, then EnvPool's
     * unclipped reward, game-over flag and step count), and (final) as it was when the
     * last reset began: a SAME_STEP autoreset's ended step. Mirrored by
     * STATE_DTYPE. */
    typedef struct {
        int32_t lives;
        int32_t episode_frame_number;
        int64_t frame_number;
        float reward;           /* the step's reward before reward_clip */
        int32_t terminated;     /* the game is over (not a life lost) */
        int32_t elapsed_step;   /* steps since the game (not the life) began */
        int32_t pad_;
        uint8_t ram[128];       /* the console's RAM after the step: EnvPool's info["ram"] */
    } atari_info;
    typedef struct {
        atari_info now;
        atari_info final;
    } atari_state;

    /* One env as its worker holds it. */
    typedef struct {
        atari_state* state;     /* its slot in the pool's env_states */
        void* game;             /* its AtariGame (borrowed: the Block owns it) */
        int* failed;            /* the block's flag: an env call raised */
        int obs_size, act_size;
        int new_game;           /* the next reset is the pool user's in a pool with
                                   autoreset: it starts a new game (EnvPool's) */
    } atari_env;

    typedef uint8_t atari_obs_t;
    typedef int32_t atari_act_t;
    enum { atari_agents = 1 };

    /* Set by the Cython module to its implementations (which take the GIL). */
    typedef void (*atari_seed_fn)(atari_env*, uint64_t);
    typedef void (*atari_reset_fn)(atari_env*, uint8_t*);
    typedef int (*atari_step_fn)(atari_env*, const int32_t*, uint8_t*, float*, uint8_t*, uint8_t*);
    static atari_seed_fn atari_seed_impl;
    static atari_reset_fn atari_reset_impl;
    static atari_step_fn atari_step_impl;

    /* The three functions shoal_vec.h asks of an env. Once an env call of the
     * block has raised, the others do nothing (the block is failing). */
    static inline void atari_seed(atari_env* env, uint64_t seed) {
        if (!*env->failed) atari_seed_impl(env, seed);
    }

    static inline void atari_reset(atari_env* env, uint8_t* obs, uint8_t* mask) {
        mask[0] = 1;
        if (!*env->failed) atari_reset_impl(env, obs);
    }

    static inline int atari_step(atari_env* env, const int32_t* act, uint8_t* obs, float* rew,
                                 uint8_t* term, uint8_t* trunc, uint8_t* mask) {
        rew[0] = 0.0f;
        term[0] = 0;
        trunc[0] = 0;
        mask[0] = 1;
        if (*env->failed) return 0;
        return atari_step_impl(env, act, obs, rew, term, trunc);
    }

    /* Row sizes are the configured ones (stack, image size, colour). */
    #define SHOAL_VEC_OBS_SIZE(env) ((env)->obs_size)
    #define SHOAL_VEC_ACT_SIZE(env) ((env)->act_size)
    #define SHOAL_VEC_ENV atari
    #include "shoal_vec.h"
    """
    ctypedef struct atari_info:
        int32_t lives
        int32_t episode_frame_number
        int64_t frame_number
        float reward
        int32_t terminated
        int32_t elapsed_step
        uint8_t ram[128]
    ctypedef struct atari_state:
        atari_info now
        atari_info final
    ctypedef struct atari_env:
        atari_state* state
        void* game
        int* failed
        int obs_size
        int act_size
        int new_game
    ctypedef struct shoal_episode:
        pass
    enum:
        SHOAL_KEEP          # shoal_vec.h's reset request "leave this env"
        SHOAL_DISABLED      # and autoreset mode "none"
    ctypedef void (*atari_seed_fn)(atari_env*, uint64_t) noexcept nogil
    ctypedef void (*atari_reset_fn)(atari_env*, uint8_t*) noexcept nogil
    ctypedef int (*atari_step_fn)(atari_env*, const int32_t*, uint8_t*, float*, uint8_t*,
                                  uint8_t*) noexcept nogil
    atari_seed_fn atari_seed_impl
    atari_reset_fn atari_reset_impl
    atari_step_fn atari_step_impl
    void atari_vec_reset(atari_env* envs, shoal_episode* eps, int64_t n, const uint8_t* requests,
                         const uint64_t* seeds, uint8_t* obs, float* rew, uint8_t* term,
                         uint8_t* trunc, uint8_t* mask) noexcept nogil
    void atari_vec_step(atari_env* envs, shoal_episode* eps, int64_t n, const int32_t* act,
                        uint8_t* obs, float* rew, uint8_t* term, uint8_t* trunc, uint8_t* mask,
                        uint8_t* final_obs, int mode) noexcept nogil
    void atari_vec_step_selected(atari_env* envs, shoal_episode* eps, int64_t n,
                                 const uint8_t* selected, const int32_t* act, uint8_t* obs,
                                 float* rew, uint8_t* term, uint8_t* trunc, uint8_t* mask,
                                 uint8_t* final_obs, int mode) noexcept nogil

cdef extern from "shoal_block.h":
    ctypedef struct shoal_block_ops:
        void (*run)(void* ctx, int command) noexcept nogil
        void* ctx
    enum:
        SHOAL_CMD_STEP
        SHOAL_CMD_RESET
        SHOAL_CMD_STEP_SELECTED

# Mirrors `atari_state`: one env's slot of env_states.
INFO_DTYPE = np.dtype([("lives", np.int32), ("episode_frame_number", np.int32),
                       ("frame_number", np.int64), ("reward", np.float32), ("terminated", np.int32),
                       ("elapsed_step", np.int32), ("pad_", np.int32), ("ram", np.uint8, (128,))])
STATE_DTYPE = np.dtype([("now", INFO_DTYPE), ("final", INFO_DTYPE)])
assert STATE_DTYPE.itemsize == sizeof(atari_state)


def _ale_py():
    """ale_py, or ImportError naming the extra."""
    try:
        import ale_py
    except ImportError as e:
        raise ImportError(f"shoal's Atari envs need ale-py: {INSTALL_HINT}") from e
    return ale_py


def _new_emulator(ale_py, kwargs: dict):
    """An ALEInterface set up as gymnasium's AtariEnv sets its own; the ROM is
    loaded when the env is seeded (loading applies the seed)."""
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setFloat("repeat_action_probability", kwargs["repeat_action_probability"])
    ale.setInt("max_num_frames_per_episode", kwargs["max_num_frames_per_episode"])
    return ale


# ---- the resize: OpenCV's INTER_AREA, float for float ----------------------------
# cv2.resize(INTER_AREA) for a non-integer downscale (210x160 -> 84x84) costs
# ~66 us a frame, a fifth of a Pong step's emulation, in a general loop that
# rebuilds its tables every call. area_resize.h runs the same algorithm
# (OpenCV's computeResizeAreaTab + ResizeArea_Invoker for uint8: float
# weights, float row sums, cvRound) on tables built here once per env:
# identical bytes (tests/test_atari.py compares it with cv2.resize).

cdef extern from "atari/area_resize.h":
    ctypedef struct area_plan:
        int width
        int x_slots
        const int32_t* x_src
        const float* x_weight
        int y_taps
        const int32_t* y_dst
        const int32_t* y_src
        const float* y_weight
        int src_width
        float* pixels
        float* row
        float* sum
    void area_resize_c "area_resize"(const area_plan* plan, const uint8_t* src, int64_t src_stride,
                                     uint8_t* dst) noexcept nogil


def area_taps(int src_size, int dst_size):
    """OpenCV's computeResizeAreaTab along one axis: per destination pixel,
    the source pixels it covers and their float32 weights, as (dst index,
    src index, weight) arrays in OpenCV's order."""
    import math
    scale = src_size / dst_size
    di, si, alpha = [], [], []
    for dx in range(dst_size):
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = min(scale, src_size - fsx1)
        sx1, sx2 = math.ceil(fsx1), math.floor(fsx2)
        sx2 = min(sx2, src_size - 1)
        sx1 = min(sx1, sx2)
        if sx1 - fsx1 > 1e-3:
            di.append(dx); si.append(sx1 - 1); alpha.append((sx1 - fsx1) / cell)
        for sx in range(sx1, sx2):
            di.append(dx); si.append(sx); alpha.append(1.0 / cell)
        if fsx2 - sx2 > 1e-3:
            di.append(dx); si.append(sx2); alpha.append(min(min(fsx2 - sx2, 1.0), cell) / cell)
    return np.asarray(di, np.int32), np.asarray(si, np.int32), np.asarray(alpha, np.float64).astype(np.float32)


cdef class AreaResize:
    """One INTER_AREA resize, (src_h, src_w[, channels]) -> (dst_h, dst_w[,
    channels]) uint8, its tables built once (area_plan in area_resize.h).

    Where both scales are whole numbers (210x160 -> 105x80) OpenCV takes
    another path (block means, with SIMD rounding of its own), and where
    either side grows it interpolates linearly: those sizes are resized by
    cv2 itself (`by_opencv`), and need OpenCV installed."""

    cdef area_plan plan
    cdef bint copy_only                     # the screen's own size: rows copied, no taps
    cdef int rows
    cdef readonly object by_opencv          # cv2, for whole-number scales and enlargements; else None
    # the arrays the plan points into
    cdef readonly object x_src, x_weight, y_dst, y_src, y_weight, pixels, row, sum
    cdef readonly tuple src_shape, dst_shape

    def __init__(self, int src_h, int src_w, int dst_h, int dst_w, int channels=1):
        if channels not in (1, 3) or min(src_h, src_w, dst_h, dst_w) < 1:
            raise ValueError(f"expected positive sizes and 1 or 3 channels, got "
                             f"{(src_h, src_w)} -> {(dst_h, dst_w)} x {channels}")
        colour = () if channels == 1 else (channels,)
        self.src_shape = (src_h, src_w) + colour
        self.dst_shape = (dst_h, dst_w) + colour
        self.by_opencv = None
        same_size = (src_h, src_w) == (dst_h, dst_w)   # a copy (which the taps below also give, slower)
        self.copy_only, self.rows = same_size, dst_h
        if (src_h % dst_h == 0 and src_w % dst_w == 0 and not same_size) or dst_h > src_h or dst_w > src_w:
            try:
                import cv2
            except ImportError as e:
                raise ImportError(
                    f"an Atari image of {dst_h}x{dst_w} from the {src_h}x{src_w} screen is resized by another "
                    f"rule of OpenCV's INTER_AREA (a whole-number scale, or an enlargement), which shoal "
                    f"leaves to OpenCV: pip install opencv-python-headless, or choose a smaller size that "
                    f"does not divide the screen (84x84 does not)"
                ) from e
            self.by_opencv = cv2
        di, si, alpha = area_taps(src_w, dst_w)
        # slot s of destination pixel dx: its s-th tap (OpenCV's order), or weight 0
        counts = np.bincount(di, minlength=dst_w)
        slots = int(counts.max())
        first = np.concatenate([[0], np.cumsum(counts)[:-1]])
        x_src = np.zeros((slots, dst_w), np.int32)
        x_weight = np.zeros((slots, dst_w), np.float32)
        for s in range(slots):
            has = counts > s
            x_src[s, has] = si[first[has] + s]
            x_weight[s, has] = alpha[first[has] + s]
            x_src[s, ~has] = x_src[s - 1, ~has] if s else 0   # any pixel in the row: weight 0
        # per channel: element dx * channels + c reads source element sx * channels + c
        self.x_src = np.ascontiguousarray(
            (x_src[:, :, None] * channels + np.arange(channels, dtype=np.int32)).reshape(slots, -1))
        self.x_weight = np.ascontiguousarray(np.repeat(x_weight, channels, axis=1))
        self.y_dst, self.y_src, self.y_weight = area_taps(src_h, dst_h)
        width = dst_w * channels
        self.pixels = np.zeros(src_w * channels, np.float32)
        self.row = np.zeros(width, np.float32)
        self.sum = np.zeros(width, np.float32)
        cdef int32_t[:, ::1] xs = self.x_src
        cdef float[:, ::1] xw = self.x_weight
        cdef int32_t[::1] yd = self.y_dst, ys = self.y_src
        cdef float[::1] yw = self.y_weight, pixels = self.pixels, row = self.row, total = self.sum
        self.plan.width = width
        self.plan.x_slots = slots
        self.plan.x_src = &xs[0, 0]
        self.plan.x_weight = &xw[0, 0]
        self.plan.y_taps = yd.shape[0]
        self.plan.y_dst = &yd[0]
        self.plan.y_src = &ys[0]
        self.plan.y_weight = &yw[0]
        self.plan.src_width = pixels.shape[0]
        self.plan.pixels = &pixels[0]
        self.plan.row = &row[0]
        self.plan.sum = &total[0]

    cdef void run(self, const uint8_t* src, Py_ssize_t src_stride, uint8_t* dst) noexcept nogil:
        cdef Py_ssize_t y
        if self.copy_only:
            for y in range(self.rows):
                memcpy(dst + y * self.plan.width, src + y * src_stride, self.plan.width)
            return
        area_resize_c(&self.plan, src, src_stride, dst)

    def __call__(self, screen, out=None):
        """screen (src_shape, uint8) resized into out (dst_shape; a new array
        if None); returns out."""
        screen = np.ascontiguousarray(screen, dtype=np.uint8)
        if screen.shape != self.src_shape:
            raise ValueError(f"expected a screen of shape {self.src_shape}, got {screen.shape}")
        if out is None:
            out = np.empty(self.dst_shape, np.uint8)
        elif out.shape != self.dst_shape or out.dtype != np.uint8 or not out.flags.c_contiguous:
            raise ValueError(f"out must be a C-contiguous uint8 array of shape {self.dst_shape}")
        if self.by_opencv is not None:
            cv2 = self.by_opencv
            out[...] = cv2.resize(screen, self.dst_shape[1::-1], interpolation=cv2.INTER_AREA)
            return out
        cdef const uint8_t[:, ::1] src = screen.reshape(screen.shape[0], -1)
        cdef uint8_t[:, ::1] dst = out.reshape(out.shape[0], -1)
        self.run(&src[0, 0], src.shape[1], &dst[0, 0])
        return out


def resize_area(screen, int height, int width):
    """A uint8 screen (H, W) or (H, W, 3) resized to (height, width): what
    cv2.resize(screen, (width, height), interpolation=cv2.INTER_AREA)
    returns, for the tests."""
    screen = np.asarray(screen)
    channels = 1 if screen.ndim == 2 else screen.shape[2]
    return AreaResize(screen.shape[0], screen.shape[1], height, width, channels)(screen)


# ---- one env -------------------------------------------------------------------

cdef inline void max_in_place(uint8_t* a, const uint8_t* b, Py_ssize_t n) noexcept nogil:
    """a = max(a, b), byte by byte: np.maximum's result, in a loop the
    compiler vectorises, without the ufunc's call (and its giving up the
    GIL for arrays this size, which a busy Python thread then kept for its
    switch interval)."""
    cdef Py_ssize_t i
    for i in range(n):
        if b[i] > a[i]:
            a[i] = b[i]


cdef class AtariGame:
    """One env as its worker holds it: the emulator, the two frames of the
    max-pool, the no-op RNG, and views of the obs row it writes."""

    cdef readonly object ale
    cdef readonly int index                 # the env's index in its pool
    cdef public object error                # what an env call raised, if one did
    # the emulator's methods, looked up once
    cdef object act, game_over, game_truncated, lives_of, grab, reset_game
    cdef object episode_frame_number, frame_number
    cdef object get_ram, ram                # ale.getRAM, and the array it fills
    cdef uint8_t* ram_address
    cdef object action_set, noop, fire, rom_path
    cdef object np_random
    cdef object mode, difficulty            # None: the ROM's default
    cdef object frames                      # [latest frame, the one before]: the max-pool pair
    cdef uint8_t* latest_frame              # their bytes (the arrays stay put)
    cdef uint8_t* older_frame
    cdef Py_ssize_t screen_bytes
    cdef AreaResize resize                  # the screen -> obs frame resize
    # The frame stack, kept here and copied whole to the obs row each step:
    # the caller may write into the rows it is given (EnvPool hands out
    # fresh arrays) without changing what the env returns next.
    cdef object stack                       # (stack_num, frame...) uint8, a ring of frames
    cdef list stack_frames                  # stack[k] as numpy views, for the resize's out=
    cdef uint8_t* stack_address
    cdef int stack_next                     # the ring slot the next frame goes to
    cdef bint planar                        # RGB rows as (3 * stack, H, W): channels_first
    cdef Py_ssize_t frame_bytes, row_bytes
    cdef int stack_num, frameskip, noop_max, num_actions, lives
    cdef int max_steps, elapsed_steps       # the step limit (0: none) and the steps since the
                                            # game began (with episodic_life, over its lives)
    cdef bint fire_start, life_loss_ends, continue_after_life_loss, reward_clip
    cdef bint seeded, life_lost

    def __init__(self, binding, int index):
        ale_py = _ale_py()
        kwargs = binding.spec.env_kwargs
        self.index = index
        self.error = None
        self.ale = ale = _new_emulator(ale_py, kwargs)
        self.act, self.game_over, self.game_truncated = ale.act, ale.game_over, ale.game_truncated
        self.lives_of, self.reset_game = ale.lives, ale.reset_game
        self.episode_frame_number, self.frame_number = ale.getEpisodeFrameNumber, ale.getFrameNumber
        self.get_ram, self.ram = ale.getRAM, np.zeros(128, np.uint8)
        cdef uint8_t[::1] ram_bytes = self.ram
        self.ram_address = &ram_bytes[0]
        self.grab = ale.getScreenGrayscale if kwargs["gray_scale"] else ale.getScreenRGB
        self.rom_path = binding.rom_path
        self.action_set = list(binding.action_set)
        self.num_actions = len(self.action_set)
        self.noop = self.action_set[0]      # NOOP leads every ALE action set
        self.fire = ale_py.Action.FIRE
        self.fire_start = binding.fire_start
        self.frames = [np.zeros(binding.screen_shape, np.uint8), np.zeros(binding.screen_shape, np.uint8)]
        cdef uint8_t[::1] latest_bytes = self.frames[0].reshape(-1), older_bytes = self.frames[1].reshape(-1)
        self.latest_frame, self.older_frame = &latest_bytes[0], &older_bytes[0]
        self.screen_bytes = latest_bytes.shape[0]
        self.resize = AreaResize(binding.screen_shape[0], binding.screen_shape[1], kwargs["img_height"],
                                 kwargs["img_width"], 1 if kwargs["gray_scale"] else 3)
        self.stack_num = kwargs["stack_num"]
        self.row_bytes = binding.OBS_ELEMENTS
        self.frame_bytes = self.row_bytes // self.stack_num
        # the ring keeps frames as the resize gives them, (H, W) or (H, W, 3);
        # channels_first rows take each RGB frame as three planes (write_stack)
        self.planar = kwargs["channels_first"] and not kwargs["gray_scale"]
        self.stack = np.zeros((self.stack_num, kwargs["img_height"], kwargs["img_width"])
                              + (() if kwargs["gray_scale"] else (3,)), np.uint8)
        self.stack_frames = [self.stack[k] for k in range(self.stack_num)]
        cdef uint8_t[::1] stack_bytes = self.stack.reshape(-1)
        self.stack_address = &stack_bytes[0]
        self.stack_next = 0
        self.frameskip = kwargs["frameskip"]
        self.noop_max = kwargs["noop_max"]
        self.life_loss_ends = kwargs["episodic_life"] or kwargs["terminal_on_life_loss"]
        self.continue_after_life_loss = kwargs["episodic_life"]
        self.reward_clip = kwargs["reward_clip"]
        self.mode, self.difficulty = kwargs["mode"], kwargs["difficulty"]
        self.max_steps = kwargs["max_episode_steps"] or 0
        self.elapsed_steps = 0
        self.seeded = False
        self.life_lost = False

    cdef int seed(self, seed) except -1:
        """gymnasium's AtariEnv.seed_game + load_game: one seed gives the
        no-op RNG's and the emulator's (applied by reloading the ROM)."""
        np_seed, ale_seed = np.random.SeedSequence(seed).generate_state(n_words=2)
        self.np_random, _ = seeding.np_random(int(np_seed))
        self.ale.setInt("random_seed", np.int32(ale_seed))
        self.ale.loadROM(self.rom_path)
        if self.mode is not None:          # set after each load, as gymnasium's load_game
            self.ale.setMode(self.mode)
        if self.difficulty is not None:
            self.ale.setDifficulty(self.difficulty)
        self.seeded = True
        self.life_lost = False
        return 0

    cdef int new_game(self) except -1:
        self.reset_game()
        self.elapsed_steps = 0
        return 0

    cdef int reset(self, atari_env* env, uint8_t* obs) except -1:
        cdef int k
        cdef bint go_on, restarted
        # The info before this reset: in SAME_STEP, the ended step's (final_info).
        env.state.final = env.state.now
        if not self.seeded:          # reset before any seed: seed from entropy
            self.seed(None)
        # episodic_life (EnvPool's Reset): after a lost life, with the game
        # neither over nor at its step limit, the game goes on, and so do its
        # step count and frame stack.
        go_on = (self.continue_after_life_loss and self.life_lost and not self.game_over(True)
                 and not (self.max_steps and self.elapsed_steps >= self.max_steps)
                 and not env.new_game)
        self.life_lost = False
        env.new_game = 0
        restarted = not go_on
        if restarted:
            self.new_game()
        noops = int(self.np_random.integers(1, int(self.noop_max) + 1)) if self.noop_max > 0 else 0   # (a C int + 1 wraps at 2**31 - 1)
        if self.fire_start:          # EnvPool's fire start: the last start frame fires
            noops = max(noops - 1, 0)
        for start_action in [self.noop] * noops + ([self.fire] if self.fire_start else []):
            self.act(start_action)
            if self.game_over(True):   # (EnvPool's step count goes on here; a new game's is 0)
                self.new_game()
                restarted = True
        self.lives = self.lives_of()
        self.grab(self.frames[0])
        self.frames[1].fill(0)       # as AtariPreprocessing: the pair's older frame is blank
        if restarted:
            self.stack_next = 0
            self.push_frame(False)                # the frame, in ring slot 0
            for k in range(1, self.stack_num):    # the stack starts as copies of it
                memcpy(self.stack_address + k * self.frame_bytes, self.stack_address, self.frame_bytes)
        else:
            self.push_frame(False)                # the life's first frame joins the game's stack
        self.write_stack(obs)
        self.write_state(env.state, 0.0, False)
        return 0

    cdef int step(self, atari_env* env, int32_t action, uint8_t* obs, float* reward,
                  uint8_t* terminated_out, uint8_t* truncated_out) except -1:
        """AtariPreprocessing.step's frame loop over the emulator, then the
        frame stack's shift; returns whether the episode is over."""
        cdef double total = 0.0, raw
        cdef bint terminated = False, truncated = False, ended = False
        cdef int t, lives, last = self.frameskip - 1
        if not 0 <= action < self.num_actions:
            raise ValueError(f"action {action} is not in Discrete({self.num_actions})")
        a = self.action_set[action]
        act, game_over, game_truncated = self.act, self.game_over, self.game_truncated
        for t in range(self.frameskip):
            total += <double>act(a)
            ended = game_over(False)
            terminated = ended
            truncated = game_truncated()
            if self.life_loss_ends and not self.continue_after_life_loss:
                # terminal_on_life_loss (AtariPreprocessing's): the step stops at that frame
                lives = self.lives_of()
                if lives < self.lives:
                    terminated = True
                    self.life_lost = True
                self.lives = lives
            if terminated or truncated:
                break                # the pair keeps what it held (AtariPreprocessing's way)
            if t == last - 1:
                self.grab(self.frames[1])
            elif t == last:
                self.grab(self.frames[0])
        if self.continue_after_life_loss and not terminated:
            # episodic_life (EnvPool's Step): a life lost during the step ends
            # the episode after the step's frames, all of them played
            lives = self.lives_of()
            if 0 < lives < self.lives:
                terminated = True
                self.life_lost = True
            self.lives = lives
        self.elapsed_steps += 1
        if self.max_steps and self.elapsed_steps >= self.max_steps:
            truncated = True         # gymnasium's TimeLimit: whether or not it also terminated
        self.push_frame(True)
        self.write_stack(obs)
        raw = total
        if self.reward_clip:
            total = (total > 0) - (total < 0)
        reward[0] = <float>total
        terminated_out[0] = terminated
        truncated_out[0] = truncated
        # info["terminated"], the game's end: game over, or a life lost with
        # terminal_on_life_loss, after which the next reset restarts the game
        self.write_state(env.state, raw, ended or (terminated and not self.continue_after_life_loss))
        return terminated or truncated

    cdef int push_frame(self, bint max_pool) except -1:
        """Put the newest frame (the max-pooled pair resized, INTER_AREA) in
        the stack's next ring slot."""
        cdef int slot = self.stack_next
        latest = self.frames[0]
        if max_pool and self.frameskip > 1:   # in place, as AtariPreprocessing
            max_in_place(self.latest_frame, self.older_frame, self.screen_bytes)
        cdef const uint8_t[:, ::1] screen
        if self.resize.by_opencv is not None:
            self.resize(latest, out=self.stack_frames[slot])
        else:
            screen = latest.reshape(latest.shape[0], -1)
            self.resize.run(&screen[0, 0], screen.shape[1], self.stack_address + slot * self.frame_bytes)
        self.stack_next = (slot + 1) % self.stack_num
        return 0

    cdef int write_stack(self, uint8_t* obs) except -1:
        """Write the stack to the obs row `obs`, oldest frame first."""
        cdef int k, slot
        for k in range(self.stack_num):
            slot = (self.stack_next + k) % self.stack_num
            if self.planar:
                to_planes(self.stack_address + slot * self.frame_bytes, obs + k * self.frame_bytes,
                          self.frame_bytes // 3)
            else:
                memcpy(obs + k * self.frame_bytes, self.stack_address + slot * self.frame_bytes,
                       self.frame_bytes)
        return 0

    cdef int write_state(self, atari_state* state, double raw_reward, bint game_over) except -1:
        state.now.lives = self.lives_of()
        state.now.episode_frame_number = self.episode_frame_number()
        state.now.frame_number = self.frame_number()
        state.now.reward = <float>raw_reward
        state.now.terminated = game_over
        state.now.elapsed_step = self.elapsed_steps
        self.get_ram(self.ram)   # filled in place (ale-py's getRAM(buffer)): no array made per step
        memcpy(state.now.ram, self.ram_address, 128)
        return 0

    def screen_rgb(self):
        """The emulator's current screen, RGB (H, W, 3)."""
        return self.ale.getScreenRGB()


# The implementations behind atari_seed / atari_reset / atari_step: they take
# the GIL, run the env's AtariGame, and keep any exception for the block.

cdef inline void to_planes(const uint8_t* pixels, uint8_t* planes, Py_ssize_t n) noexcept nogil:
    """n RGB pixels, interleaved (n, 3), as three planes (3, n): EnvPool's
    channel-first frames."""
    cdef Py_ssize_t i
    for i in range(n):
        planes[i] = pixels[3 * i]
        planes[n + i] = pixels[3 * i + 1]
        planes[2 * n + i] = pixels[3 * i + 2]


cdef void _seed_env(atari_env* env, uint64_t seed) noexcept with gil:
    cdef AtariGame game = <AtariGame>env.game
    try:
        game.seed(seed)
    except BaseException as error:
        game.error = error
        env.failed[0] = 1


cdef void _reset_env(atari_env* env, uint8_t* obs) noexcept with gil:
    cdef AtariGame game = <AtariGame>env.game
    try:
        game.reset(env, obs)
    except BaseException as error:
        game.error = error
        env.failed[0] = 1


cdef int _step_env(atari_env* env, const int32_t* act, uint8_t* obs, float* rew, uint8_t* term,
                   uint8_t* trunc) noexcept with gil:
    cdef AtariGame game = <AtariGame>env.game
    try:
        return game.step(env, act[0], obs, rew, term, trunc)
    except BaseException as error:
        game.error = error
        env.failed[0] = 1
        return 0


atari_seed_impl = _seed_env
atari_reset_impl = _reset_env
atari_step_impl = _step_env


# ---- a block of envs -------------------------------------------------------------

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
    atari_env* envs
    shoal_episode* episodes
    const uint8_t* requests
    const uint8_t* selected
    const uint64_t* seeds
    const int32_t* actions
    uint8_t* obs
    uint8_t* final_obs
    float* rewards
    uint8_t* terminals
    uint8_t* truncations
    uint8_t* masks
    int64_t count
    int mode
    int failed          # an env call raised (its AtariGame holds the exception)
    void* block         # the Block (borrowed), for the worker's last words


cdef void _run_block(void* ctx, int command) noexcept nogil:
    cdef BlockView* b = <BlockView*>ctx
    if command == SHOAL_CMD_STEP:
        atari_vec_step(b.envs, b.episodes, b.count, b.actions, b.obs, b.rewards,
                       b.terminals, b.truncations, b.masks, b.final_obs, b.mode)
    elif command == SHOAL_CMD_RESET:
        _mark_requested_resets(b)
        atari_vec_reset(b.envs, b.episodes, b.count, b.requests, b.seeds, b.obs,
                        b.rewards, b.terminals, b.truncations, b.masks)
    elif command == SHOAL_CMD_STEP_SELECTED:
        atari_vec_step_selected(b.envs, b.episodes, b.count, b.selected, b.actions, b.obs,
                                b.rewards, b.terminals, b.truncations, b.masks, b.final_obs, b.mode)


cdef inline void _mark_requested_resets(BlockView* b) noexcept nogil:
    """Resets the pool's user asks for (reset(), reset(env_id=...)): in a
    pool with autoreset they start new games, as EnvPool's explicit resets
    do, while its autoresets go on with the game after a lost life
    (episodic_life). In a DISABLED pool the user's reset is the autoreset
    (SingleEnv, ShoalParallelEnv, gymnasium's DISABLED mode): it goes on."""
    cdef int64_t i
    if b.mode == SHOAL_DISABLED:
        return
    for i in range(b.count):
        if b.requests[i] != SHOAL_KEEP:
            b.envs[i].new_game = 1


cdef void _exit_worker(BlockView* b) noexcept with gil:
    """A worker's block failed: say why on stderr and exit, so that the pool
    finds the worker dead and reports it (WorkerError)."""
    try:
        message = (<Block>b.block).failure_report()
        sys.stderr.write(message)
        sys.stderr.flush()
    finally:
        _exit(1)


cdef void _serve_block(void* ctx, int command) noexcept nogil:
    """What the worker loop runs (ops_address): the block, and an exit on failure."""
    _run_block(ctx, command)
    if (<BlockView*>ctx).failed:
        _exit_worker(<BlockView*>ctx)


cdef class Block:
    """Envs [start, stop) of a pool, stepped in place in the pool's buffers
    (the interface of a header env's Cython Block; see vec_binding.pxi)."""
    cdef BlockView view
    cdef shoal_block_ops ops
    cdef atari_env* envs
    cdef object buffers        # keeps the memory alive while we hold its pointers
    cdef object binding
    cdef readonly list games
    cdef readonly Py_ssize_t start, count

    def __cinit__(self):
        self.envs = NULL

    def __init__(self, binding, buffers, Py_ssize_t start, Py_ssize_t stop, int mode,
                 bint keep_final_obs=False):
        cdef Py_ssize_t n = buffers.num_envs, i, obs_size = binding.OBS_ELEMENTS
        cdef atari_state* states
        cdef AtariGame game
        if not 0 <= start < stop <= n:
            raise ValueError(f"block [{start}, {stop}) is not inside [0, {n})")
        if mode not in (0, 1, 2):
            raise ValueError(f"autoreset mode must be 0, 1 or 2, got {mode}")
        self.binding = binding
        self.buffers = buffers
        self.start = start
        self.count = stop - start
        states = (<atari_state*>_address(buffers.env_states, np.uint8, n * sizeof(atari_state))) + start
        self.envs = <atari_env*>PyMem_Calloc(self.count, sizeof(atari_env))
        if self.envs == NULL:
            raise MemoryError()
        self.games = []
        for i in range(self.count):
            game = AtariGame(binding, start + i)
            self.games.append(game)
            self.envs[i].state = states + i
            self.envs[i].game = <void*>game
            self.envs[i].failed = &self.view.failed
            self.envs[i].obs_size = <int>obs_size
            self.envs[i].act_size = 1
        self.view.envs = self.envs
        self.view.count = self.count
        self.view.mode = mode
        self.view.failed = 0
        self.view.block = <void*>self
        self.view.episodes = (<shoal_episode*>_address(buffers.episodes, buffers.episodes.dtype, n)) + start
        self.view.requests = (<uint8_t*>_address(buffers.reset_requests, np.uint8, n)) + start
        self.view.selected = (<uint8_t*>_address(buffers.step_selected, np.uint8, n)) + start
        self.view.seeds = (<uint64_t*>_address(buffers.seeds, np.uint64, n)) + start
        self.view.actions = (<int32_t*>_address(buffers.actions, np.int32, n)) + start
        self.view.obs = (<uint8_t*>_address(buffers.obs, np.uint8, n * obs_size)) + start * obs_size
        self.view.rewards = (<float*>_address(buffers.rewards, np.float32, n)) + start
        self.view.terminals = (<uint8_t*>_address(buffers.terminals, np.bool_, n)) + start
        self.view.truncations = (<uint8_t*>_address(buffers.truncations, np.bool_, n)) + start
        self.view.masks = (<uint8_t*>_address(buffers.masks, np.bool_, n)) + start
        self.view.final_obs = NULL
        if keep_final_obs:
            self.view.final_obs = (<uint8_t*>_address(buffers.final_obs, np.uint8, n * obs_size)) \
                + start * obs_size
        self.ops.run = _serve_block
        self.ops.ctx = <void*>&self.view

    def __dealloc__(self):
        PyMem_Free(self.envs)

    def _raise_if_failed(self):
        if not self.view.failed:
            return
        for game in self.games:
            if game.error is not None:
                error = game.error
                error.add_note(f"raised by {self.binding.spec.name} env {game.index} of the pool "
                               f"(shoal's Atari binding); the block is unusable")
                raise error
        raise RuntimeError(f"{self.binding.spec.name}: an env call failed")

    def failure_report(self) -> str:
        """What a failing worker writes to stderr before it exits."""
        for game in self.games:
            if game.error is not None:
                trace = "".join(traceback.format_exception(game.error))
                return (f"shoal worker for {self.binding.spec.name} envs {self.start}.."
                        f"{self.start + self.count - 1}: env {game.index} raised; the worker exits\n{trace}")
        return f"shoal worker for {self.binding.spec.name}: an env call failed; the worker exits\n"

    # step / reset / step_selected keep the GIL: each env call takes it
    # anyway (the emulator is ale-py's Python extension), and each time it
    # was given up in between, a busy Python thread held it for its switch
    # interval (5 ms) before that env could run. (A worker's loop does give
    # it up: nothing else in that process wants it.)
    def step(self):
        """Step every env of the block once (actions read from the buffer)."""
        _run_block(&self.view, SHOAL_CMD_STEP)
        self._raise_if_failed()

    def reset(self):
        """Reset the envs whose reset_requests entry is RESET or RESEED."""
        _run_block(&self.view, SHOAL_CMD_RESET)
        self._raise_if_failed()

    def step_selected(self):
        """Step the envs whose step_selected entry is nonzero; the others stay as they are."""
        _run_block(&self.view, SHOAL_CMD_STEP_SELECTED)
        self._raise_if_failed()

    @cython.boundscheck(False)
    def run_steps(self, int32_t[:, ::1] action_table, Py_ssize_t steps, Py_ssize_t first_row=0):
        """The plain loop, for benchmarks: `steps` steps of the block in one
        call, step t reading its actions from row (first_row + t) %
        len(action_table) (a caller chaining calls passes where it stopped)."""
        cdef Py_ssize_t t, k = action_table.shape[0]
        cdef BlockView view = self.view
        if action_table.shape[1] != view.count or k == 0:
            raise ValueError(f"action_table rows need {view.count} actions")
        first_row %= k
        with nogil:
            for t in range(steps):
                view.actions = &action_table[(first_row + t) % k, 0]
                _run_block(&view, SHOAL_CMD_STEP)
                if self.view.failed:     # envs flag the block's own view
                    break
        self._raise_if_failed()

    @property
    def ops_address(self):
        """Address of this block's C ops table, for the worker loop."""
        return <size_t>&self.ops


# ---- the binding of one configured game -------------------------------------------

class AtariBinding:
    """Sizes and dtypes of one configured Atari env, and its Block."""

    AGENTS_PER_ENV = 1
    ACT_ELEMENTS = 1
    OBS_DTYPE = np.dtype(np.uint8)
    ACT_DTYPE = np.dtype(np.int32)
    STATE_DTYPE = STATE_DTYPE
    ENV_BYTES = sizeof(atari_state)
    INFO_KEYS = ("lives", "episode_frame_number", "frame_number")   # gymnasium's (SingleEnv, make_vec, SB3)
    # A pool's step info adds EnvPool's: the reward before reward_clip and
    # whether the game is over (with episodic_life, the last life lost), so
    # that EnvPool-style loggers can sum whole games' real scores, and its
    # elapsed_step, which counts a whole game's steps (with episodic_life,
    # over its lives) where the pool's own count restarts every episode.
    POOL_INFO_KEYS = INFO_KEYS + ("reward", "terminated", "elapsed_step")
    RESET_INFO_KEYS = INFO_KEYS   # gymnasium's AtariEnv gives the same three at reset

    def __init__(self, spec: EnvSpec):
        ale_py = _ale_py()
        from ale_py import roms
        kwargs = spec.env_kwargs
        self.spec = spec
        path = roms.get_rom_path(ROM_IDS[spec.name])
        if path is None:
            raise FileNotFoundError(f"ale-py {ale_py.__version__} has no ROM {ROM_IDS[spec.name]!r} "
                                    f"for {spec.name}")
        self.rom_path = str(path)
        # One emulator per process reads what the game is: its action set and screen.
        probe = _new_emulator(ale_py, kwargs)
        probe.loadROM(self.rom_path)
        for key, plural, available in (("mode", "modes", probe.getAvailableModes()),
                                       ("difficulty", "difficulties", probe.getAvailableDifficulties())):
            if kwargs[key] is not None and kwargs[key] not in list(available):
                raise ValueError(f"{spec.name}: {key}={kwargs[key]} is not one of the game's "
                                 f"{plural} {sorted(int(x) for x in available)}")
        actions = probe.getLegalActionSet() if kwargs["full_action_space"] else probe.getMinimalActionSet()
        self.action_set = tuple(actions)
        self.fire_start = kwargs["use_fire_reset"] and ale_py.Action.FIRE in self.action_set
        height, width = probe.getScreenDims()
        self.screen_shape = (height, width) if kwargs["gray_scale"] else (height, width, 3)
        del probe
        self.OBS_ELEMENTS = int(np.prod(spec.obs_shape))
        self.MAX_EPISODE_STEPS = spec.max_episode_steps
        check_spec_against_binding(spec, self)
        if (len(self.action_set),) != tuple(spec.action_nvec):
            raise SpecMismatchError(f"{spec.name}: ale-py {ale_py.__version__} gives {len(self.action_set)} "
                                    f"actions, the spec {spec.action_nvec[0]} (envs/atari/games.py)")

    def info(self, env_states: np.ndarray, final: bool = False, keys=INFO_KEYS) -> dict:
        """The info of every env after its last step or reset (final: when
        its last reset began, i.e. a SAME_STEP autoreset's ended step), from
        the pool's env_states buffer: {name: array (num_envs,)} for `keys`
        (default gymnasium's; POOL_INFO_KEYS adds EnvPool's)."""
        infos = env_states.view(STATE_DTYPE)["final" if final else "now"]
        return {key: infos[key] for key in keys}

    def Block(self, buffers, start: int, stop: int, mode: int, keep_final_obs: bool = False):
        return Block(self, buffers, start, stop, mode, keep_final_obs)

    def render_pool(self, pool, index: int, mode: str = "rgb_array") -> np.ndarray:
        """The RGB screen (H, W, 3) of env `index` of a pool whose envs live
        in this process (Serial; SingleEnv is one). mode: "rgb_array", the
        one render mode an emulator has (the library renderers' signature)."""
        if mode != "rgb_array":
            raise ValueError(f"{self.spec.name} renders 'rgb_array' only, not {mode!r}")
        for batch in getattr(pool, "_blocks", ()):
            for block in batch:
                if block.start <= index < block.start + block.count:
                    return block.games[index - block.start].screen_rgb()
        raise ValueError(f"rendering {self.spec.name} needs its emulator in this process: use "
                         f"backend='serial' (gymnasium.make and SingleEnv do); a Multiprocessing "
                         f"pool keeps it in its workers")


_bindings: dict = {}


def binding_for(spec: EnvSpec) -> AtariBinding:
    """The binding of `spec` (one per game and options, per process)."""
    key = (spec.name, tuple(sorted(spec.env_kwargs.items())))
    if key not in _bindings:
        _bindings[key] = AtariBinding(spec)
    return _bindings[key]
