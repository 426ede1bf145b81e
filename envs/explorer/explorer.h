/* explorer.h — Explorer: megastep-style navigation in generated floorplans.
 *
 * World. A 16 x 16 floorplan of rooms: axis-aligned wall segments on integer
 * coordinates, every inner wall pierced by one door 1 unit wide. 128
 * floorplans are generated once per process from fixed seeds (the shared
 * assets below); each episode picks one with the env's RNG.
 *
 * Agents. EXPLORER_AGENTS (4) per env, circles of radius 0.25 with one of 32
 * headings (11.25 degrees apart). A move that would overlap a wall or bring
 * two agents closer while they overlap does not happen (the agent stays put).
 *
 * Action (int32 x2, MultiDiscrete [3, 3]):
 *     [0] move: 0 stay, 1 forward 0.2, 2 back 0.1
 *     [1] turn: 0 none, 1 left (counter-clockwise), 2 right
 * The turn is applied first, then the move along the new heading.
 *
 * Observation (float32 x68, one row per agent):
 *     [0, 32)   depth: distance along 32 rays spread over a 90 degree field of
 *               view, ray 0 leftmost, divided by the map diagonal (0, 1]
 *     [32, 64)  what each ray hit: (colour + 1) / 9, colour 0..7 for a wall
 *               (drawn per wall at generation), 8 for another agent
 *     64        forward speed of the last step / 0.2: 1, 0 (stayed), -0.5
 *     65        turn of the last step: 1 left, 0, -1 right
 *     PointGoal:
 *     66, 67    the goal in the agent's frame (forward, left) / map diagonal
 *     Explore:
 *     66        fraction of the map's cells this agent has seen
 *     67        fraction of the episode elapsed
 * Rays also see other agents (as circles) but not goals.
 *
 * Tasks. One header, two tasks, chosen at compile time by EXPLORER_TASK
 * (obs size, rewards and termination are fixed per compiled env, and envs
 * are registered per folder): envs/explorer/ compiles this header with the
 * default, Explore; envs/explorer_pointgoal/explorer_pointgoal.h defines
 * EXPLORER_TASK as PointGoal, includes this header and renames the entry
 * points to its own prefix. Both bindings share envs/explorer/explorer_binding.pxi.
 *
 * Explore rewards 0.05 for every cell of a 16 x 16 grid over the map that the
 * agent sees for the first time this episode; a cell is seen when one of the
 * agent's rays ends in it or the agent's centre enters it. Per-agent seen
 * bitmaps live in the env struct. No termination.
 *
 * PointGoal gives every agent a goal point in a random room. Reward: the
 * decrease of the straight-line distance to the goal, plus 5 on reaching it
 * (centre within 0.5). A reached goal is replaced by a new one; after the
 * third the agent terminates and leaves the world (its later rows are
 * masked out and zero; other agents neither see it nor bump into it).
 *
 * Episode end. Every episode is truncated after 500 steps (every row
 * reported on that step gets truncated = 1, terminated too or not, as
 * gymnasium's TimeLimit). PointGoal episodes also end when every
 * agent has terminated.
 */
#ifndef SHOAL_EXPLORER_H
#define SHOAL_EXPLORER_H

#include "../shoal_env.h"

#define EXPLORER_TASK_EXPLORE 0
#define EXPLORER_TASK_POINTGOAL 1
#ifndef EXPLORER_TASK
#define EXPLORER_TASK EXPLORER_TASK_EXPLORE
#endif

#define EXPLORER_AGENTS 4
#define EXPLORER_RAYS 32
#define EXPLORER_HEADINGS 32
#define EXPLORER_FOV 1.57079632679489661923f /* 90 degrees */
#define EXPLORER_MAP 16                       /* side of the square map */
#define EXPLORER_RANGE 22.627417f             /* map diagonal: the longest ray */
#define EXPLORER_RADIUS 0.25f
#define EXPLORER_FORWARD 0.2f
#define EXPLORER_BACKWARD 0.1f
#define EXPLORER_MAX_STEPS 500
#define EXPLORER_COLOURS 8                    /* wall colours; agents are colour 8 */

#define EXPLORER_GRID 16                      /* seen-cell grid, 1 x 1 cells */
#define EXPLORER_GRID_WORDS (EXPLORER_GRID * EXPLORER_GRID / 32)
#define EXPLORER_SEEN_REWARD 0.05f

#define EXPLORER_GOAL_RADIUS 0.5f
#define EXPLORER_GOAL_BONUS 5.0f
#define EXPLORER_GOALS 3                      /* goals per agent and episode */
#define EXPLORER_GOAL_MIN_DIST 3.0f

/* Floorplan generator and assets. */
#define EXPLORER_PLANS 128
#define EXPLORER_MAX_WALLS 64
#define EXPLORER_MAX_ROOMS 32
#define EXPLORER_MIN_ROOM 3                   /* rooms are at least 3 x 3 */

#define EXPLORER_RENDER_SCALE 16              /* pixels per map unit */
#define EXPLORER_RENDER_H (EXPLORER_MAP * EXPLORER_RENDER_SCALE)
#define EXPLORER_RENDER_W (EXPLORER_MAP * EXPLORER_RENDER_SCALE)

