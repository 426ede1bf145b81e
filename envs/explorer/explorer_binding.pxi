# explorer_binding.pxi — the Cython side shared by both Explorer tasks.
#
# Included by envs/explorer/binding.pyx (Explore) and
# envs/explorer_pointgoal/binding.pyx (PointGoal) right after their verbatim
# C block, which includes explorer.h with the task chosen and generates the
# `explorer_` vector loop. Besides the generic Block: the render interface
# (RENDER_SHAPE, render_rgb, render_text), a scripted policy and read-only
# views of env states and floorplans for tests.

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

cdef extern from *:
    ctypedef struct agent_t "explorer_agent":
        float x, y
        int32_t heading, active
        float goal_x, goal_y, goal_dist
        int32_t goals_reached, seen_count
    ctypedef struct env_t "explorer_env":
        agent_t agents[4]
        int32_t plan_id, steps
    ctypedef struct plan_t "explorer_plan":
        int32_t num_walls, num_rooms
        float wall_x0[1]
        float wall_y0[1]
        float wall_ex[1]
        float wall_ey[1]
        int32_t wall_colour[1]
        float room_x0[1]
        float room_y0[1]
        float room_x1[1]
        float room_y1[1]
    ctypedef float obs_t "explorer_obs_t"
    ctypedef int32_t act_t "explorer_act_t"
    enum:
        MAX_STEPS "EXPLORER_MAX_STEPS"
        RAYS "EXPLORER_RAYS"
        PLANS "EXPLORER_PLANS"
        HEADINGS "EXPLORER_HEADINGS"
        MAP_SIZE "EXPLORER_MAP"
        GRID "EXPLORER_GRID"
        TASK_ID "EXPLORER_TASK"
        TASK_POINTGOAL "EXPLORER_TASK_POINTGOAL"
        RENDER_H "EXPLORER_RENDER_H"
        RENDER_W "EXPLORER_RENDER_W"
    float RADIUS "EXPLORER_RADIUS"
    float RANGE "EXPLORER_RANGE"
    void explorer_build_assets() noexcept nogil
    const plan_t* explorer_plan_ptr "(explorer_assets_host.plans)"
    const char* explorer_assets_address "((const char*)&explorer_assets_host)"
    size_t EXPLORER_ASSETS_BYTES "sizeof(explorer_assets)"
    void explorer_heuristic(const float* obs, int32_t* act) noexcept nogil
    void explorer_render_rgb(const env_t* env, uint8_t* out) noexcept nogil
    int explorer_render_text(const env_t* env, char* buf, int cap) noexcept nogil

include "../vec_binding.pxi"

explorer_build_assets()  # the floorplans, once per process (idempotent)

TASK = "PointGoal" if TASK_ID == TASK_POINTGOAL else "Explore"
NUM_PLANS = PLANS
NUM_RAYS = RAYS
MAP = MAP_SIZE
AGENT_RADIUS = RADIUS
RAY_RANGE = RANGE
RENDER_SHAPE = (RENDER_H, RENDER_W)


def assets_bytes():
    """The shared assets (the C explorer_assets struct: floorplans and
    direction tables) as bytes, built on this host; the CUDA backend uploads
    them once per GPU."""
    return explorer_assets_address[:EXPLORER_ASSETS_BYTES]


cdef const env_t* _env_of(object env_bytes) except NULL:
    return <const env_t*>_address(env_bytes, np.uint8, sizeof(env_t))


def render_rgb(env_bytes, out):
    """Draw one env (its raw struct, ENV_BYTES uint8) top-down into `out`,
    a C-contiguous (H, W, 3) uint8 array with (H, W) == RENDER_SHAPE."""
    if tuple(out.shape) != (RENDER_H, RENDER_W, 3):
        raise ValueError(f"out must have shape {(RENDER_H, RENDER_W, 3)}, got {out.shape}")
    cdef const env_t* env = _env_of(env_bytes)
    cdef uint8_t* dst = <uint8_t*>_address(out, np.uint8, RENDER_H * RENDER_W * 3)
    with nogil:
        explorer_render_rgb(env, dst)


