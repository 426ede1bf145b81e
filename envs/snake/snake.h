/* snake.h — Snake, the whole env: many snakes on one grid, one agent each.
 *
 * Rules. SNAKE_COUNT snakes share a SNAKE_SIZE x SNAKE_SIZE grid walled all
 * round; SNAKE_FOOD food items lie on free cells at all times (an eaten one
 * is replaced at once at a random free cell). All snakes move one cell per
 * step, simultaneously. A snake that moves onto food grows by one cell (its
 * tail stays put this step) up to SNAKE_MAX_LEN cells. A snake dies when its
 * head enters a wall, any snake's body (its own included), or a cell that
 * another head enters the same step (head-to-head: both die; swapping places
 * head-on also kills both, each hits the other's old head, now its neck;
 * a live snake is never one cell with no growth owed, so it has a neck).
 * Tails move before heads: entering the cell a tail leaves this step is safe.
 *
 * Death and respawn (per-agent episodes). A dead snake's cells empty at
 * once and it respawns IMMEDIATELY at a random free cell with a random
 * heading: one head cell plus SNAKE_START_LEN - 1 pending growth (it
 * unrolls over the next steps, so spawning needs no free run of cells).
 * Every row is always live: mask = 1 on every step. The death step's row
 * has terminal = 1 and reward -1 — the end of that agent's episode — and
 * its obs is already the respawned snake's first view (PufferLib style; a
 * learner does not bootstrap through a terminal, so it never needs the view
 * of the dead snake).
 *
 * Env episode. P_step returns 1 only at the time limit: after
 * SNAKE_MAX_STEPS steps every row has truncation = 1 (a death on that very
 * step also has terminal = 1). The vector loop then resets the whole grid.
 *
 * Observation (uint8 x 121): the 11 x 11 cells centred on the snake's head,
 * row-major, north (row 0) to south, west to east, NOT rotated with the
 * heading. Codes: 0 empty, 1 wall (cells past the border read as wall),
 * 2 food, 3 own body, 4 own head (always the centre cell), 5 another
 * snake's body, 6 another snake's head.
 *
 * Actions (one int32 per row, 4 values): absolute directions 0 up (north),
 * 1 down (south), 2 left (west), 3 right (east). The reverse of the current
 * heading (into the neck) means "keep going straight".
 *
 * Rewards: +1 for eating food, -1 for dying (a snake that reaches food and
 * dies on the same step, head-to-head, gets -1 only), 0 otherwise.
 *
 * Layout. The grid is a uint8 occupancy array inside the struct, padded
 * with SNAKE_PAD wall cells on every side so (1) collision tests are one
 * load and (2) the view window never needs a bounds check. Each snake's
 * body is a fixed-capacity ring buffer of grid indices in the struct. No
 * heap, no assets: everything an env needs is in its struct. Integer logic
 * only, so all backends agree bit for bit.
 */
#ifndef SHOAL_SNAKE_H
#define SHOAL_SNAKE_H

#include "../shoal_env.h"

#define SNAKE_SIZE 32        /* playable cells per side */
#define SNAKE_COUNT 8        /* snakes (= agents) per env */
#define SNAKE_FOOD 16        /* food items kept on the grid */
#define SNAKE_MAX_LEN 64     /* ring capacity; a power of two (index masking) */
#define SNAKE_START_LEN 3    /* cells a new snake grows to */
#define SNAKE_MAX_STEPS 1000 /* env time limit */
#define SNAKE_VIEW 11        /* obs window side */
#define SNAKE_RADIUS (SNAKE_VIEW / 2)
#define SNAKE_PAD SNAKE_RADIUS /* wall border thick enough for any window */
/* Row stride: a row's right pad doubles as the next row's left pad (both
 * are wall), so a row needs only SNAKE_PAD pad cells; PAD whole pad rows
 * above and below, and PAD cells more for the last row's right pad. */