typedef float explorer_obs_t;
typedef int32_t explorer_act_t;
enum {
    explorer_agents = EXPLORER_AGENTS,
    explorer_obs_size = 2 * EXPLORER_RAYS + 4,
    explorer_act_size = 2,
    explorer_max_steps = EXPLORER_MAX_STEPS
};
enum { EXPLORER_OBS_DEPTH = 0, EXPLORER_OBS_COLOUR = EXPLORER_RAYS,
       EXPLORER_OBS_SPEED = 2 * EXPLORER_RAYS, EXPLORER_OBS_TURN, EXPLORER_OBS_TASK0,
       EXPLORER_OBS_TASK1 };
/* Obs bounds per element (the layout above): depth and colour in [0, 1],
 * the last forward speed in [-0.5, 1] (back is half speed), the last turn in
 * [-1, 1], the task pair in [0, 1] (Explore) or [-1, 1] (PointGoal: the goal
 * in the agent's frame). Actions: move (stay / forward / back), turn (none /
 * left / right). */
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
#define EXPLORER_TASK_LOW -1.0f
#else
#define EXPLORER_TASK_LOW 0.0f
#endif
static const explorer_obs_t explorer_obs_low[] = {
    SHOAL_REPEAT_32(0.0f), SHOAL_REPEAT_32(0.0f), /* depth, colour: 32 = EXPLORER_RAYS each */
    -0.5f, -1.0f, EXPLORER_TASK_LOW, EXPLORER_TASK_LOW};
static const explorer_obs_t explorer_obs_high[] = {1.0f};
static const explorer_act_t explorer_act_nvec[] = {3, 3};

/* ---- shared assets: every floorplan, plus direction tables --------------
 * Every wall is axis-aligned, which makes a ray-wall test one multiply by a
 * tabulated 1/direction plus range checks. The hot path reads the walls
 * split by orientation (vertical: x, y range; horizontal: y, x range) as
 * structure-of-arrays, so the ray loop (walls outer, rays inner)
 * vectorises. The generic segment arrays serve rendering and tests. */
typedef struct {
    int32_t num_walls, num_rooms;
    float wall_x0[EXPLORER_MAX_WALLS], wall_y0[EXPLORER_MAX_WALLS];
    float wall_ex[EXPLORER_MAX_WALLS], wall_ey[EXPLORER_MAX_WALLS]; /* end - start */
    int32_t wall_colour[EXPLORER_MAX_WALLS];
    int32_t num_vwalls, num_hwalls;
    float vwall_x[EXPLORER_MAX_WALLS], vwall_lo[EXPLORER_MAX_WALLS], vwall_hi[EXPLORER_MAX_WALLS];
    float hwall_y[EXPLORER_MAX_WALLS], hwall_lo[EXPLORER_MAX_WALLS], hwall_hi[EXPLORER_MAX_WALLS];
    int32_t vwall_colour[EXPLORER_MAX_WALLS], hwall_colour[EXPLORER_MAX_WALLS];
    float room_x0[EXPLORER_MAX_ROOMS], room_y0[EXPLORER_MAX_ROOMS];
    float room_x1[EXPLORER_MAX_ROOMS], room_y1[EXPLORER_MAX_ROOMS];
} explorer_plan;

typedef struct {
    explorer_plan plans[EXPLORER_PLANS];
    /* Headings are indices, so every direction is a table lookup: no
     * trigonometry on the hot path, and identical values on CPU and GPU. */
    float heading_dx[EXPLORER_HEADINGS], heading_dy[EXPLORER_HEADINGS];
    float ray_dx[EXPLORER_HEADINGS][EXPLORER_RAYS];
    float ray_dy[EXPLORER_HEADINGS][EXPLORER_RAYS];
    /* 1 / direction: ray angles sit half a step off the heading grid, so no
     * component is ever zero. */
    float ray_inv_dx[EXPLORER_HEADINGS][EXPLORER_RAYS];
    float ray_inv_dy[EXPLORER_HEADINGS][EXPLORER_RAYS];
} explorer_assets;

SHOAL_ASSETS_STORAGE(explorer, explorer_assets)  /* see shoal_env.h */
#define EXPLORER_ASSETS SHOAL_ASSETS_OF(explorer)

/* ---- env state ----------------------------------------------------------- */
typedef struct {
    float x, y;
    int32_t heading;        /* 0..EXPLORER_HEADINGS-1, angle = heading * 2pi / 32 */
    int32_t active;         /* present in the world */
    float last_speed;       /* obs[64] */
    float last_turn;        /* obs[65] */
    float goal_x, goal_y;   /* PointGoal */
    float goal_dist;        /* distance to the goal after the last step */
    int32_t goals_reached;
    int32_t seen_count;     /* Explore: cells set in `seen` */
    uint32_t seen[EXPLORER_GRID_WORDS];
} explorer_agent;

typedef struct {
    explorer_agent agents[EXPLORER_AGENTS];
    int32_t plan_id;
    int32_t steps;          /* steps taken in this episode */
    shoal_rng rng;
} explorer_env;

SHOAL_FN void explorer_seed(explorer_env* env, uint64_t seed) {
    shoal_rng_seed(&env->rng, seed);
}

