# cython: language_level=3, boundscheck=False, wraparound=False
"""Drive's binding: the generic vector Block over drive.h, plus rendering,
the built-in lane-following policy and state views for tests."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #include "drive/drive.h"
    #define SHOAL_VEC_ENV drive
    #include "shoal_vec.h"

    /* Row-wise scripted policy over n envs: the built-in lane follower for
       every live agent, 0 for other rows. */
    static void drive_heuristic_block(const drive_env* envs, int64_t n, int32_t* out) {
        for (int64_t i = 0; i < n; i++)
            for (int a = 0; a < DRIVE_AGENTS; a++)
                out[i * DRIVE_AGENTS + a] = envs[i].agents[a].status == DRIVE_ALIVE
                    ? drive_heuristic_action(&envs[i], a) : 0;
    }

    /* Per agent: x, y, heading, speed, status, controlled, on_road, lane. */
    static void drive_agent_block(const drive_env* envs, int64_t n, float* out) {
        for (int64_t i = 0; i < n; i++) {
            const drive_map* map = &drive_assets_host.maps[envs[i].map_id];
            for (int a = 0; a < DRIVE_AGENTS; a++) {
                const drive_agent* ag = &envs[i].agents[a];
                float* o = out + (i * DRIVE_AGENTS + a) * 8;
                o[0] = ag->x; o[1] = ag->y; o[2] = ag->heading; o[3] = ag->speed;
                o[4] = ag->status; o[5] = ag->controlled;
                o[6] = (float)drive_on_road(map, ag->x, ag->y); o[7] = ag->lane;
            }
        }
    }
    static int drive_env_map(const drive_env* env) { return env->map_id; }
    static int drive_env_steps(const drive_env* env) { return env->steps; }
    static const char* drive_map_name(int m) { return drive_map_names[m]; }
    """
    ctypedef struct env_t "drive_env":
        pass
    ctypedef float obs_t "drive_obs_t"
    ctypedef int32_t act_t "drive_act_t"
    enum:
        NUM_MAPS "DRIVE_NUM_MAPS"
        NUM_ACTIONS "DRIVE_NUM_ACTIONS"
        STEER_BINS "DRIVE_STEER_BINS"
        ACCEL_BINS "DRIVE_ACCEL_BINS"
        TEXT_ROWS "DRIVE_TEXT_ROWS"
        TEXT_COLS "DRIVE_TEXT_COLS"
    void drive_build_assets() noexcept nogil
    const char* drive_assets_address "((const char*)&drive_assets_host)"
    size_t DRIVE_ASSETS_BYTES "sizeof(drive_assets)"
    void drive_render_rgb(const env_t* env, uint8_t* out, int h, int w) noexcept nogil
    int drive_render_text(const env_t* env, char* buf, int cap) noexcept nogil
    void drive_heuristic_block(const env_t* envs, int64_t n, int32_t* out) noexcept nogil
    void drive_agent_block(const env_t* envs, int64_t n, float* out) noexcept nogil
    int drive_env_map(const env_t* env) noexcept nogil
    int drive_env_steps(const env_t* env) noexcept nogil
    const char* drive_map_name(int m) noexcept nogil

include "../vec_binding.pxi"

drive_build_assets()   # the shared maps, once per process

RENDER_SHAPE = (320, 320)
NUM_MAP_LAYOUTS = NUM_MAPS
NUM_DISCRETE_ACTIONS = NUM_ACTIONS
STEER_GRID = STEER_BINS      # action = steer_bin * ACCEL_GRID + accel_bin
ACCEL_GRID = ACCEL_BINS
TEXT_SHAPE = (TEXT_ROWS, TEXT_COLS)
MAP_NAMES = tuple(drive_map_name(m).decode() for m in range(NUM_MAPS))


def assets_bytes():
    """The shared maps (the C drive_assets struct) as bytes, built on this
    host; the CUDA backend uploads them once per GPU."""
    return drive_assets_address[:DRIVE_ASSETS_BYTES]


AGENT_FIELDS = ("x", "y", "heading", "speed", "status", "controlled", "on_road", "lane")


cdef const env_t* _envs(object env_bytes, Py_ssize_t count) except NULL:
    return <const env_t*><size_t>_address(env_bytes, np.uint8, count * sizeof(env_t))


def render_rgb(env_bytes, out):
    """Draw one env (its raw ENV_BYTES struct) top-down into out (H, W, 3) uint8."""
    cdef const env_t* env = _envs(env_bytes, 1)
    if not isinstance(out, np.ndarray) or out.shape != (RENDER_SHAPE[0], RENDER_SHAPE[1], 3):
        raise ValueError(f"out must be a numpy array of shape {RENDER_SHAPE + (3,)}")
    cdef int h = RENDER_SHAPE[0], w = RENDER_SHAPE[1]
    cdef uint8_t* dst = <uint8_t*><size_t>_address(out, np.uint8, h * w * 3)
    with nogil:
        drive_render_rgb(env, dst, h, w)
    return out


def render_text(env_bytes):
    """ASCII view of one env: '.' road, '+' goals, agents by row (0-9a-v), '#' traffic."""
    cdef const env_t* env = _envs(env_bytes, 1)
    cdef char buf[8192]
    cdef int n = drive_render_text(env, buf, sizeof(buf))
    return buf[:n].decode("ascii")


def heuristic_actions(env_states, Py_ssize_t num_envs, out_actions):
    """The built-in lane follower's action for every row of num_envs envs
    (env_states: the pool's raw states) into int32 out_actions (num_envs*AGENTS)."""
    cdef const env_t* envs = _envs(env_states, num_envs)
    cdef int32_t* out = <int32_t*><size_t>_address(out_actions, np.int32, num_envs * AGENTS)
    with nogil:
        drive_heuristic_block(envs, num_envs, out)
    return out_actions


def agent_table(env_states, Py_ssize_t num_envs):
    """(num_envs, AGENTS, 8) float32: the AGENT_FIELDS of every agent."""
    cdef const env_t* envs = _envs(env_states, num_envs)
    table = np.zeros((num_envs, AGENTS, 8), np.float32)
    cdef float* out = <float*><size_t>table.__array_interface__["data"][0]
    with nogil:
        drive_agent_block(envs, num_envs, out)
    return table


def env_info(env_states, Py_ssize_t num_envs):
    """(map_id, steps) arrays of num_envs envs."""
    cdef const env_t* envs = _envs(env_states, num_envs)
    cdef Py_ssize_t i
    maps = np.zeros(num_envs, np.int32)
    steps = np.zeros(num_envs, np.int32)
    for i in range(num_envs):
        maps[i] = drive_env_map(&envs[i])
        steps[i] = drive_env_steps(&envs[i])
    return maps, steps