#define SNAKE_STRIDE (SNAKE_SIZE + SNAKE_PAD)
#define SNAKE_CELLS ((SNAKE_SIZE + 2 * SNAKE_PAD) * SNAKE_STRIDE + SNAKE_PAD)

/* Grid cell values. Snake i's body is 4 + 2i and its head 5 + 2i, so
 * (v | 1) == 5 + 2i picks out both of snake i's cells in one compare. */
enum {
    SNAKE_CELL_EMPTY = 0,
    SNAKE_CELL_WALL = 1,
    SNAKE_CELL_FOOD = 2,
    SNAKE_CELL_BODY0 = 4,
    SNAKE_CELL_HEAD0 = 5,
};

/* Observation codes. */
enum {
    SNAKE_OBS_EMPTY = 0,
    SNAKE_OBS_WALL = 1,
    SNAKE_OBS_FOOD = 2,
    SNAKE_OBS_OWN_BODY = 3,
    SNAKE_OBS_OWN_HEAD = 4,
    SNAKE_OBS_OTHER_BODY = 5,
    SNAKE_OBS_OTHER_HEAD = 6,
};

enum { SNAKE_UP = 0, SNAKE_DOWN = 1, SNAKE_LEFT = 2, SNAKE_RIGHT = 3 };

typedef uint8_t snake_obs_t;
typedef int32_t snake_act_t;
enum {
    snake_agents = SNAKE_COUNT,
    snake_obs_size = SNAKE_VIEW * SNAKE_VIEW,
    snake_act_size = 1,
    snake_max_steps = SNAKE_MAX_STEPS
};
/* Every obs element is one of the SNAKE_OBS_ codes; one action of 4 (SNAKE_UP ..). */
static const snake_obs_t snake_obs_low[] = {SNAKE_OBS_EMPTY}, snake_obs_high[] = {SNAKE_OBS_OTHER_HEAD};
static const snake_act_t snake_act_nvec[] = {4};

typedef struct {
    uint16_t body[SNAKE_MAX_LEN]; /* grid indices; body[head] is the head */
    uint8_t head;                 /* ring index of the head */
    uint8_t length;               /* cells on the grid, 1..SNAKE_MAX_LEN */
    uint8_t grow;                 /* growth still owed (tail waits) */
    uint8_t dir;                  /* heading, a SNAKE_UP.. value */
} snake_snake;

typedef struct {
    uint8_t grid[SNAKE_CELLS];
    snake_snake snakes[SNAKE_COUNT];
    int32_t steps; /* steps taken in this episode */
    int32_t pad_;
    shoal_rng rng;
} snake_env;

/* Grid index offset of one move in each direction. */
SHOAL_FN int snake_delta(int dir) {
    return dir == SNAKE_UP ? -SNAKE_STRIDE
         : dir == SNAKE_DOWN ? SNAKE_STRIDE
         : dir == SNAKE_LEFT ? -1 : 1;
}

SHOAL_FN int snake_cell_index(int x, int y) {
    return (y + SNAKE_PAD) * SNAKE_STRIDE + x + SNAKE_PAD;
}

/* A uniformly random empty playable cell. The grid is never more than about
 * half full (8 x 64 body cells + 16 food of 1024), so rejection sampling
 * ends within a couple of tries; the scan is a safety net that bounds it. */
SHOAL_FN int snake_random_empty_cell(snake_env* env) {
    for (int tries = 0; tries < 64; tries++) {
        const int k = (int)shoal_rng_below(&env->rng, SNAKE_SIZE * SNAKE_SIZE);
        const int cell = snake_cell_index(k % SNAKE_SIZE, k / SNAKE_SIZE);
        if (env->grid[cell] == SNAKE_CELL_EMPTY) return cell;
    }
    const int start = (int)shoal_rng_below(&env->rng, SNAKE_SIZE * SNAKE_SIZE);
    for (int j = 0; j < SNAKE_SIZE * SNAKE_SIZE; j++) {
        const int k = (start + j) % (SNAKE_SIZE * SNAKE_SIZE);
        const int cell = snake_cell_index(k % SNAKE_SIZE, k / SNAKE_SIZE);
        if (env->grid[cell] == SNAKE_CELL_EMPTY) return cell;
    }
    return -1; /* unreachable with these constants */
}