/* ---- geometry ------------------------------------------------------------ */

/* Cast the agent's rays against the plan's walls and the other present
 * agents: per ray the hit distance and the colour of what was hit. */
SHOAL_FN void explorer_cast(const explorer_env* env, const explorer_plan* plan, int self,
                            float* dist, int32_t* colour) {
    const explorer_assets* assets = EXPLORER_ASSETS;
    const explorer_agent* me = &env->agents[self];
    const float ox = me->x, oy = me->y;
    const float* dx = assets->ray_dx[me->heading];
    const float* dy = assets->ray_dy[me->heading];
    float best[EXPLORER_RAYS];
    int32_t hit[EXPLORER_RAYS];
    for (int r = 0; r < EXPLORER_RAYS; r++) {
        best[r] = EXPLORER_RANGE;
        hit[r] = 0;
    }
    /* A vertical wall x = X, lo <= y <= hi meets ray o + t d at
     * t = (X - ox) / dx if oy + t dy lies in [lo, hi] (horizontal walls
     * likewise with x and y swapped). Branch-free so it vectorises. */
    const float* inv_dx = assets->ray_inv_dx[me->heading];
    const float* inv_dy = assets->ray_inv_dy[me->heading];
    for (int w = 0; w < plan->num_vwalls; w++) {
        const float wx = plan->vwall_x[w] - ox;
        const float lo = plan->vwall_lo[w] - oy, hi = plan->vwall_hi[w] - oy;
        const int32_t c = plan->vwall_colour[w];
        for (int r = 0; r < EXPLORER_RAYS; r++) {
            const float t = wx * inv_dx[r];
            const float along = t * dy[r];
            const int closer = (t > 0.0f) & (along >= lo) & (along <= hi) & (t < best[r]);
            best[r] = closer ? t : best[r];
            hit[r] = closer ? c : hit[r];
        }
    }
    for (int w = 0; w < plan->num_hwalls; w++) {
        const float wy = plan->hwall_y[w] - oy;
        const float lo = plan->hwall_lo[w] - ox, hi = plan->hwall_hi[w] - ox;
        const int32_t c = plan->hwall_colour[w];
        for (int r = 0; r < EXPLORER_RAYS; r++) {
            const float t = wy * inv_dy[r];
            const float along = t * dx[r];
            const int closer = (t > 0.0f) & (along >= lo) & (along <= hi) & (t < best[r]);
            best[r] = closer ? t : best[r];
            hit[r] = closer ? c : hit[r];
        }
    }
    for (int j = 0; j < EXPLORER_AGENTS; j++) {
        if (j == self || !env->agents[j].active) continue;
        const float px = env->agents[j].x - ox, py = env->agents[j].y - oy;
        const float c = px * px + py * py - EXPLORER_RADIUS * EXPLORER_RADIUS;
        for (int r = 0; r < EXPLORER_RAYS; r++) {
            const float b = px * dx[r] + py * dy[r];
            const float disc = b * b - c;
            if (disc < 0.0f) continue;
            const float t = b - sqrtf(disc);
            if (t > 0.0f && t < best[r]) {
                best[r] = t;
                hit[r] = EXPLORER_COLOURS;
            }
        }
    }
    for (int r = 0; r < EXPLORER_RAYS; r++) {
        dist[r] = best[r];
        colour[r] = hit[r];
    }
}

/* Would agent `self` at (nx, ny) overlap a wall, or move closer to an agent
 * it overlaps? (Moving apart is allowed so overlapping agents can't lock.) */
SHOAL_FN int explorer_blocked(const explorer_env* env, const explorer_plan* plan, int self,
                              float nx, float ny) {
    const float r2 = EXPLORER_RADIUS * EXPLORER_RADIUS;
    for (int w = 0; w < plan->num_vwalls; w++) {
        const float across = nx - plan->vwall_x[w];
        const float along = ny - fminf(fmaxf(ny, plan->vwall_lo[w]), plan->vwall_hi[w]);
        if (across * across + along * along < r2) return 1;
    }
    for (int w = 0; w < plan->num_hwalls; w++) {
        const float across = ny - plan->hwall_y[w];
        const float along = nx - fminf(fmaxf(nx, plan->hwall_lo[w]), plan->hwall_hi[w]);
        if (across * across + along * along < r2) return 1;
    }
    const explorer_agent* me = &env->agents[self];
    for (int j = 0; j < EXPLORER_AGENTS; j++) {
        const explorer_agent* other = &env->agents[j];
        if (j == self || !other->active) continue;
        const float ax = other->x - nx, ay = other->y - ny;
        const float bx = other->x - me->x, by = other->y - me->y;
        const float new_d2 = ax * ax + ay * ay;
        if (new_d2 < 4.0f * EXPLORER_RADIUS * EXPLORER_RADIUS && new_d2 < bx * bx + by * by)
            return 1;
    }
    return 0;
}

SHOAL_FN int explorer_cell(float x, float y) {
    int cx = (int)x, cy = (int)y; /* x, y >= 0 inside the map: truncation is floor */
    cx = cx < 0 ? 0 : cx >= EXPLORER_GRID ? EXPLORER_GRID - 1 : cx;
    cy = cy < 0 ? 0 : cy >= EXPLORER_GRID ? EXPLORER_GRID - 1 : cy;
    return cy * EXPLORER_GRID + cx;
}

