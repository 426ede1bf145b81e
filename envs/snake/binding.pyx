# cython: language_level=3, boundscheck=False, wraparound=False
"""Snake's binding: the generic vector Block over snake.h, plus render_rgb /
render_text, the scripted heuristic policy and a state decoder for tests."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t

cdef extern from *:
    """
    #include "snake/snake.h"
    #define SHOAL_VEC_ENV snake
    #include "shoal_vec.h"

    /* Read-outs for the binding (host only). */
    static int snake_cell_at(const snake_env* env, int x, int y) {
        return env->grid[snake_cell_index(x, y)];
    }
    static int snake_length_of(const snake_env* env, int i) { return env->snakes[i].length; }
    static int snake_dir_of(const snake_env* env, int i) { return env->snakes[i].dir; }
    static int snake_grow_of(const snake_env* env, int i) { return env->snakes[i].grow; }
    static int snake_steps_of(const snake_env* env) { return env->steps; }
    /* Cell k of snake i counted from the head, as playable (x, y). */
    static void snake_body_xy(const snake_env* env, int i, int k, int* x, int* y) {
        const snake_snake* s = &env->snakes[i];
        const int cell = s->body[(s->head - k) & (SNAKE_MAX_LEN - 1)];
        *x = cell % SNAKE_STRIDE - SNAKE_PAD;
        *y = cell / SNAKE_STRIDE - SNAKE_PAD;
    }
    /* Test scenarios: an empty walled grid, then snakes and food placed. */
    static void snake_clear_grid(snake_env* env) {
        for (int k = 0; k < SNAKE_CELLS; k++) env->grid[k] = SNAKE_CELL_WALL;
        for (int y = 0; y < SNAKE_SIZE; y++)
            for (int x = 0; x < SNAKE_SIZE; x++) env->grid[snake_cell_index(x, y)] = SNAKE_CELL_EMPTY;
    }
    static void snake_place_cell(snake_env* env, int i, int k, int len, int x, int y) {
        snake_snake* s = &env->snakes[i];
        const int cell = snake_cell_index(x, y);
        s->head = (uint8_t)(len - 1);
        s->length = (uint8_t)len;
        s->body[len - 1 - k] = (uint16_t)cell;
        env->grid[cell] = (uint8_t)((k == 0 ? SNAKE_CELL_HEAD0 : SNAKE_CELL_BODY0) + 2 * i);
    }
    static void snake_place_meta(snake_env* env, int i, int dir, int grow) {
        env->snakes[i].dir = (uint8_t)dir;
        env->snakes[i].grow = (uint8_t)grow;
    }
    static void snake_place_food(snake_env* env, int x, int y) {
        env->grid[snake_cell_index(x, y)] = SNAKE_CELL_FOOD;
    }
    """
    ctypedef struct env_t "snake_env":
        pass
    ctypedef uint8_t obs_t "snake_obs_t"
    ctypedef int32_t act_t "snake_act_t"
    enum:
        C_MAX_STEPS "SNAKE_MAX_STEPS"
        C_SIZE "SNAKE_SIZE"
        C_FOOD "SNAKE_FOOD"
        C_MAX_LEN "SNAKE_MAX_LEN"
        C_START_LEN "SNAKE_START_LEN"
        C_VIEW "SNAKE_VIEW"
        C_RENDER_SIDE "SNAKE_RENDER_SIDE"
        C_TEXT_CHARS "SNAKE_TEXT_CHARS"
    int snake_heuristic_action(const env_t* env, int i) noexcept nogil
    void snake_render_rgb(const env_t* env, uint8_t* out) noexcept nogil
    void snake_render_text(const env_t* env, char* out) noexcept nogil
    int snake_cell_at(const env_t* env, int x, int y) noexcept nogil
    int snake_length_of(const env_t* env, int i) noexcept nogil
    int snake_dir_of(const env_t* env, int i) noexcept nogil
    int snake_grow_of(const env_t* env, int i) noexcept nogil
    int snake_steps_of(const env_t* env) noexcept nogil
    void snake_clear_grid(env_t* env) noexcept nogil
    void snake_place_cell(env_t* env, int i, int k, int len, int x, int y) noexcept nogil
    void snake_place_meta(env_t* env, int i, int dir, int grow) noexcept nogil
    void snake_place_food(env_t* env, int x, int y) noexcept nogil
    void snake_body_xy(const env_t* env, int i, int k, int* x, int* y) noexcept nogil

include "../vec_binding.pxi"

GRID_SIZE = C_SIZE
SNAKES = AGENTS
FOOD = C_FOOD
MAX_LEN = C_MAX_LEN
START_LEN = C_START_LEN
VIEW = C_VIEW
MAX_STEPS = C_MAX_STEPS
RENDER_SHAPE = (C_RENDER_SIDE, C_RENDER_SIDE)


cdef const env_t* _one_env(const uint8_t[::1] env_bytes) except NULL:
    if env_bytes.shape[0] != sizeof(env_t):
        raise ValueError(f"env_bytes must hold {sizeof(env_t)} bytes, got {env_bytes.shape[0]}")
    return <const env_t*>&env_bytes[0]


def render_rgb(const uint8_t[::1] env_bytes, uint8_t[:, :, ::1] out):
    """Draw one env (its raw struct bytes) into out, a (H, W, 3) uint8 array
    of RENDER_SHAPE: walls grey, food white, each snake its own colour (head
    bright, body dimmer)."""
    cdef const env_t* env = _one_env(env_bytes)
    if out.shape[0] != C_RENDER_SIDE or out.shape[1] != C_RENDER_SIDE or out.shape[2] != 3:
        raise ValueError(f"out must have shape {RENDER_SHAPE + (3,)}")
    with nogil:
        snake_render_rgb(env, &out[0, 0, 0])


def render_text(const uint8_t[::1] env_bytes):
    """One env as text: '#' wall, '.' empty, '*' food, snake i's body
    chr(ord('a') + i) and head chr(ord('A') + i); one line per grid row."""
    cdef const env_t* env = _one_env(env_bytes)
    text = bytearray(C_TEXT_CHARS)
    cdef char* p = text
    snake_render_text(env, p)
    return text.decode("ascii")


def heuristic_actions(const uint8_t[::1] env_states, Py_ssize_t num_envs, int32_t[::1] out_actions):
    """Scripted policy (see snake_heuristic_action in snake.h) for every
    snake of envs 0..num_envs-1 of a pool's env_states buffer, written into
    out_actions (num_envs * SNAKES int32)."""
    cdef Py_ssize_t e
    cdef int i
    if env_states.shape[0] < num_envs * <Py_ssize_t>sizeof(env_t):
        raise ValueError("env_states holds fewer than num_envs envs")
    if out_actions.shape[0] < num_envs * AGENTS:
        raise ValueError("out_actions holds fewer than num_envs * SNAKES actions")
    cdef const env_t* envs = <const env_t*>&env_states[0]
    with nogil:
        for e in range(num_envs):
            for i in range(AGENTS):
                out_actions[e * AGENTS + i] = snake_heuristic_action(&envs[e], i)


def decode(const uint8_t[::1] env_bytes):
    """One env's state as Python values, for tests: grid (SIZE x SIZE raw cell
    values, [y, x]), per snake its body cells head first as (x, y), dir,
    pending growth; steps."""
    cdef const env_t* env = _one_env(env_bytes)
    cdef int x, y, i, k
    grid = np.zeros((C_SIZE, C_SIZE), np.uint8)
    for y in range(C_SIZE):
        for x in range(C_SIZE):
            grid[y, x] = snake_cell_at(env, x, y)
    bodies, dirs, grows = [], [], []
    for i in range(AGENTS):
        cells = []
        for k in range(snake_length_of(env, i)):
            snake_body_xy(env, i, k, &x, &y)
            cells.append((x, y))
        bodies.append(cells)
        dirs.append(snake_dir_of(env, i))
        grows.append(snake_grow_of(env, i))
    return {"grid": grid, "bodies": bodies, "dirs": dirs, "grow": grows, "steps": snake_steps_of(env)}


def place(uint8_t[::1] env_bytes, bodies, dirs, food):
    """Overwrite one env's grid with a test scenario: bodies[i] is snake i's
    cells head first as (x, y) (1..MAX_LEN cells, no pending growth),
    dirs[i] its heading, food a list of (x, y). The caller keeps the
    scenario legal (cells on the grid, disjoint, bodies contiguous); the
    food count may differ from FOOD (eaten food is still replaced one for
    one)."""
    if len(bodies) != AGENTS or len(dirs) != AGENTS:
        raise ValueError(f"need {AGENTS} bodies and dirs")
    cdef env_t* env = <env_t*>_one_env(env_bytes)
    cdef int i, k
    snake_clear_grid(env)
    for i in range(AGENTS):
        if not 1 <= len(bodies[i]) <= C_MAX_LEN:
            raise ValueError("a body has 1..MAX_LEN cells")
        for k, (x, y) in enumerate(bodies[i]):
            if not (0 <= x < C_SIZE and 0 <= y < C_SIZE):
                raise ValueError(f"cell {(x, y)} is off the grid")
            snake_place_cell(env, i, k, len(bodies[i]), x, y)
        snake_place_meta(env, i, dirs[i], 0)
    for x, y in food:
        snake_place_food(env, x, y)