def render_text(env_bytes):
    """ASCII view of one env: a status line, then the map ('#' walls, digits
    agents, letters their goals, '.' seen cells)."""
    cdef const env_t* env = _env_of(env_bytes)
    cdef bytearray buf = bytearray(8192)
    cdef int n = explorer_render_text(env, <char*>buf, len(buf))
    head = [f"Explorer/{TASK} plan {env.plan_id} step {env.steps}/{MAX_STEPS}"]
    for a in range(AGENTS):
        ag = env.agents[a]
        state = "present" if ag.active else "gone"
        extra = (f"goals {ag.goals_reached}" if TASK_ID == TASK_POINTGOAL
                 else f"seen {ag.seen_count}")
        head.append(f"  agent {a}: ({ag.x:5.2f}, {ag.y:5.2f}) heading {ag.heading:2d} {extra} {state}")
    return "\n".join(head) + "\n" + bytes(buf[:n]).decode("ascii")


HEURISTIC_INPUT = "obs"  # heuristic_actions reads observations, not env states (shoal.render.play)


def heuristic_actions(obs, out_actions):
    """Scripted policy on obs rows (rows, OBS_SIZE) float32 into out_actions
    (rows, 2) int32: forward, turn toward the goal (PointGoal), turn toward
    open space when the way ahead is short."""
    cdef Py_ssize_t rows = obs.shape[0], i
    cdef const float* o = <const float*>_address(obs, np.float32, rows * OBS_SIZE)
    cdef int32_t* a = <int32_t*>_address(out_actions, np.int32, rows * ACT_SIZE)
    with nogil:
        for i in range(rows):
            explorer_heuristic(o + i * OBS_SIZE, a + i * ACT_SIZE)


def agent_states(env_states, Py_ssize_t num_envs):
    """Per env and agent: x, y, heading, active, goals_reached, seen_count,
    goal_x, goal_y (float64 array (num_envs, AGENTS, 8)) and per env the
    plan id and step count (int arrays)."""
    cdef const env_t* envs = <const env_t*>_address(env_states, np.uint8, num_envs * sizeof(env_t))
    out = np.zeros((num_envs, AGENTS, 8))
    plans = np.zeros(num_envs, np.int64)
    steps = np.zeros(num_envs, np.int64)
    cdef Py_ssize_t i, a
    for i in range(num_envs):
        plans[i] = envs[i].plan_id
        steps[i] = envs[i].steps
        for a in range(AGENTS):
            ag = envs[i].agents[a]
            out[i, a] = (ag.x, ag.y, ag.heading, ag.active, ag.goals_reached, ag.seen_count,
                         ag.goal_x, ag.goal_y)
    return out, plans, steps


def floorplan(int plan_id):
    """Floorplan `plan_id`: walls (n, 4) as x0, y0, x1, y1 with their colours,
    and rooms (m, 4) as x0, y0, x1, y1."""
    if not 0 <= plan_id < PLANS:
        raise ValueError(f"plan_id must be in [0, {PLANS})")
    cdef const plan_t* plan = &explorer_plan_ptr[plan_id]
    walls = np.array([(plan.wall_x0[w], plan.wall_y0[w], plan.wall_x0[w] + plan.wall_ex[w],
                       plan.wall_y0[w] + plan.wall_ey[w]) for w in range(plan.num_walls)],
                     np.float64)
    colours = np.array([plan.wall_colour[w] for w in range(plan.num_walls)], np.int64)
    rooms = np.array([(plan.room_x0[r], plan.room_y0[r], plan.room_x1[r], plan.room_y1[r])
                      for r in range(plan.num_rooms)], np.float64)
    return walls, colours, rooms


def set_goal(env_states, Py_ssize_t env, int agent, float x, float y):
    """Test hook: move agent `agent`'s goal in env `env` of a pool's
    env_states to (x, y) (the distance baseline follows, so no reward jump)."""
    if not 0 <= agent < AGENTS:
        raise ValueError(f"agent must be in [0, {AGENTS})")
    cdef env_t* e = (<env_t*>_address(env_states, np.uint8, (env + 1) * sizeof(env_t))) + env
    cdef agent_t* ag = &e.agents[agent]
    ag.goal_x = x
    ag.goal_y = y
    ag.goal_dist = ((ag.x - x) ** 2 + (ag.y - y) ** 2) ** 0.5