/* Mark a cell seen; returns 1 if it was new. */
SHOAL_FN int explorer_see(explorer_agent* agent, int cell) {
    const uint32_t bit = 1u << (cell & 31);
    const int fresh = (agent->seen[cell >> 5] & bit) == 0;
    agent->seen[cell >> 5] |= bit;
    agent->seen_count += fresh;
    return fresh;
}

/* A uniform point in a random room, `margin` away from its walls. */
SHOAL_FN void explorer_random_point(shoal_rng* rng, const explorer_plan* plan, float margin,
                                    float* x, float* y) {
    const int room = (int)shoal_rng_below(rng, (uint32_t)plan->num_rooms);
    *x = shoal_rng_uniform(rng, plan->room_x0[room] + margin, plan->room_x1[room] - margin);
    *y = shoal_rng_uniform(rng, plan->room_y0[room] + margin, plan->room_y1[room] - margin);
}

SHOAL_FN void explorer_new_goal(explorer_env* env, const explorer_plan* plan, explorer_agent* agent) {
    float gx = 0.0f, gy = 0.0f;
    for (int tries = 0; tries < 16; tries++) { /* bounded: the last draw stands */
        explorer_random_point(&env->rng, plan, EXPLORER_GOAL_RADIUS, &gx, &gy);
        const float ddx = gx - agent->x, ddy = gy - agent->y;
        if (ddx * ddx + ddy * ddy >= EXPLORER_GOAL_MIN_DIST * EXPLORER_GOAL_MIN_DIST) break;
    }
    agent->goal_x = gx;
    agent->goal_y = gy;
    const float ddx = gx - agent->x, ddy = gy - agent->y;
    agent->goal_dist = sqrtf(ddx * ddx + ddy * ddy);
}

/* Cast agent `a`'s rays and write its obs row; for Explore, mark what the
 * rays reach and return how many cells were new. */
SHOAL_FN int explorer_observe(explorer_env* env, const explorer_plan* plan, int a, float* obs) {
    float dist[EXPLORER_RAYS];
    int32_t colour[EXPLORER_RAYS];
    explorer_cast(env, plan, a, dist, colour);
    for (int r = 0; r < EXPLORER_RAYS; r++) {
        obs[EXPLORER_OBS_DEPTH + r] = dist[r] * (1.0f / EXPLORER_RANGE);
        obs[EXPLORER_OBS_COLOUR + r] = (float)(colour[r] + 1) * (1.0f / (EXPLORER_COLOURS + 1));
    }
    explorer_agent* agent = &env->agents[a];
    obs[EXPLORER_OBS_SPEED] = agent->last_speed;
    obs[EXPLORER_OBS_TURN] = agent->last_turn;
    int fresh = 0;
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
    const float hx = EXPLORER_ASSETS->heading_dx[agent->heading];
    const float hy = EXPLORER_ASSETS->heading_dy[agent->heading];
    const float gx = agent->goal_x - agent->x, gy = agent->goal_y - agent->y;
    obs[EXPLORER_OBS_TASK0] = (gx * hx + gy * hy) * (1.0f / EXPLORER_RANGE);
    obs[EXPLORER_OBS_TASK1] = (gy * hx - gx * hy) * (1.0f / EXPLORER_RANGE);
#else
    const float* dx = EXPLORER_ASSETS->ray_dx[agent->heading];
    const float* dy = EXPLORER_ASSETS->ray_dy[agent->heading];
    fresh += explorer_see(agent, explorer_cell(agent->x, agent->y));
    for (int r = 0; r < EXPLORER_RAYS; r++) {
        /* Step back a little from the hit so the cell is the one on our side. */
        const float t = dist[r] - 0.05f;
        fresh += explorer_see(agent, explorer_cell(agent->x + t * dx[r], agent->y + t * dy[r]));
    }
    obs[EXPLORER_OBS_TASK0] = (float)agent->seen_count * (1.0f / (EXPLORER_GRID * EXPLORER_GRID));
    obs[EXPLORER_OBS_TASK1] = (float)env->steps * (1.0f / EXPLORER_MAX_STEPS);
#endif
    return fresh;
}

/* ---- reset and step ----------------------------------------------------- */