SHOAL_FN void snake_spawn(snake_env* env, int i) {
    snake_snake* s = &env->snakes[i];
    const int cell = snake_random_empty_cell(env);
    s->head = 0;
    s->body[0] = (uint16_t)cell;
    s->length = 1;
    s->grow = SNAKE_START_LEN - 1;
    s->dir = (uint8_t)shoal_rng_below(&env->rng, 4);
    env->grid[cell] = (uint8_t)(SNAKE_CELL_HEAD0 + 2 * i);
}

SHOAL_FN void snake_spawn_food(snake_env* env) {
    env->grid[snake_random_empty_cell(env)] = SNAKE_CELL_FOOD;
}

/* Unaligned 8-byte load / store. On the GPU a misaligned wide access
 * faults, so there it is byte by byte (little-endian, as on the host). */
SHOAL_FN uint64_t snake_load8(const uint8_t* p) {
#ifdef __CUDA_ARCH__
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
#else
    uint64_t v;
    __builtin_memcpy(&v, p, 8);
    return v;
#endif
}

SHOAL_FN void snake_store8(uint8_t* p, uint64_t v) {
#ifdef __CUDA_ARCH__
    for (int k = 0; k < 8; k++) p[k] = (uint8_t)(v >> (8 * k));
#else
    __builtin_memcpy(p, &v, 8);
#endif
}

/* snake_write_obs covers a row with two 8-cell words. */
typedef char snake_view_fits_two_words[SNAKE_VIEW >= 8 && SNAKE_VIEW <= 16 ? 1 : -1];
/* Cell values must stay below 32 for snake_obs8's lane arithmetic. */
typedef char snake_cells_fit_lanes[SNAKE_CELL_HEAD0 + 2 * (SNAKE_COUNT - 1) < 32 ? 1 : -1];

#define SNAKE_LANES(b) (0x0101010101010101ULL * (uint64_t)(b))

/* Eight grid cells to eight obs codes at once (SWAR: one byte per lane;
 * every lane value is below 32, so no lane carries into the next):
 *   v < 4 (empty, wall, food) -> v
 *   snake cell                -> 5 body / 6 head, minus 2 if it is own. */
SHOAL_FN uint64_t snake_obs8(uint64_t v, uint64_t own_lanes) {
    const uint64_t high = SNAKE_LANES(0x80);
    const uint64_t is_snake = ((v + SNAKE_LANES(0x7C)) & high) >> 7;      /* v >= 4 */
    const uint64_t not_own = (((v | SNAKE_LANES(1)) ^ own_lanes) + SNAKE_LANES(0x7F)) & high;
    const uint64_t is_own = (not_own ^ high) >> 7;                        /* (v|1) == own */
    const uint64_t snake_code = SNAKE_LANES(5) + (v & SNAKE_LANES(1)) - (is_own << 1);
    const uint64_t keep = is_snake * 0xFF;                                 /* 0xFF per snake lane */
    return (v & ~keep) | (snake_code & keep);
}

/* Agent i's view: the window around its head, as obs codes. Each 11-cell
 * row is two overlapping 8-cell words (cells 0-7 and 3-10); the wall pad
 * keeps every read inside the grid. */