SHOAL_FN void explorer_reset(explorer_env* env, float* obs, uint8_t* mask) {
    env->plan_id = (int32_t)shoal_rng_below(&env->rng, EXPLORER_PLANS);
    env->steps = 0;
    const explorer_plan* plan = &EXPLORER_ASSETS->plans[env->plan_id];
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        explorer_agent* agent = &env->agents[a];
        float x = 0.0f, y = 0.0f;
        for (int tries = 0; tries < 32; tries++) { /* bounded; overlaps can separate */
            explorer_random_point(&env->rng, plan, EXPLORER_RADIUS + 0.05f, &x, &y);
            int clear = 1;
            for (int j = 0; j < a; j++) {
                const float ddx = env->agents[j].x - x, ddy = env->agents[j].y - y;
                clear &= ddx * ddx + ddy * ddy >= 4.0f * EXPLORER_RADIUS * EXPLORER_RADIUS;
            }
            if (clear) break;
        }
        agent->x = x;
        agent->y = y;
        agent->heading = (int32_t)shoal_rng_below(&env->rng, EXPLORER_HEADINGS);
        agent->active = 1;
        agent->last_speed = 0.0f;
        agent->last_turn = 0.0f;
        agent->goals_reached = 0;
        agent->seen_count = 0;
        for (int k = 0; k < EXPLORER_GRID_WORDS; k++) agent->seen[k] = 0;
        agent->goal_x = agent->goal_y = agent->goal_dist = 0.0f;
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
        explorer_new_goal(env, plan, agent);
#endif
    }
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        explorer_observe(env, plan, a, obs + a * explorer_obs_size); /* start cells: no reward */
        mask[a] = 1;
    }
}

SHOAL_FN int explorer_step(explorer_env* env, const int32_t* act, float* obs, float* rew,
                           uint8_t* term, uint8_t* trunc, uint8_t* mask) {
    const explorer_assets* assets = EXPLORER_ASSETS;
    const explorer_plan* plan = &assets->plans[env->plan_id];
    int was_active[EXPLORER_AGENTS];
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        was_active[a] = env->agents[a].active;
        rew[a] = 0.0f;
        term[a] = 0;
        trunc[a] = 0;
    }
    env->steps += 1;
    const int truncated = env->steps >= EXPLORER_MAX_STEPS;

    /* Move, in agent order (a later agent sees an earlier one's new place). */
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        explorer_agent* agent = &env->agents[a];
        if (!agent->active) continue;
        const int32_t move = act[a * explorer_act_size], turn = act[a * explorer_act_size + 1];
        const int dh = turn == 1 ? 1 : turn == 2 ? -1 : 0;
        agent->heading = (agent->heading + dh + EXPLORER_HEADINGS) % EXPLORER_HEADINGS;
        const float speed = move == 1 ? EXPLORER_FORWARD : move == 2 ? -EXPLORER_BACKWARD : 0.0f;
        int moved = 0;
        if (speed != 0.0f) {
            const float nx = agent->x + speed * assets->heading_dx[agent->heading];
            const float ny = agent->y + speed * assets->heading_dy[agent->heading];
            if (!explorer_blocked(env, plan, a, nx, ny)) {
                agent->x = nx;
                agent->y = ny;
                moved = 1;
            }
        }
        agent->last_speed = moved ? speed * (1.0f / EXPLORER_FORWARD) : 0.0f;
        agent->last_turn = (float)dh;
    }

#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        explorer_agent* agent = &env->agents[a];
        if (!agent->active) continue;
        const float gx = agent->goal_x - agent->x, gy = agent->goal_y - agent->y;
        const float d = sqrtf(gx * gx + gy * gy);
        rew[a] = agent->goal_dist - d;
        agent->goal_dist = d;
        if (d < EXPLORER_GOAL_RADIUS) {
            rew[a] += EXPLORER_GOAL_BONUS;
            agent->goals_reached += 1;
            if (agent->goals_reached >= EXPLORER_GOALS) {
                term[a] = 1;
                agent->active = 0; /* leaves now: others no longer see it */
            } else {
                explorer_new_goal(env, plan, agent);
            }
        }
    }
#endif

    int present = 0;
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        float* row = obs + a * explorer_obs_size;
        if (!was_active[a]) {
            for (int k = 0; k < explorer_obs_size; k++) row[k] = 0.0f;
            mask[a] = 0;
            continue;
        }
        const int fresh = explorer_observe(env, plan, a, row);
#if EXPLORER_TASK == EXPLORER_TASK_EXPLORE
        rew[a] = (float)fresh * EXPLORER_SEEN_REWARD;
#else
        (void)fresh;
#endif
        mask[a] = 1;
        trunc[a] = (uint8_t)truncated;   /* as gymnasium's TimeLimit: terminated on that step too or not */
        present += env->agents[a].active;
    }
    return truncated || present == 0;
}

/* ---- scripted policy (for tests and baselines) ---------------------------
 * From one obs row: if a ray hit lies in the corridor the body would sweep
 * over the next few steps, stop and turn toward the more open half of the
 * view (or on the way it already turns); otherwise go forward, PointGoal
 * turning toward the goal. Rows of
 * absent agents (all zero) get a harmless action. */
#define EXPLORER_LOOKAHEAD 0.7f
#define EXPLORER_CORRIDOR (EXPLORER_RADIUS + 0.05f)
SHOAL_FN void explorer_heuristic(const float* obs, int32_t* act) {
    float left = 0.0f, right = 0.0f;
    int blocked = 0;
    for (int r = 0; r < EXPLORER_RAYS; r++) {
        const float d = obs[EXPLORER_OBS_DEPTH + r] * EXPLORER_RANGE;
        const float angle = EXPLORER_FOV * (0.5f - (r + 0.5f) / EXPLORER_RAYS);
        const float ahead = d * cosf(angle), side = d * sinf(angle);
        blocked |= ahead < EXPLORER_LOOKAHEAD && fabsf(side) < EXPLORER_CORRIDOR;
        if (r < EXPLORER_RAYS / 2) left += d;
        else right += d;
    }
    if (blocked) {
        /* Keep turning the way we already turn (obs[65]): choosing afresh
         * each step can dither left-right forever in a corner. */
        const float last_turn = obs[EXPLORER_OBS_TURN];
        act[0] = 0;
        act[1] = last_turn > 0.0f ? 1 : last_turn < 0.0f ? 2 : left >= right ? 1 : 2;
        return;
    }
    act[0] = 1;
    act[1] = 0;
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
    const float forward = obs[EXPLORER_OBS_TASK0], lateral = obs[EXPLORER_OBS_TASK1];
    const float half_turn = 3.14159265f / EXPLORER_HEADINGS;
    const float angle = atan2f(lateral, forward);
    if (angle > half_turn) act[1] = 1;
    else if (angle < -half_turn) act[1] = 2;
#endif
}

/* ---- host only: asset generation and rendering -------------------------- */
#ifndef __CUDACC__

static void explorer_add_wall(explorer_plan* plan, shoal_rng* rng, float x0, float y0,
                              float x1, float y1) {
    if ((x0 == x1 && y0 == y1) || plan->num_walls >= EXPLORER_MAX_WALLS) return;
    const int w = plan->num_walls++;
    plan->wall_x0[w] = x0;
    plan->wall_y0[w] = y0;
    plan->wall_ex[w] = x1 - x0;
    plan->wall_ey[w] = y1 - y0;
    const int32_t colour = (int32_t)shoal_rng_below(rng, EXPLORER_COLOURS);
    plan->wall_colour[w] = colour;
    if (x0 == x1) {
        const int v = plan->num_vwalls++;
        plan->vwall_x[v] = x0;
        plan->vwall_lo[v] = fminf(y0, y1);
        plan->vwall_hi[v] = fmaxf(y0, y1);
        plan->vwall_colour[v] = colour;
    } else { /* the generator makes axis-aligned walls only */
        const int h = plan->num_hwalls++;
        plan->hwall_y[h] = y0;
        plan->hwall_lo[h] = fminf(x0, x1);
        plan->hwall_hi[h] = fmaxf(x0, x1);
        plan->hwall_colour[h] = colour;
    }
}

/* Binary space partition of the rectangle into rooms. A split puts a wall
 * at an integer coordinate at least MIN_ROOM from both sides, with a door
 * [k, k+1] at an integer k. Later walls end on integer coordinates, so they
 * never land inside an earlier door: every room stays reachable. */
static void explorer_split(explorer_plan* plan, shoal_rng* rng, int x0, int y0, int x1, int y1,
                           int depth) {
    const int w = x1 - x0, h = y1 - y0;
    const int can_v = w >= 2 * EXPLORER_MIN_ROOM, can_h = h >= 2 * EXPLORER_MIN_ROOM;
    /* Big rectangles always split, smaller ones sometimes: rooms of mixed size. */
    const int want = w * h > 48 || (depth < 5 && shoal_rng_below(rng, 3) != 0);
    const int room_budget = EXPLORER_MAX_ROOMS - plan->num_rooms;
    if (!(can_v || can_h) || !want || room_budget < 2 ||
        plan->num_walls + 2 > EXPLORER_MAX_WALLS) {
        const int r = plan->num_rooms++;
        plan->room_x0[r] = (float)x0;
        plan->room_y0[r] = (float)y0;
        plan->room_x1[r] = (float)x1;
        plan->room_y1[r] = (float)y1;
        return;
    }
    const int vertical = can_v && (!can_h || w > h || (w == h && shoal_rng_below(rng, 2)));
    if (vertical) {
        const int sx = x0 + EXPLORER_MIN_ROOM + (int)shoal_rng_below(rng, (uint32_t)(w - 2 * EXPLORER_MIN_ROOM + 1));
        const int door = y0 + (int)shoal_rng_below(rng, (uint32_t)h);
        explorer_add_wall(plan, rng, (float)sx, (float)y0, (float)sx, (float)door);
        explorer_add_wall(plan, rng, (float)sx, (float)(door + 1), (float)sx, (float)y1);
        explorer_split(plan, rng, x0, y0, sx, y1, depth + 1);
        explorer_split(plan, rng, sx, y0, x1, y1, depth + 1);
    } else {
        const int sy = y0 + EXPLORER_MIN_ROOM + (int)shoal_rng_below(rng, (uint32_t)(h - 2 * EXPLORER_MIN_ROOM + 1));
        const int door = x0 + (int)shoal_rng_below(rng, (uint32_t)w);
        explorer_add_wall(plan, rng, (float)x0, (float)sy, (float)door, (float)sy);
        explorer_add_wall(plan, rng, (float)(door + 1), (float)sy, (float)x1, (float)sy);
        explorer_split(plan, rng, x0, y0, x1, sy, depth + 1);
        explorer_split(plan, rng, x0, sy, x1, y1, depth + 1);
    }
}

/* Build the assets (idempotent). Fixed seeds: every process, and later every
 * GPU, gets identical floorplans. */