SHOAL_FN void snake_write_obs(const snake_env* env, int i, uint8_t* obs) {
    const snake_snake* s = &env->snakes[i];
    const uint8_t* src = env->grid + s->body[s->head] - SNAKE_RADIUS * SNAKE_STRIDE - SNAKE_RADIUS;
    const uint64_t own = SNAKE_LANES(SNAKE_CELL_HEAD0 + 2 * i);
    for (int r = 0; r < SNAKE_VIEW; r++) {
        const uint8_t* row = src + r * SNAKE_STRIDE;
        uint8_t* out = obs + r * SNAKE_VIEW;
        const uint64_t left = snake_obs8(snake_load8(row), own);
        const uint64_t right = snake_obs8(snake_load8(row + SNAKE_VIEW - 8), own);
        snake_store8(out, left);
        snake_store8(out + SNAKE_VIEW - 8, right);
    }
}

SHOAL_FN void snake_seed(snake_env* env, uint64_t seed) {
    shoal_rng_seed(&env->rng, seed);
}

SHOAL_FN void snake_reset(snake_env* env, uint8_t* obs, uint8_t* mask) {
    for (int k = 0; k < SNAKE_CELLS; k++) env->grid[k] = SNAKE_CELL_WALL;
    for (int y = 0; y < SNAKE_SIZE; y++)
        for (int x = 0; x < SNAKE_SIZE; x++) env->grid[snake_cell_index(x, y)] = SNAKE_CELL_EMPTY;
    for (int i = 0; i < SNAKE_COUNT; i++) snake_spawn(env, i);
    for (int f = 0; f < SNAKE_FOOD; f++) snake_spawn_food(env);
    env->steps = 0;
    for (int i = 0; i < SNAKE_COUNT; i++) {
        snake_write_obs(env, i, obs + i * snake_obs_size);
        mask[i] = 1;
    }
}

SHOAL_FN int snake_step(snake_env* env, const int32_t* act, uint8_t* obs,
                        float* rew, uint8_t* term, uint8_t* trunc,
                        uint8_t* mask) {
    int next[SNAKE_COUNT];
    uint8_t eats[SNAKE_COUNT];
    uint8_t dead[SNAKE_COUNT];

    /* 1. Heading, target cell, and the tail: it leaves its cell before any
     * head arrives unless the snake grows this step. */
    for (int i = 0; i < SNAKE_COUNT; i++) {
        snake_snake* s = &env->snakes[i];
        int dir = act[i] & 3; /* the pool validates actions; & 3 keeps a bad one in range */
        if ((dir ^ 1) == s->dir) dir = s->dir; /* up^1 = down, left^1 = right: reversing */
        s->dir = (uint8_t)dir;
        const int head = s->body[s->head];
        next[i] = head + snake_delta(dir);
        eats[i] = env->grid[next[i]] == SNAKE_CELL_FOOD;
        env->grid[head] = (uint8_t)(SNAKE_CELL_BODY0 + 2 * i); /* old head is body now */
        s->grow += eats[i];
        if (s->grow > 0 && s->length < SNAKE_MAX_LEN) {
            s->grow -= 1; /* tail stays: the snake is one longer after the push */
        } else {
            s->grow = 0; /* at full length growth is forfeited */
            const int tail = (s->head - s->length + 1) & (SNAKE_MAX_LEN - 1);
            env->grid[s->body[tail]] = SNAKE_CELL_EMPTY;
            s->length -= 1;
        }
    }

    /* 2. Who dies: the target holds a wall or a body after the tails moved,
     * or another head goes there too. */
    for (int i = 0; i < SNAKE_COUNT; i++) {
        const uint8_t v = env->grid[next[i]];
        dead[i] = v != SNAKE_CELL_EMPTY && v != SNAKE_CELL_FOOD;
    }
    for (int i = 0; i < SNAKE_COUNT; i++)
        for (int j = i + 1; j < SNAKE_COUNT; j++)
            if (next[i] == next[j]) dead[i] = dead[j] = 1;

    /* 3. Survivors move their heads in. */
    int eaten = 0;
    for (int i = 0; i < SNAKE_COUNT; i++) {
        rew[i] = 0.0f;
        term[i] = 0;
        if (dead[i]) continue;
        snake_snake* s = &env->snakes[i];
        s->head = (uint8_t)((s->head + 1) & (SNAKE_MAX_LEN - 1));
        s->body[s->head] = (uint16_t)next[i];
        s->length += 1;
        env->grid[next[i]] = (uint8_t)(SNAKE_CELL_HEAD0 + 2 * i);
        rew[i] = (float)eats[i];
        eaten += eats[i];
    }

    /* 4. The dead leave the grid (all of them first, so respawns can use
     * the freed cells), then respawn; eaten food is replaced last. */
    for (int i = 0; i < SNAKE_COUNT; i++) {
        if (!dead[i]) continue;
        snake_snake* s = &env->snakes[i];
        for (int k = 0; k < s->length; k++)
            env->grid[s->body[(s->head - k) & (SNAKE_MAX_LEN - 1)]] = SNAKE_CELL_EMPTY;
        rew[i] = -1.0f;
        term[i] = 1;
    }
    for (int i = 0; i < SNAKE_COUNT; i++)
        if (dead[i]) snake_spawn(env, i);
    for (int f = 0; f < eaten; f++) snake_spawn_food(env);

    env->steps += 1;
    const uint8_t truncated = env->steps >= SNAKE_MAX_STEPS;
    for (int i = 0; i < SNAKE_COUNT; i++) {
        snake_write_obs(env, i, obs + i * snake_obs_size);
        trunc[i] = truncated;
        mask[i] = 1;
    }
    return truncated;
}