static void explorer_build_assets(void) {
    if (explorer_assets_ready) return;
    explorer_assets* assets = &explorer_assets_host;
    for (int p = 0; p < EXPLORER_PLANS; p++) {
        explorer_plan* plan = &assets->plans[p];
        shoal_rng rng;
        shoal_rng_seed(&rng, 0xF100D0000ULL + (uint64_t)p);
        plan->num_walls = plan->num_vwalls = plan->num_hwalls = 0;
        plan->num_rooms = 0;
        const float m = (float)EXPLORER_MAP;
        explorer_add_wall(plan, &rng, 0.0f, 0.0f, m, 0.0f);
        explorer_add_wall(plan, &rng, m, 0.0f, m, m);
        explorer_add_wall(plan, &rng, m, m, 0.0f, m);
        explorer_add_wall(plan, &rng, 0.0f, m, 0.0f, 0.0f);
        explorer_split(plan, &rng, 0, 0, EXPLORER_MAP, EXPLORER_MAP, 0);
    }
    const double two_pi = 6.283185307179586;
    for (int h = 0; h < EXPLORER_HEADINGS; h++) {
        const double heading = two_pi * h / EXPLORER_HEADINGS;
        assets->heading_dx[h] = (float)cos(heading);
        assets->heading_dy[h] = (float)sin(heading);
        for (int r = 0; r < EXPLORER_RAYS; r++) {
            /* ray 0 leftmost: angles decrease from +fov/2 to -fov/2 */
            const double angle = heading + EXPLORER_FOV * (0.5 - (r + 0.5) / EXPLORER_RAYS);
            assets->ray_dx[h][r] = (float)cos(angle);
            assets->ray_dy[h][r] = (float)sin(angle);
            assets->ray_inv_dx[h][r] = (float)(1.0 / cos(angle));
            assets->ray_inv_dy[h][r] = (float)(1.0 / sin(angle));
        }
    }
    explorer_assets_ready = 1;
}

static const uint8_t explorer_wall_rgb[EXPLORER_COLOURS][3] = {
    {230, 80, 70}, {240, 170, 60}, {230, 220, 80}, {120, 200, 90},
    {70, 190, 190}, {80, 130, 230}, {160, 100, 220}, {220, 120, 180}};
static const uint8_t explorer_agent_rgb[EXPLORER_AGENTS][3] = {
    {255, 255, 255}, {255, 140, 0}, {0, 220, 255}, {255, 60, 200}};

static void explorer_put(uint8_t* out, int px, int py, const uint8_t* rgb) {
    if (px < 0 || py < 0 || px >= EXPLORER_RENDER_W || py >= EXPLORER_RENDER_H) return;
    uint8_t* p = out + (py * EXPLORER_RENDER_W + px) * 3;
    p[0] = rgb[0];
    p[1] = rgb[1];
    p[2] = rgb[2];
}

/* Map point -> pixel (y up in the map, down in the image). */
static void explorer_to_pixel(float x, float y, int* px, int* py) {
    *px = (int)floorf(x * EXPLORER_RENDER_SCALE);
    *py = EXPLORER_RENDER_H - 1 - (int)floorf(y * EXPLORER_RENDER_SCALE);
}

static void explorer_disc(uint8_t* out, float x, float y, float radius, const uint8_t* rgb) {
    int cx, cy;
    explorer_to_pixel(x, y, &cx, &cy);
    const int rp = (int)(radius * EXPLORER_RENDER_SCALE + 0.5f);
    for (int oy = -rp; oy <= rp; oy++)
        for (int ox = -rp; ox <= rp; ox++)
            if (ox * ox + oy * oy <= rp * rp) explorer_put(out, cx + ox, cy + oy, rgb);
}

static void explorer_line(uint8_t* out, float x0, float y0, float x1, float y1, int thick,
                          const uint8_t* rgb) {
    const float len = sqrtf((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0));
    const int n = (int)(len * EXPLORER_RENDER_SCALE * 2.0f) + 1;
    for (int k = 0; k <= n; k++) {
        const float s = (float)k / (float)n;
        int px, py;
        explorer_to_pixel(x0 + s * (x1 - x0), y0 + s * (y1 - y0), &px, &py);
        for (int oy = 0; oy < thick; oy++)
            for (int ox = 0; ox < thick; ox++) explorer_put(out, px + ox - thick / 2, py + oy - thick / 2, rgb);
    }
}

/* Top-down RGB: floor (Explore: cells seen by any agent lighter), walls in
 * their colours, each agent's ray hits as dots, goals as squares, agents as
 * discs with a heading tick. out: RENDER_H x RENDER_W x 3 uint8. */