/* ---- Host-only helpers for the binding: heuristic policy, rendering ---- */
#ifndef __CUDACC__

/* Scripted policy for snake i: among the moves that are not immediately
 * fatal (target empty or food, and no other head adjacent to it, which
 * risks a head-to-head), prefer a target with a free neighbour (not a dead
 * end), then the one closest (Manhattan) to the nearest food in view; with
 * no food in view, prefer going straight. If every move is fatal, go
 * straight. */
static int snake_heuristic_action(const snake_env* env, int i) {
    const snake_snake* s = &env->snakes[i];
    const int head = s->body[s->head];
    int food = -1, best_food_dist = 1 << 30;
    for (int dy = -SNAKE_RADIUS; dy <= SNAKE_RADIUS; dy++)
        for (int dx = -SNAKE_RADIUS; dx <= SNAKE_RADIUS; dx++) {
            const int cell = head + dy * SNAKE_STRIDE + dx;
            const int d = (dx < 0 ? -dx : dx) + (dy < 0 ? -dy : dy);
            if (env->grid[cell] == SNAKE_CELL_FOOD && d < best_food_dist) {
                best_food_dist = d;
                food = cell;
            }
        }
    const uint8_t own_head = (uint8_t)(SNAKE_CELL_HEAD0 + 2 * i);
    int best = s->dir, best_score = -(1 << 30);
    for (int dir = 0; dir < 4; dir++) {
        if ((dir ^ 1) == s->dir) continue; /* reversing means straight */
        const int cell = head + snake_delta(dir);
        const uint8_t v = env->grid[cell];
        if (v != SNAKE_CELL_EMPTY && v != SNAKE_CELL_FOOD) continue;
        int free_neighbours = 0, head_risk = 0;
        for (int d2 = 0; d2 < 4; d2++) {
            const uint8_t w = env->grid[cell + snake_delta(d2)];
            free_neighbours += w == SNAKE_CELL_EMPTY || w == SNAKE_CELL_FOOD;
            head_risk |= w >= SNAKE_CELL_HEAD0 && (w & 1) && w != own_head;
        }
        int score = 0;
        if (!head_risk) score += 1 << 20;
        if (free_neighbours > 0) score += 1 << 19;
        if (food >= 0) {
            const int fx = food % SNAKE_STRIDE, fy = food / SNAKE_STRIDE;
            const int cx = cell % SNAKE_STRIDE, cy = cell / SNAKE_STRIDE;
            score -= (fx > cx ? fx - cx : cx - fx) + (fy > cy ? fy - cy : cy - fy);
        } else {
            score += dir == s->dir;
        }
        if (score > best_score) {
            best_score = score;
            best = dir;
        }
    }
    return best;
}

/* RGB: each playable cell and the one-cell wall ring round it as a
 * SNAKE_PIXELS-square block. */
#define SNAKE_PIXELS 8
#define SNAKE_RENDER_SIDE ((SNAKE_SIZE + 2) * SNAKE_PIXELS)

static const uint8_t snake_colours[SNAKE_COUNT][3] = {
    {230, 25, 75}, {60, 180, 75}, {255, 225, 25}, {0, 130, 200},
    {245, 130, 48}, {145, 30, 180}, {70, 240, 240}, {240, 50, 230},
};

static void snake_cell_rgb(uint8_t v, uint8_t rgb[3]) {
    if (v == SNAKE_CELL_EMPTY) { rgb[0] = 20; rgb[1] = 20; rgb[2] = 20; }
    else if (v == SNAKE_CELL_WALL) { rgb[0] = 110; rgb[1] = 110; rgb[2] = 110; }
    else if (v == SNAKE_CELL_FOOD) { rgb[0] = 255; rgb[1] = 255; rgb[2] = 255; }
    else {
        const int i = (v - SNAKE_CELL_BODY0) >> 1;
        const int is_head = v & 1;
        for (int c = 0; c < 3; c++) /* bodies at 60%, heads full */
            rgb[c] = is_head ? snake_colours[i][c] : (uint8_t)(snake_colours[i][c] * 3 / 5);
    }
}

static void snake_render_rgb(const snake_env* env, uint8_t* out) {
    for (int cy = 0; cy < SNAKE_SIZE + 2; cy++)
        for (int cx = 0; cx < SNAKE_SIZE + 2; cx++) {
            uint8_t rgb[3];
            snake_cell_rgb(env->grid[snake_cell_index(cx - 1, cy - 1)], rgb);
            for (int py = 0; py < SNAKE_PIXELS; py++)
                for (int px = 0; px < SNAKE_PIXELS; px++) {
                    /* a one-pixel dark gap keeps neighbouring cells apart */
                    const int gap = (py == SNAKE_PIXELS - 1 || px == SNAKE_PIXELS - 1) &&
                                    env->grid[snake_cell_index(cx - 1, cy - 1)] >= SNAKE_CELL_BODY0;
                    uint8_t* p = out + 3 * ((cy * SNAKE_PIXELS + py) * SNAKE_RENDER_SIDE +
                                            cx * SNAKE_PIXELS + px);
                    for (int c = 0; c < 3; c++) p[c] = gap ? (uint8_t)(rgb[c] / 2) : rgb[c];
                }
        }
}

/* Text: '#' wall, '.' empty, '*' food, snake i's body 'a' + i, head 'A' + i;
 * one line per row (SNAKE_SIZE + 2 lines of SNAKE_SIZE + 2 chars + '\n'). */
#define SNAKE_TEXT_CHARS ((SNAKE_SIZE + 2) * (SNAKE_SIZE + 3))

static void snake_render_text(const snake_env* env, char* out) {
    int k = 0;
    for (int cy = 0; cy < SNAKE_SIZE + 2; cy++) {
        for (int cx = 0; cx < SNAKE_SIZE + 2; cx++) {
            const uint8_t v = env->grid[snake_cell_index(cx - 1, cy - 1)];
            out[k++] = v == SNAKE_CELL_EMPTY ? '.'
                     : v == SNAKE_CELL_WALL ? '#'
                     : v == SNAKE_CELL_FOOD ? '*'
                     : (char)(((v & 1) ? 'A' : 'a') + ((v - SNAKE_CELL_BODY0) >> 1));
        }
        out[k++] = '\n';
    }
}

#endif /* __CUDACC__ */

#endif /* SHOAL_SNAKE_H */