static void explorer_render_rgb(const explorer_env* env, uint8_t* out) {
    const explorer_plan* plan = &EXPLORER_ASSETS->plans[env->plan_id];
    const uint8_t floor_rgb[3] = {40, 40, 48}, seen_rgb[3] = {70, 70, 90};
    for (int py = 0; py < EXPLORER_RENDER_H; py++) {
        for (int px = 0; px < EXPLORER_RENDER_W; px++) {
            const float x = (px + 0.5f) / EXPLORER_RENDER_SCALE;
            const float y = (EXPLORER_RENDER_H - 1 - py + 0.5f) / EXPLORER_RENDER_SCALE;
            const int cell = explorer_cell(x, y);
            int seen = 0;
            for (int a = 0; a < EXPLORER_AGENTS; a++)
                seen |= (env->agents[a].seen[cell >> 5] >> (cell & 31)) & 1;
            explorer_put(out, px, py, seen ? seen_rgb : floor_rgb);
        }
    }
    for (int w = 0; w < plan->num_walls; w++)
        explorer_line(out, plan->wall_x0[w], plan->wall_y0[w], plan->wall_x0[w] + plan->wall_ex[w],
                      plan->wall_y0[w] + plan->wall_ey[w], 3, explorer_wall_rgb[plan->wall_colour[w]]);
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        const explorer_agent* agent = &env->agents[a];
        if (!agent->active) continue;
        const uint8_t* rgb = explorer_agent_rgb[a];
        float dist[EXPLORER_RAYS];
        int32_t colour[EXPLORER_RAYS];
        explorer_cast(env, plan, a, dist, colour);
        for (int r = 0; r < EXPLORER_RAYS; r++) {
            int px, py;
            explorer_to_pixel(agent->x + dist[r] * EXPLORER_ASSETS->ray_dx[agent->heading][r],
                              agent->y + dist[r] * EXPLORER_ASSETS->ray_dy[agent->heading][r], &px, &py);
            explorer_put(out, px, py, rgb);
        }
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
        int gx, gy;
        explorer_to_pixel(agent->goal_x, agent->goal_y, &gx, &gy);
        for (int oy = -3; oy <= 3; oy++)
            for (int ox = -3; ox <= 3; ox++)
                if (ox == -3 || ox == 3 || oy == -3 || oy == 3) explorer_put(out, gx + ox, gy + oy, rgb);
#endif
        explorer_disc(out, agent->x, agent->y, EXPLORER_RADIUS, rgb);
        const uint8_t tick[3] = {0, 0, 0};
        explorer_line(out, agent->x, agent->y,
                      agent->x + EXPLORER_RADIUS * EXPLORER_ASSETS->heading_dx[agent->heading],
                      agent->y + EXPLORER_RADIUS * EXPLORER_ASSETS->heading_dy[agent->heading], 1, tick);
    }
}

/* ASCII view, 4 columns x 2 rows per map unit: '#' walls, '0'..'3' agents,
 * 'a'..'d' their goals (PointGoal), '.' cells seen by any agent (Explore).
 * Returns the length written (at most cap - 1, NUL-terminated). */
#define EXPLORER_TEXT_COLS (EXPLORER_MAP * 4)
#define EXPLORER_TEXT_ROWS (EXPLORER_MAP * 2)
static int explorer_render_text(const explorer_env* env, char* buf, int cap) {
    const explorer_plan* plan = &EXPLORER_ASSETS->plans[env->plan_id];
    char grid[EXPLORER_TEXT_ROWS + 1][EXPLORER_TEXT_COLS + 1];
    for (int row = 0; row <= EXPLORER_TEXT_ROWS; row++) {
        for (int col = 0; col <= EXPLORER_TEXT_COLS; col++) {
            const int cell = explorer_cell((col + 0.5f) / 4.0f, (EXPLORER_TEXT_ROWS - row - 0.5f) / 2.0f);
            int seen = 0;
            for (int a = 0; a < EXPLORER_AGENTS; a++)
                seen |= (env->agents[a].seen[cell >> 5] >> (cell & 31)) & 1;
            grid[row][col] = seen ? '.' : ' ';
        }
    }
    for (int w = 0; w < plan->num_walls; w++) {
        const int n = 64;
        for (int k = 0; k <= n; k++) {
            const float s = (float)k / n;
            const float x = plan->wall_x0[w] + s * plan->wall_ex[w];
            const float y = plan->wall_y0[w] + s * plan->wall_ey[w];
            grid[EXPLORER_TEXT_ROWS - (int)floorf(y * 2.0f + 0.5f)][(int)floorf(x * 4.0f + 0.5f)] = '#';
        }
    }
    for (int a = 0; a < EXPLORER_AGENTS; a++) {
        const explorer_agent* agent = &env->agents[a];
        if (!agent->active) continue;
#if EXPLORER_TASK == EXPLORER_TASK_POINTGOAL
        grid[EXPLORER_TEXT_ROWS - (int)floorf(agent->goal_y * 2.0f + 0.5f)]
            [(int)floorf(agent->goal_x * 4.0f + 0.5f)] = (char)('a' + a);
#endif
        grid[EXPLORER_TEXT_ROWS - (int)floorf(agent->y * 2.0f + 0.5f)]
            [(int)floorf(agent->x * 4.0f + 0.5f)] = (char)('0' + a);
    }
    int len = 0;
    const int line = EXPLORER_TEXT_COLS + 2;
    if (cap < (EXPLORER_TEXT_ROWS + 1) * line + 1) return 0;
    for (int row = 0; row <= EXPLORER_TEXT_ROWS; row++) {
        for (int col = 0; col <= EXPLORER_TEXT_COLS; col++) buf[len++] = grid[row][col];
        buf[len++] = '\n';
    }
    buf[len] = 0;
    return len;
}

#endif /* !__CUDACC__ */

#endif /* SHOAL_EXPLORER_H */
