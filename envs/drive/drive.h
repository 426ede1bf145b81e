/* drive.h — Drive: multi-agent 2D driving on procedurally generated roads,
 * in the spirit of GPUDrive / Waymax but with no dataset.
 *
 * World. Six road maps are generated once per process, deterministically
 * (no RNG at all: fixed geometry), and shared read-only by every env (the
 * assets pattern: one flat POD struct, env->map_id indexes it):
 *   0 straight road, 2 lanes each way      1 winding road, 2 lanes each way
 *   2 four-way intersection, 1 lane each way (straight / left / right paths)
 *   3 four-way intersection, 2 lanes each way (inner: straight+left, outer:
 *     straight+right)
 *   4 roundabout: 2-lane ring (closed lanes) and 4 arms whose entry paths
 *     merge into the ring and leave it 1, 2 or 3 arms later
 *   5 S-bend: two opposite 90-degree curves, 1 lane each way
 * Lanes are polylines with a point every DRIVE_LANE_SPACING m (right-hand
 * traffic). The drivable area is a 1 m raster (within DRIVE_ROAD_HALF_WIDTH
 * of some lane centre). Observed road points are lane-centre samples every
 * 6 m; for every 4 m grid cell the assets keep the 16 samples nearest to the
 * cell centre, so an agent's road observation is one table lookup (no search).
 *
 * Agents. DRIVE_AGENTS rows per env (32). Reset picks a map from the env's
 * RNG, draws how many agents to spawn (A/2 .. A) and how many of them are
 * traffic (0 .. n/4; or all but the first DRIVE_CONTROLLED when that build
 * option is set); rows [0, num_controlled) are controlled by the
 * learner, the next rows are traffic driven by the built-in lane follower
 * (drive_heuristic_action: pure pursuit on its lane, brakes for agents
 * ahead). Traffic rows always have mask 0 (they are not the learner's) but
 * take part in collisions and are seen as partners. Each agent spawns on a
 * random lane point (>= 8 m from others), heading along the lane, speed
 * 2..8 m/s, size 4-5.5 m x 1.8-2.2 m; its goal is the lane point 30..80 m
 * further along. Spawns that find no free spot leave the row absent.
 *
 * Dynamics: kinematic bicycle, float32, dt = 0.1 s, speed in [0, 15] m/s,
 * wheelbase 0.6 * length.
 *
 * Action: one Discrete(35) per row, a = steer_bin * 5 + accel_bin;
 *   steer = (steer_bin - 3) * 0.2 rad  (7 bins, -0.6 .. 0.6)
 *   accel = {-4, -2, 0, 1.5, 3}[accel_bin] m/s^2
 *
 * Observation (float32 x 120, every entry in [-1, 1], ego frame: x forward,
 * y left):
 *   [0..8)    ego: speed/15, goal dx/100, goal dy/100, goal distance/100,
 *             signed lateral offset from own lane centre / 3.5,
 *             cos and sin of heading minus lane heading, fraction of time left
 *   [8..56)   8 nearest partners within 50 m, nearest first, 6 each:
 *             dx/50, dy/50, cos dh, sin dh, speed/15, length/6 (zero-padded)
 *   [56..120) 16 road points (lane-centre samples near the agent), 4 each:
 *             dx/50, dy/50, cos and sin of the lane direction minus heading
 *             (zero-padded; a real point has cos^2 + sin^2 = 1)
 *
 * Reward per controlled agent and step: progress toward the goal
 * (decrease of goal distance / initial goal distance, so a whole trip sums
 * to about 1), +1 on reaching the goal (within 2.5 m), -1 on a collision
 * (two circles per car overlap another car's), -1 on leaving the road (centre
 * off the drivable raster). Any of these three removes the agent: that step
 * its row has reward, terminal = 1, mask = 1 and its final obs; later rows are
 * mask 0 and zero until the env resets. Traffic agents leave the same way.
 *
 * Episode end: terminal when no controlled agent is left; truncated after
 * DRIVE_MAX_STEPS (200) steps (truncation = 1 on every row reported that
 * step, terminated too or not, as gymnasium's TimeLimit).
 */
#ifndef SHOAL_DRIVE_H
#define SHOAL_DRIVE_H

#include "../shoal_env.h"

/* ---- sizes and constants ------------------------------------------------ */
#define DRIVE_AGENTS 32
#ifndef DRIVE_CONTROLLED           /* config (-DDRIVE_CONTROLLED=k when building): */
#define DRIVE_CONTROLLED 0         /* 0: each reset draws 0..n/4 of the n spawned agents as */
#endif                             /* traffic; k > 0: the first k spawned are controlled */
#define DRIVE_MAX_STEPS 200
#define DRIVE_NUM_MAPS 6

#define DRIVE_EGO_FEATS 8
#define DRIVE_PARTNERS 8
#define DRIVE_PARTNER_FEATS 6
#define DRIVE_ROAD_OBS 16
#define DRIVE_ROAD_FEATS 4
#define DRIVE_OBS_SIZE (DRIVE_EGO_FEATS + DRIVE_PARTNERS * DRIVE_PARTNER_FEATS + \
                        DRIVE_ROAD_OBS * DRIVE_ROAD_FEATS)

#define DRIVE_STEER_BINS 7
#define DRIVE_ACCEL_BINS 5
#define DRIVE_NUM_ACTIONS (DRIVE_STEER_BINS * DRIVE_ACCEL_BINS)
#define DRIVE_STEER_STEP 0.2f

#define DRIVE_DT 0.1f
#define DRIVE_MAX_SPEED 15.0f
#define DRIVE_GOAL_RADIUS 2.5f
#define DRIVE_GOAL_REWARD 1.0f
#define DRIVE_COLLISION_PENALTY 1.0f
#define DRIVE_OFFROAD_PENALTY 1.0f
#define DRIVE_PARTNER_RADIUS 50.0f
#define DRIVE_POS_SCALE 50.0f
#define DRIVE_GOAL_SCALE 100.0f
#define DRIVE_LANE_WIDTH 3.5f
#define DRIVE_SPAWN_GAP 8.0f

/* Map geometry: every map lives in [-DRIVE_WORLD_HALF, DRIVE_WORLD_HALF]^2. */
#define DRIVE_WORLD_HALF 100.0f
#define DRIVE_LANE_SPACING 2.0f
#define DRIVE_MAX_LANES 24
#define DRIVE_MAX_LANE_POINTS 160
#define DRIVE_MAX_ROAD_POINTS 1024
#define DRIVE_ROAD_SAMPLE_EVERY 3      /* road obs point every 3 lane points (6 m) */
#define DRIVE_CELL 4.0f                /* road obs lookup grid: 4 m cells */
#define DRIVE_GRID 50                  /* 200 m / 4 m */
#define DRIVE_RASTER 200               /* drivable raster, 1 m cells */
#define DRIVE_ROAD_HALF_WIDTH 2.5f     /* lane half width 1.75 + 0.75 tolerance */
#define DRIVE_ROAD_OBS_RADIUS 40.0f

enum { DRIVE_ABSENT = 0, DRIVE_ALIVE = 1, DRIVE_GONE = 2 };

typedef float drive_obs_t;
typedef int32_t drive_act_t;
enum { drive_agents = DRIVE_AGENTS, drive_obs_size = DRIVE_OBS_SIZE, drive_act_size = 1,
       drive_max_steps = DRIVE_MAX_STEPS };
/* Every obs feature is scaled and clipped into [-1, 1]; one action of
 * DRIVE_NUM_ACTIONS: steer_bin * DRIVE_ACCEL_BINS + accel_bin. */
static const drive_obs_t drive_obs_low[] = {-1.0f}, drive_obs_high[] = {1.0f};
static const drive_act_t drive_act_nvec[] = {DRIVE_NUM_ACTIONS};

/* ---- shared assets: the maps -------------------------------------------- */
typedef struct {
    int32_t num_lanes;
    int32_t num_road_points;
    int16_t lane_len[DRIVE_MAX_LANES];
    uint8_t lane_closed[DRIVE_MAX_LANES];      /* ring lanes: indices wrap */
    float lane_x[DRIVE_MAX_LANES][DRIVE_MAX_LANE_POINTS];
    float lane_y[DRIVE_MAX_LANES][DRIVE_MAX_LANE_POINTS];
    float lane_cos[DRIVE_MAX_LANES][DRIVE_MAX_LANE_POINTS];   /* lane direction */
    float lane_sin[DRIVE_MAX_LANES][DRIVE_MAX_LANE_POINTS];
    float road_x[DRIVE_MAX_ROAD_POINTS], road_y[DRIVE_MAX_ROAD_POINTS];
    float road_cos[DRIVE_MAX_ROAD_POINTS], road_sin[DRIVE_MAX_ROAD_POINTS];
    int16_t cell_points[DRIVE_GRID][DRIVE_GRID][DRIVE_ROAD_OBS];  /* -1 pads */
    uint8_t drivable[DRIVE_RASTER][DRIVE_RASTER];                 /* [iy][ix] */
} drive_map;

typedef struct {
    drive_map maps[DRIVE_NUM_MAPS];
} drive_assets;

SHOAL_ASSETS_STORAGE(drive, drive_assets)  /* see shoal_env.h */
#define DRIVE_ASSETS SHOAL_ASSETS_OF(drive)

/* ---- per-env state -------------------------------------------------------- */
typedef struct {
    float x, y, heading, speed;
    float cos_h, sin_h;          /* of heading, refreshed whenever it changes */
    float length, width;
    float goal_x, goal_y;
    float goal_dist;             /* distance to goal after the last step */
    float start_goal_dist;       /* normaliser of the progress reward */
    int16_t lane, lane_idx;      /* own lane and nearest point on it */
    uint8_t status;              /* DRIVE_ABSENT / ALIVE / GONE */
    uint8_t controlled;
    uint8_t pad_[2];
} drive_agent;

typedef struct {
    drive_agent agents[DRIVE_AGENTS];
    int32_t map_id;
    int32_t steps;
    int32_t num_agents;          /* spawned this episode (controlled + traffic) */
    int32_t num_controlled;      /* spawned controlled agents: rows [0, num_controlled) */
    shoal_rng rng;
} drive_env;

/* ---- small helpers ---------------------------------------------------------- */
/* Ternaries, not fminf/fmaxf: without -ffast-math gcc calls libm for those. */
SHOAL_FN float drive_clip1(float v) { return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v); }
SHOAL_FN float drive_min1(float v) { return v > 1.0f ? 1.0f : v; }

SHOAL_FN int drive_lane_wrap(const drive_map* map, int lane, int idx) {
    const int n = map->lane_len[lane];
    if (map->lane_closed[lane]) {
        idx %= n;
        return idx < 0 ? idx + n : idx;
    }
    return idx < 0 ? 0 : (idx >= n ? n - 1 : idx);
}

SHOAL_FN int drive_on_road(const drive_map* map, float x, float y) {
    const int ix = (int)floorf(x + DRIVE_WORLD_HALF);
    const int iy = (int)floorf(y + DRIVE_WORLD_HALF);
    if (ix < 0 || iy < 0 || ix >= DRIVE_RASTER || iy >= DRIVE_RASTER) return 0;
    return map->drivable[iy][ix];
}

/* Move the lane tracker to the nearest point in a short window ahead: agents
 * move at most 1.5 m a step, so the window never loses the lane it follows. */
SHOAL_FN void drive_track_lane(const drive_map* map, drive_agent* ag) {
    int best = ag->lane_idx;
    float best_d = 1e30f;
    for (int k = -1; k <= 3; k++) {
        const int i = drive_lane_wrap(map, ag->lane, ag->lane_idx + k);
        const float dx = map->lane_x[ag->lane][i] - ag->x, dy = map->lane_y[ag->lane][i] - ag->y;
        const float d = dx * dx + dy * dy;
        if (d < best_d) { best_d = d; best = i; }
    }
    ag->lane_idx = (int16_t)best;
}

/* ---- the built-in lane follower (traffic, and the tests' heuristic) ---- */
SHOAL_FN int32_t drive_heuristic_action(const drive_env* env, int a) {
    const drive_map* map = &DRIVE_ASSETS->maps[env->map_id];
    const drive_agent* ag = &env->agents[a];
    /* Pure pursuit on a lane point ~ 6 + 0.6 v metres ahead. */
    const int ahead = 3 + (int)(ag->speed * 0.3f);
    const int t = drive_lane_wrap(map, ag->lane, ag->lane_idx + ahead);
    const float dx = map->lane_x[ag->lane][t] - ag->x, dy = map->lane_y[ag->lane][t] - ag->y;
    const float lx = ag->cos_h * dx + ag->sin_h * dy;
    const float ly = -ag->sin_h * dx + ag->cos_h * dy;
    const float wheelbase = 0.6f * ag->length;
    const float steer = atan2f(2.0f * wheelbase * ly, lx * lx + ly * ly + 1e-3f);
    int steer_bin = (int)floorf(steer / DRIVE_STEER_STEP + 0.5f) + 3;
    steer_bin = steer_bin < 0 ? 0 : (steer_bin > 6 ? 6 : steer_bin);

    /* Keep a gap to whatever is in a corridor ahead. */
    float gap = 1e30f;
    for (int j = 0; j < DRIVE_AGENTS; j++) {
        const drive_agent* o = &env->agents[j];
        if (j == a || o->status != DRIVE_ALIVE) continue;
        const float ox = o->x - ag->x, oy = o->y - ag->y;
        const float fx = ag->cos_h * ox + ag->sin_h * oy;
        const float fy = -ag->sin_h * ox + ag->cos_h * oy;
        if (fx > 0.0f && fx < 30.0f && fabsf(fy) < 3.0f && fx < gap) gap = fx;
    }
    const float safe = 6.0f + 1.2f * ag->speed;
    const float target_speed = 7.0f;
    int accel_bin;
    if (gap < safe) accel_bin = 0;
    else if (gap < 1.6f * safe) accel_bin = ag->speed > 2.0f ? 1 : 2;
    else if (ag->speed < target_speed - 1.0f) accel_bin = 4;
    else if (ag->speed < target_speed) accel_bin = 3;
    else if (ag->speed > target_speed + 1.0f) accel_bin = 1;
    else accel_bin = 2;
    return steer_bin * DRIVE_ACCEL_BINS + accel_bin;
}

/* ---- observation ------------------------------------------------------------ */
SHOAL_FN void drive_write_obs(const drive_env* env, const drive_map* map, int a, float* obs) {
    const drive_agent* ag = &env->agents[a];
    const float c = ag->cos_h, s = ag->sin_h;

    /* ego */
    const float gx = ag->goal_x - ag->x, gy = ag->goal_y - ag->y;
    const int li = ag->lane_idx;
    const float lc = map->lane_cos[ag->lane][li], ls = map->lane_sin[ag->lane][li];
    const float ox = ag->x - map->lane_x[ag->lane][li], oy = ag->y - map->lane_y[ag->lane][li];
    obs[0] = drive_min1(ag->speed * (1.0f / DRIVE_MAX_SPEED));
    obs[1] = drive_clip1((c * gx + s * gy) * (1.0f / DRIVE_GOAL_SCALE));
    obs[2] = drive_clip1((-s * gx + c * gy) * (1.0f / DRIVE_GOAL_SCALE));
    obs[3] = drive_min1(ag->goal_dist * (1.0f / DRIVE_GOAL_SCALE));
    obs[4] = drive_clip1((lc * oy - ls * ox) * (1.0f / DRIVE_LANE_WIDTH));
    /* rotated unit vectors can round a hair past 1: clip, the space is [-1, 1] */
    obs[5] = drive_clip1(c * lc + s * ls);
    obs[6] = drive_clip1(s * lc - c * ls);
    obs[7] = 1.0f - (float)env->steps / (float)DRIVE_MAX_STEPS;

    /* partners: the nearest DRIVE_PARTNERS live agents, insertion-sorted */
    float best_d[DRIVE_PARTNERS];
    int best_j[DRIVE_PARTNERS];
    int found = 0;
    const float radius2 = DRIVE_PARTNER_RADIUS * DRIVE_PARTNER_RADIUS;
    for (int j = 0; j < DRIVE_AGENTS; j++) {
        const drive_agent* o = &env->agents[j];
        if (j == a || o->status != DRIVE_ALIVE) continue;
        const float dx = o->x - ag->x, dy = o->y - ag->y;
        const float d = dx * dx + dy * dy;
        if (d >= radius2) continue;
        if (found == DRIVE_PARTNERS && d >= best_d[DRIVE_PARTNERS - 1]) continue;
        int k = found < DRIVE_PARTNERS ? found++ : DRIVE_PARTNERS - 1;
        while (k > 0 && best_d[k - 1] > d) {
            best_d[k] = best_d[k - 1];
            best_j[k] = best_j[k - 1];
            k--;
        }
        best_d[k] = d;
        best_j[k] = j;
    }
    float* p = obs + DRIVE_EGO_FEATS;
    for (int k = 0; k < DRIVE_PARTNERS; k++, p += DRIVE_PARTNER_FEATS) {
        if (k >= found) {
            for (int f = 0; f < DRIVE_PARTNER_FEATS; f++) p[f] = 0.0f;
            continue;
        }
        const drive_agent* o = &env->agents[best_j[k]];
        const float dx = o->x - ag->x, dy = o->y - ag->y;
        p[0] = drive_clip1((c * dx + s * dy) * (1.0f / DRIVE_POS_SCALE));
        p[1] = drive_clip1((-s * dx + c * dy) * (1.0f / DRIVE_POS_SCALE));
        p[2] = drive_clip1(o->cos_h * c + o->sin_h * s);
        p[3] = drive_clip1(o->sin_h * c - o->cos_h * s);
        p[4] = drive_min1(o->speed * (1.0f / DRIVE_MAX_SPEED));
        p[5] = o->length / 6.0f;
    }

    /* road points: precomputed for the agent's grid cell */
    int cx = (int)floorf((ag->x + DRIVE_WORLD_HALF) / DRIVE_CELL);
    int cy = (int)floorf((ag->y + DRIVE_WORLD_HALF) / DRIVE_CELL);
    cx = cx < 0 ? 0 : (cx >= DRIVE_GRID ? DRIVE_GRID - 1 : cx);
    cy = cy < 0 ? 0 : (cy >= DRIVE_GRID ? DRIVE_GRID - 1 : cy);
    const int16_t* pts = map->cell_points[cy][cx];
    float* r = obs + DRIVE_EGO_FEATS + DRIVE_PARTNERS * DRIVE_PARTNER_FEATS;
    for (int k = 0; k < DRIVE_ROAD_OBS; k++, r += DRIVE_ROAD_FEATS) {
        const int q = pts[k];
        if (q < 0) {
            r[0] = r[1] = r[2] = r[3] = 0.0f;
            continue;
        }
        const float dx = map->road_x[q] - ag->x, dy = map->road_y[q] - ag->y;
        r[0] = drive_clip1((c * dx + s * dy) * (1.0f / DRIVE_POS_SCALE));
        r[1] = drive_clip1((-s * dx + c * dy) * (1.0f / DRIVE_POS_SCALE));
        r[2] = drive_clip1(map->road_cos[q] * c + map->road_sin[q] * s);
        r[3] = drive_clip1(map->road_sin[q] * c - map->road_cos[q] * s);
    }
}

SHOAL_FN void drive_zero_row(float* obs) {
    for (int f = 0; f < DRIVE_OBS_SIZE; f++) obs[f] = 0.0f;
}

/* ---- reset ------------------------------------------------------------------- */
SHOAL_FN void drive_seed(drive_env* env, uint64_t seed) {
    shoal_rng_seed(&env->rng, seed);
}

SHOAL_FN int drive_spawn(drive_env* env, const drive_map* map, drive_agent* ag) {
    for (int attempt = 0; attempt < 8; attempt++) {
        const int lane = (int)shoal_rng_below(&env->rng, (uint32_t)map->num_lanes);
        const int n = map->lane_len[lane];
        const int goal_pts = 15 + (int)shoal_rng_below(&env->rng, 26);  /* 30..80 m */
        int start;
        if (map->lane_closed[lane]) {
            start = (int)shoal_rng_below(&env->rng, (uint32_t)n);
        } else {
            if (n < goal_pts + 4) continue;
            start = (int)shoal_rng_below(&env->rng, (uint32_t)(n - goal_pts - 2));
        }
        const float x = map->lane_x[lane][start], y = map->lane_y[lane][start];
        int free = 1;
        for (int j = 0; j < DRIVE_AGENTS; j++) {
            const drive_agent* o = &env->agents[j];
            if (o == ag || o->status != DRIVE_ALIVE) continue;
            const float dx = o->x - x, dy = o->y - y;
            if (dx * dx + dy * dy < DRIVE_SPAWN_GAP * DRIVE_SPAWN_GAP) { free = 0; break; }
        }
        if (!free) continue;
        const int g = drive_lane_wrap(map, lane, start + goal_pts);
        ag->x = x;
        ag->y = y;
        ag->cos_h = map->lane_cos[lane][start];
        ag->sin_h = map->lane_sin[lane][start];
        ag->heading = atan2f(ag->sin_h, ag->cos_h);
        ag->speed = shoal_rng_uniform(&env->rng, 2.0f, 8.0f);
        ag->length = shoal_rng_uniform(&env->rng, 4.0f, 5.5f);
        ag->width = shoal_rng_uniform(&env->rng, 1.8f, 2.2f);
        ag->goal_x = map->lane_x[lane][g];
        ag->goal_y = map->lane_y[lane][g];
        const float gx = ag->goal_x - x, gy = ag->goal_y - y;
        ag->goal_dist = sqrtf(gx * gx + gy * gy);
        ag->start_goal_dist = fmaxf(ag->goal_dist, 1.0f);
        ag->lane = (int16_t)lane;
        ag->lane_idx = (int16_t)start;
        ag->status = DRIVE_ALIVE;
        return 1;
    }
    return 0;
}

SHOAL_FN void drive_reset(drive_env* env, float* obs, uint8_t* mask) {
    env->map_id = (int32_t)shoal_rng_below(&env->rng, DRIVE_NUM_MAPS);
    env->steps = 0;
    const drive_map* map = &DRIVE_ASSETS->maps[env->map_id];
    const int wanted = DRIVE_AGENTS / 2 + (int)shoal_rng_below(&env->rng, DRIVE_AGENTS / 2 + 1);
    const int traffic = DRIVE_CONTROLLED > 0
        ? (wanted > DRIVE_CONTROLLED ? wanted - DRIVE_CONTROLLED : 0)
        : (int)shoal_rng_below(&env->rng, (uint32_t)(wanted / 4 + 1));
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        drive_agent* ag = &env->agents[a];
        for (unsigned b = 0; b < sizeof(drive_agent); b++) ((uint8_t*)ag)[b] = 0;
    }
    env->num_agents = 0;
    env->num_controlled = 0;
    for (int a = 0; a < wanted; a++) {
        drive_agent* ag = &env->agents[a];
        if (!drive_spawn(env, map, ag)) continue;   /* row stays absent */
        ag->controlled = (uint8_t)(a < wanted - traffic);
        env->num_agents += 1;
        env->num_controlled += ag->controlled;
    }
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        const drive_agent* ag = &env->agents[a];
        const int live = ag->status == DRIVE_ALIVE && ag->controlled;
        mask[a] = (uint8_t)live;
        if (live) drive_write_obs(env, map, a, obs + a * DRIVE_OBS_SIZE);
        else drive_zero_row(obs + a * DRIVE_OBS_SIZE);
    }
}

/* ---- step -------------------------------------------------------------------- */
/* Kinematic bicycle, reference point at the centre: slip angle
 * beta = atan(tan(steer) / 2), yaw rate = v cos(beta) tan(steer) / wheelbase.
 * The seven steer bins are fixed, so sin/cos(beta) and cos(beta) tan(steer)
 * are tabulated (exact to float32) instead of costing four libm calls a step. */
SHOAL_FN void drive_move(drive_agent* ag, int32_t action) {
    const float accels[DRIVE_ACCEL_BINS] = {-4.0f, -2.0f, 0.0f, 1.5f, 3.0f};
    const float sin_beta[DRIVE_STEER_BINS] = {-0.323656458f, -0.206825749f, -0.100838393f, 0.0f,
                                              0.100838393f, 0.206825749f, 0.323656458f};
    const float cos_beta[DRIVE_STEER_BINS] = {0.946174665f, 0.978377795f, 0.994902819f, 1.0f,
                                              0.994902819f, 0.978377795f, 0.946174665f};
    const float yaw_gain[DRIVE_STEER_BINS] = {-0.647312916f, -0.413651497f, -0.201676786f, 0.0f,
                                              0.201676786f, 0.413651497f, 0.647312916f};
    if (action < 0 || action >= DRIVE_NUM_ACTIONS) action = 3 * DRIVE_ACCEL_BINS + 2;  /* straight, coast */
    const int steer_bin = action / DRIVE_ACCEL_BINS;
    float v = ag->speed + accels[action % DRIVE_ACCEL_BINS] * DRIVE_DT;
    v = v < 0.0f ? 0.0f : (v > DRIVE_MAX_SPEED ? DRIVE_MAX_SPEED : v);
    const float sb = sin_beta[steer_bin], cb = cos_beta[steer_bin];
    ag->x += v * (ag->cos_h * cb - ag->sin_h * sb) * DRIVE_DT;   /* cos(heading + beta) */
    ag->y += v * (ag->sin_h * cb + ag->cos_h * sb) * DRIVE_DT;   /* sin(heading + beta) */
    float h = ag->heading + v * yaw_gain[steer_bin] / (0.6f * ag->length) * DRIVE_DT;
    if (h > 3.14159265f) h -= 6.28318531f;
    if (h < -3.14159265f) h += 6.28318531f;
    ag->heading = h;
    ag->speed = v;
    ag->cos_h = cosf(h);
    ag->sin_h = sinf(h);
}

/* Each car is two circles of radius width/2 along its axis. */
SHOAL_FN int drive_collide(const drive_agent* p, const drive_agent* q) {
    const float dx = q->x - p->x, dy = q->y - p->y;
    const float reach = 0.5f * (p->length + q->length);
    if (dx * dx + dy * dy >= reach * reach) return 0;
    const float po = 0.5f * (p->length - p->width), qo = 0.5f * (q->length - q->width);
    const float rr = 0.5f * (p->width + q->width);
    for (int i = -1; i <= 1; i += 2) {
        for (int j = -1; j <= 1; j += 2) {
            const float ex = dx + j * qo * q->cos_h - i * po * p->cos_h;
            const float ey = dy + j * qo * q->sin_h - i * po * p->sin_h;
            if (ex * ex + ey * ey < rr * rr) return 1;
        }
    }
    return 0;
}

SHOAL_FN int drive_step(drive_env* env, const int32_t* act, float* obs, float* rew,
                        uint8_t* term, uint8_t* trunc, uint8_t* mask) {
    const drive_map* map = &DRIVE_ASSETS->maps[env->map_id];
    drive_agent* agents = env->agents;

    /* Every action is chosen from the same (pre-move) state. */
    int32_t actions[DRIVE_AGENTS];
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        if (agents[a].status != DRIVE_ALIVE) continue;
        actions[a] = agents[a].controlled ? act[a] : drive_heuristic_action(env, a);
    }
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        if (agents[a].status != DRIVE_ALIVE) continue;
        drive_move(&agents[a], actions[a]);
        drive_track_lane(map, &agents[a]);
    }

    uint8_t crashed[DRIVE_AGENTS];
    for (int a = 0; a < DRIVE_AGENTS; a++) crashed[a] = 0;
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        if (agents[a].status != DRIVE_ALIVE) continue;
        for (int b = a + 1; b < DRIVE_AGENTS; b++) {
            if (agents[b].status != DRIVE_ALIVE) continue;
            if (drive_collide(&agents[a], &agents[b])) crashed[a] = crashed[b] = 1;
        }
    }

    env->steps += 1;
    const int time_up = env->steps >= DRIVE_MAX_STEPS;
    uint8_t reported[DRIVE_AGENTS];   /* rows the learner sees this step */
    int controlled_left = 0;
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        drive_agent* ag = &agents[a];
        rew[a] = 0.0f;
        term[a] = 0;
        trunc[a] = 0;
        reported[a] = 0;
        if (ag->status != DRIVE_ALIVE) continue;
        const float gx = ag->goal_x - ag->x, gy = ag->goal_y - ag->y;
        const float dist = sqrtf(gx * gx + gy * gy);
        float r = (ag->goal_dist - dist) / ag->start_goal_dist;
        ag->goal_dist = dist;
        int leaves = 1;
        if (crashed[a]) r -= DRIVE_COLLISION_PENALTY;
        else if (!drive_on_road(map, ag->x, ag->y)) r -= DRIVE_OFFROAD_PENALTY;
        else if (dist < DRIVE_GOAL_RADIUS) r += DRIVE_GOAL_REWARD;
        else leaves = 0;
        if (leaves) ag->status = DRIVE_GONE;
        if (!ag->controlled) continue;
        reported[a] = 1;
        rew[a] = r;
        term[a] = (uint8_t)leaves;
        trunc[a] = (uint8_t)time_up;   /* as gymnasium's TimeLimit: terminated on that step too or not */
        controlled_left += !leaves;
    }
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        mask[a] = reported[a];
        if (reported[a]) drive_write_obs(env, map, a, obs + a * DRIVE_OBS_SIZE);
        else drive_zero_row(obs + a * DRIVE_OBS_SIZE);
    }
    return time_up || controlled_left == 0;
}

/* ==== host-only: building the maps, rendering ================================ */
#ifndef __CUDACC__
#include <string.h>
#include <stdio.h>

/* Lanes are drawn as dense paths (0.1 m steps) of lines, arcs and cubic
 * Beziers, then resampled every DRIVE_LANE_SPACING metres of arc length. */
#define DRIVE_DENSE_MAX 8192
static float drive_dense_x[DRIVE_DENSE_MAX], drive_dense_y[DRIVE_DENSE_MAX];
static int drive_dense_n;

static void drive_path_point(float x, float y) {
    if (drive_dense_n < DRIVE_DENSE_MAX) {
        drive_dense_x[drive_dense_n] = x;
        drive_dense_y[drive_dense_n] = y;
        drive_dense_n++;
    }
}

static void drive_path_line(float x0, float y0, float x1, float y1) {
    const float len = sqrtf((x1 - x0) * (x1 - x0) + (y1 - y0) * (y1 - y0));
    const int n = (int)(len / 0.1f) + 1;
    for (int i = 0; i <= n; i++) drive_path_point(x0 + (x1 - x0) * i / n, y0 + (y1 - y0) * i / n);
}

static void drive_path_arc(float cx, float cy, float r, float a0, float a1) {
    const int n = (int)(fabsf(a1 - a0) * r / 0.1f) + 1;
    for (int i = 0; i <= n; i++) {
        const float t = a0 + (a1 - a0) * i / n;
        drive_path_point(cx + r * cosf(t), cy + r * sinf(t));
    }
}

/* Cubic Bezier from p0 heading (c0, s0) to p3 heading (c3, s3). */
static void drive_path_bezier(float x0, float y0, float c0, float s0,
                              float x3, float y3, float c3, float s3) {
    const float d = sqrtf((x3 - x0) * (x3 - x0) + (y3 - y0) * (y3 - y0));
    const float k = 0.4f * d;
    const float x1 = x0 + k * c0, y1 = y0 + k * s0, x2 = x3 - k * c3, y2 = y3 - k * s3;
    const int n = (int)(d * 1.6f / 0.1f) + 1;
    for (int i = 0; i <= n; i++) {
        const float t = (float)i / n, u = 1.0f - t;
        drive_path_point(u * u * u * x0 + 3 * u * u * t * x1 + 3 * u * t * t * x2 + t * t * t * x3,
                         u * u * u * y0 + 3 * u * u * t * y1 + 3 * u * t * t * y2 + t * t * t * y3);
    }
}

static void drive_lane_begin(void) { drive_dense_n = 0; }

/* Resample the dense path into a new lane of `map`. */
static void drive_lane_end(drive_map* map, int closed) {
    if (map->num_lanes >= DRIVE_MAX_LANES || drive_dense_n < 2) return;
    const int lane = map->num_lanes++;
    int n = 0;
    float carried = 0.0f;
    map->lane_x[lane][n] = drive_dense_x[0];
    map->lane_y[lane][n] = drive_dense_y[0];
    n++;
    for (int i = 1; i < drive_dense_n && n < DRIVE_MAX_LANE_POINTS; i++) {
        const float dx = drive_dense_x[i] - drive_dense_x[i - 1];
        const float dy = drive_dense_y[i] - drive_dense_y[i - 1];
        carried += sqrtf(dx * dx + dy * dy);
        if (carried >= DRIVE_LANE_SPACING) {
            map->lane_x[lane][n] = drive_dense_x[i];
            map->lane_y[lane][n] = drive_dense_y[i];
            n++;
            carried = 0.0f;
        }
    }
    if (closed) {   /* drop a last point that nearly repeats the first */
        const float dx = map->lane_x[lane][n - 1] - map->lane_x[lane][0];
        const float dy = map->lane_y[lane][n - 1] - map->lane_y[lane][0];
        if (dx * dx + dy * dy < 1.0f) n--;
    }
    map->lane_len[lane] = (int16_t)n;
    map->lane_closed[lane] = (uint8_t)closed;
    for (int i = 0; i < n; i++) {
        int i0 = i - 1, i1 = i + 1;
        if (closed) { i0 = (i0 + n) % n; i1 = i1 % n; }
        else { i0 = i0 < 0 ? 0 : i0; i1 = i1 >= n ? n - 1 : i1; }
        const float dx = map->lane_x[lane][i1] - map->lane_x[lane][i0];
        const float dy = map->lane_y[lane][i1] - map->lane_y[lane][i0];
        const float len = sqrtf(dx * dx + dy * dy) + 1e-9f;
        map->lane_cos[lane][i] = dx / len;
        map->lane_sin[lane][i] = dy / len;
    }
}

/* Two-way road along the centre curve (x, f(x)) for maps 0 and 1: `per_side`
 * lanes each way, right-hand traffic, offset along the curve's normal. */
static void drive_build_two_way(drive_map* map, int per_side, float amplitude, float period) {
    for (int dir = 0; dir < 2; dir++) {
        for (int k = 0; k < per_side; k++) {
            const float offset = (dir == 0 ? -1.0f : 1.0f) * DRIVE_LANE_WIDTH * (k + 0.5f);
            drive_lane_begin();
            for (int i = 0; i <= 1920; i++) {
                const float t = dir == 0 ? -96.0f + 0.1f * i : 96.0f - 0.1f * i;
                const float w = 6.28318531f / period;
                const float y = amplitude * sinf(w * t), dy = amplitude * w * cosf(w * t);
                const float norm = sqrtf(1.0f + dy * dy);
                drive_path_point(t - offset * dy / norm, y + offset / norm);
            }
            drive_lane_end(map, 0);
        }
    }
}

/* Four-way intersection. Arms point along the axes; `two_lanes` gives each
 * direction an inner (straight + left) and outer (straight + right) lane. */
static void drive_build_intersection(drive_map* map, int two_lanes) {
    const float junction = two_lanes ? 10.0f : 7.0f, reach = 96.0f;
    for (int arm = 0; arm < 4; arm++) {
        const float th = 1.5707963f * arm;
        const float ux = -cosf(th), uy = -sinf(th);        /* travel: toward centre */
        for (int lane_k = 0; lane_k < (two_lanes ? 2 : 1); lane_k++) {
            const float off = DRIVE_LANE_WIDTH * (lane_k + 0.5f);
            for (int turn = -1; turn <= 1; turn++) {          /* -1 right, 0 straight, 1 left */
                if (two_lanes && ((lane_k == 0 && turn == -1) || (lane_k == 1 && turn == 1))) continue;
                /* exit travel direction */
                const float vx = turn == 0 ? ux : (turn == 1 ? -uy : uy);
                const float vy = turn == 0 ? uy : (turn == 1 ? ux : -ux);
                /* right of travel is (uy, -ux) */
                const float ax = -reach * ux + off * uy, ay = -reach * uy - off * ux;
                const float bx = -junction * ux + off * uy, by = -junction * uy - off * ux;
                const float cx = junction * vx + off * vy, cy = junction * vy - off * vx;
                const float dx = reach * vx + off * vy, dy = reach * vy - off * vx;
                drive_lane_begin();
                drive_path_line(ax, ay, bx, by);
                if (turn == 0) drive_path_line(bx, by, cx, cy);
                else drive_path_bezier(bx, by, ux, uy, cx, cy, vx, vy);
                drive_path_line(cx, cy, dx, dy);
                drive_lane_end(map, 0);
            }
        }
    }
}

/* Roundabout: ring lanes at radius 22 (inner) and 25.5 (outer), counter-
 * clockwise; each arm has an entry path that merges into the outer ring,
 * follows it and leaves 1, 2 or 3 arms later. */
static void drive_build_roundabout(drive_map* map) {
    const float inner = 22.0f, outer = 25.5f, reach = 96.0f, arm_start = 36.0f;
    for (int k = 0; k < 2; k++) {
        drive_lane_begin();
        drive_path_arc(0.0f, 0.0f, k == 0 ? inner : outer, 0.0f, 6.28318531f);
        drive_lane_end(map, 1);
    }
    for (int arm = 0; arm < 4; arm++) {
        for (int exits = 1; exits <= 3; exits++) {
            const float th = 1.5707963f * arm;
            const float ex = cosf(th), ey = sinf(th);        /* outward along the arm */
            const float off = 0.5f * DRIVE_LANE_WIDTH;
            /* arriving: travel -e, right side is (-ey, ex) */
            const float ax = reach * ex - off * ey, ay = reach * ey + off * ex;
            const float bx = arm_start * ex - off * ey, by = arm_start * ey + off * ex;
            const float enter = th + 0.45f, leave = th + 1.5707963f * exits - 0.45f;
            const float th2 = th + 1.5707963f * exits;
            const float fx = cosf(th2), fy = sinf(th2);
            /* departing: travel +f, right side is (fy, -fx) */
            const float cx = arm_start * fx + off * fy, cy = arm_start * fy - off * fx;
            const float dx = reach * fx + off * fy, dy = reach * fy - off * fx;
            drive_lane_begin();
            drive_path_line(ax, ay, bx, by);
            drive_path_bezier(bx, by, -ex, -ey, outer * cosf(enter), outer * sinf(enter),
                              -sinf(enter), cosf(enter));
            drive_path_arc(0.0f, 0.0f, outer, enter, leave);
            drive_path_bezier(outer * cosf(leave), outer * sinf(leave), -sinf(leave), cosf(leave),
                              cx, cy, fx, fy);
            drive_path_line(cx, cy, dx, dy);
            drive_lane_end(map, 0);
        }
    }
}

/* S-bend: straight, a left 90-degree curve, then a right one, 1 lane each way. */
static void drive_build_s_bend(drive_map* map) {
    const float r0 = 40.0f;
    for (int dir = 0; dir < 2; dir++) {
        const float off = (dir == 0 ? 1.0f : -1.0f) * 0.5f * DRIVE_LANE_WIDTH;
        /* centre line: (-96,-40) -> (-40,-40), arc around (-40,0) ... built
         * eastbound with the lane on its right (offset toward -normal). */
        drive_lane_begin();
        const float r1 = r0 + off;   /* left curve: right side is outside */
        const float r2 = r0 - off;   /* right curve: right side is inside */
        drive_path_line(-96.0f, -40.0f - off, -40.0f, -40.0f - off);
        drive_path_arc(-40.0f, 0.0f, r1, -1.5707963f, 0.0f);
        drive_path_arc(40.0f, 0.0f, r2, 3.14159265f, 1.5707963f);
        drive_path_line(40.0f, r2, 96.0f, r2);
        if (dir == 1) {   /* westbound: the same curve on the other side, reversed */
            for (int i = 0, j = drive_dense_n - 1; i < j; i++, j--) {
                float t = drive_dense_x[i]; drive_dense_x[i] = drive_dense_x[j]; drive_dense_x[j] = t;
                t = drive_dense_y[i]; drive_dense_y[i] = drive_dense_y[j]; drive_dense_y[j] = t;
            }
        }
        drive_lane_end(map, 0);
    }
}

/* Raster, road points and the per-cell nearest road points. */
static void drive_finish_map(drive_map* map) {
    memset(map->drivable, 0, sizeof(map->drivable));
    const float hw = DRIVE_ROAD_HALF_WIDTH;
    for (int l = 0; l < map->num_lanes; l++) {
        const int n = map->lane_len[l];
        const int segs = map->lane_closed[l] ? n : n - 1;
        for (int i = 0; i < segs; i++) {
            const float x0 = map->lane_x[l][i], y0 = map->lane_y[l][i];
            const float x1 = map->lane_x[l][(i + 1) % n], y1 = map->lane_y[l][(i + 1) % n];
            const float sx = x1 - x0, sy = y1 - y0, ss = sx * sx + sy * sy + 1e-9f;
            const int ix0 = (int)floorf(fminf(x0, x1) - hw + DRIVE_WORLD_HALF) - 1;
            const int ix1 = (int)floorf(fmaxf(x0, x1) + hw + DRIVE_WORLD_HALF) + 1;
            const int iy0 = (int)floorf(fminf(y0, y1) - hw + DRIVE_WORLD_HALF) - 1;
            const int iy1 = (int)floorf(fmaxf(y0, y1) + hw + DRIVE_WORLD_HALF) + 1;
            for (int iy = iy0; iy <= iy1; iy++) {
                if (iy < 0 || iy >= DRIVE_RASTER) continue;
                for (int ix = ix0; ix <= ix1; ix++) {
                    if (ix < 0 || ix >= DRIVE_RASTER) continue;
                    const float px = ix + 0.5f - DRIVE_WORLD_HALF, py = iy + 0.5f - DRIVE_WORLD_HALF;
                    float t = ((px - x0) * sx + (py - y0) * sy) / ss;
                    t = fminf(1.0f, fmaxf(0.0f, t));
                    const float qx = x0 + t * sx - px, qy = y0 + t * sy - py;
                    if (qx * qx + qy * qy <= hw * hw) map->drivable[iy][ix] = 1;
                }
            }
        }
    }
    /* road points: every few lane points, skipping near-duplicates (lanes
     * that share an approach) */
    map->num_road_points = 0;
    for (int l = 0; l < map->num_lanes; l++) {
        for (int i = 0; i < map->lane_len[l]; i += DRIVE_ROAD_SAMPLE_EVERY) {
            const float x = map->lane_x[l][i], y = map->lane_y[l][i];
            const float c = map->lane_cos[l][i], s = map->lane_sin[l][i];
            int dup = 0;
            for (int q = 0; q < map->num_road_points && !dup; q++) {
                const float dx = map->road_x[q] - x, dy = map->road_y[q] - y;
                dup = dx * dx + dy * dy < 2.25f && map->road_cos[q] * c + map->road_sin[q] * s > 0.9f;
            }
            if (dup || map->num_road_points >= DRIVE_MAX_ROAD_POINTS) continue;
            const int q = map->num_road_points++;
            map->road_x[q] = x;
            map->road_y[q] = y;
            map->road_cos[q] = c;
            map->road_sin[q] = s;
        }
    }
    for (int cy = 0; cy < DRIVE_GRID; cy++) {
        for (int cx = 0; cx < DRIVE_GRID; cx++) {
            const float px = (cx + 0.5f) * DRIVE_CELL - DRIVE_WORLD_HALF;
            const float py = (cy + 0.5f) * DRIVE_CELL - DRIVE_WORLD_HALF;
            float best_d[DRIVE_ROAD_OBS];
            int16_t* best = map->cell_points[cy][cx];
            int found = 0;
            for (int q = 0; q < map->num_road_points; q++) {
                const float dx = map->road_x[q] - px, dy = map->road_y[q] - py;
                const float d = dx * dx + dy * dy;
                if (d > DRIVE_ROAD_OBS_RADIUS * DRIVE_ROAD_OBS_RADIUS) continue;
                if (found == DRIVE_ROAD_OBS && d >= best_d[DRIVE_ROAD_OBS - 1]) continue;
                int k = found < DRIVE_ROAD_OBS ? found++ : DRIVE_ROAD_OBS - 1;
                while (k > 0 && best_d[k - 1] > d) {
                    best_d[k] = best_d[k - 1];
                    best[k] = best[k - 1];
                    k--;
                }
                best_d[k] = d;
                best[k] = (int16_t)q;
            }
            for (int k = found; k < DRIVE_ROAD_OBS; k++) best[k] = -1;
        }
    }
}

static const char* drive_map_names[DRIVE_NUM_MAPS] = {
    "straight", "winding", "intersection", "intersection-2lane", "roundabout", "s-bend"};

/* Build every map once per process (idempotent; no RNG, fixed geometry). */
static void drive_build_assets(void) {
    if (drive_assets_ready) return;
    memset(&drive_assets_host, 0, sizeof(drive_assets_host));
    drive_map* maps = drive_assets_host.maps;
    drive_build_two_way(&maps[0], 2, 0.0f, 1.0f);
    drive_build_two_way(&maps[1], 2, 18.0f, 150.0f);
    drive_build_intersection(&maps[2], 0);
    drive_build_intersection(&maps[3], 1);
    drive_build_roundabout(&maps[4]);
    drive_build_s_bend(&maps[5]);
    for (int m = 0; m < DRIVE_NUM_MAPS; m++) drive_finish_map(&maps[m]);
    drive_assets_ready = 1;
}

/* ---- rendering -------------------------------------------------------------- */
static void drive_agent_color(const drive_agent* ag, int a, uint8_t* rgb) {
    static const uint8_t palette[8][3] = {{230, 60, 60},  {60, 160, 230}, {240, 200, 40},
                                          {90, 200, 90},  {200, 90, 220}, {250, 140, 40},
                                          {40, 210, 200}, {240, 120, 170}};
    if (!ag->controlled) { rgb[0] = rgb[1] = rgb[2] = 235; return; }
    rgb[0] = palette[a % 8][0];
    rgb[1] = palette[a % 8][1];
    rgb[2] = palette[a % 8][2];
}

/* Top-down view of the whole map into out (h x w x 3, uint8). */
static void drive_render_rgb(const drive_env* env, uint8_t* out, int h, int w) {
    if (!drive_assets_ready) drive_build_assets();
    const drive_map* map = &drive_assets_host.maps[env->map_id];
    const float scale = 2.0f * DRIVE_WORLD_HALF / (float)(w < h ? w : h);   /* metres per pixel */
    for (int py = 0; py < h; py++) {
        for (int px = 0; px < w; px++) {
            const float x = (px + 0.5f) * scale - DRIVE_WORLD_HALF;
            const float y = DRIVE_WORLD_HALF - (py + 0.5f) * scale;   /* y up */
            uint8_t* o = out + ((size_t)py * w + px) * 3;
            if (drive_on_road(map, x, y)) { o[0] = o[1] = o[2] = 105; }
            else { o[0] = 34; o[1] = 52; o[2] = 34; }
        }
    }
#define DRIVE_PUT(px, py, r, g, b)                                              \
    do {                                                                        \
        if ((px) >= 0 && (py) >= 0 && (px) < w && (py) < h) {                   \
            uint8_t* o_ = out + ((size_t)(py) * w + (px)) * 3;                  \
            o_[0] = (r); o_[1] = (g); o_[2] = (b);                              \
        }                                                                       \
    } while (0)
    /* lane centre lines, dotted */
    for (int l = 0; l < map->num_lanes; l++)
        for (int i = 0; i < map->lane_len[l]; i += 2) {
            const int px = (int)((map->lane_x[l][i] + DRIVE_WORLD_HALF) / scale);
            const int py = (int)((DRIVE_WORLD_HALF - map->lane_y[l][i]) / scale);
            DRIVE_PUT(px, py, 150, 150, 150);
        }
    for (int a = 0; a < DRIVE_AGENTS; a++) {
        const drive_agent* ag = &env->agents[a];
        if (ag->status != DRIVE_ALIVE) continue;
        uint8_t rgb[3];
        drive_agent_color(ag, a, rgb);
        if (ag->controlled) {   /* goal: a small hollow square */
            const int gx = (int)((ag->goal_x + DRIVE_WORLD_HALF) / scale);
            const int gy = (int)((DRIVE_WORLD_HALF - ag->goal_y) / scale);
            for (int k = -2; k <= 2; k++) {
                DRIVE_PUT(gx + k, gy - 2, rgb[0], rgb[1], rgb[2]);
                DRIVE_PUT(gx + k, gy + 2, rgb[0], rgb[1], rgb[2]);
                DRIVE_PUT(gx - 2, gy + k, rgb[0], rgb[1], rgb[2]);
                DRIVE_PUT(gx + 2, gy + k, rgb[0], rgb[1], rgb[2]);
            }
        }
        /* the car: every pixel whose centre lies inside the rotated box */
        const float reach = 0.5f * ag->length + scale;
        const int x0 = (int)((ag->x - reach + DRIVE_WORLD_HALF) / scale);
        const int x1 = (int)((ag->x + reach + DRIVE_WORLD_HALF) / scale);
        const int y0 = (int)((DRIVE_WORLD_HALF - ag->y - reach) / scale);
        const int y1 = (int)((DRIVE_WORLD_HALF - ag->y + reach) / scale);
        for (int py = y0; py <= y1; py++)
            for (int px = x0; px <= x1; px++) {
                const float x = (px + 0.5f) * scale - DRIVE_WORLD_HALF - ag->x;
                const float y = DRIVE_WORLD_HALF - (py + 0.5f) * scale - ag->y;
                const float f = ag->cos_h * x + ag->sin_h * y, s = -ag->sin_h * x + ag->cos_h * y;
                if (fabsf(f) <= 0.5f * ag->length && fabsf(s) <= 0.5f * ag->width) {
                    /* darker front half shows the heading */
                    const int dim = f > 0.25f * ag->length;
                    DRIVE_PUT(px, py, rgb[0] >> dim, rgb[1] >> dim, rgb[2] >> dim);
                }
            }
    }
#undef DRIVE_PUT
}

/* ASCII view: '.' road, '+' goals, agents by row index (0-9 a-v), '#' traffic.
 * Writes at most cap bytes (NUL-terminated); returns the length. */
#define DRIVE_TEXT_COLS 64
#define DRIVE_TEXT_ROWS 32
static int drive_render_text(const drive_env* env, char* buf, int cap) {
    if (!drive_assets_ready) drive_build_assets();
    const drive_map* map = &drive_assets_host.maps[env->map_id];
    char grid[DRIVE_TEXT_ROWS][DRIVE_TEXT_COLS];
    const float sx = 2.0f * DRIVE_WORLD_HALF / DRIVE_TEXT_COLS, sy = 2.0f * DRIVE_WORLD_HALF / DRIVE_TEXT_ROWS;
    for (int r = 0; r < DRIVE_TEXT_ROWS; r++)
        for (int c = 0; c < DRIVE_TEXT_COLS; c++)
            grid[r][c] = drive_on_road(map, (c + 0.5f) * sx - DRIVE_WORLD_HALF,
                                       DRIVE_WORLD_HALF - (r + 0.5f) * sy) ? '.' : ' ';
    static const char ids[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    int alive = 0, controlled = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int a = 0; a < DRIVE_AGENTS; a++) {
            const drive_agent* ag = &env->agents[a];
            if (ag->status != DRIVE_ALIVE) continue;
            const float x = pass == 0 ? ag->goal_x : ag->x, y = pass == 0 ? ag->goal_y : ag->y;
            if (pass == 0 && !ag->controlled) continue;
            const int c = (int)floorf((x + DRIVE_WORLD_HALF) / sx);
            const int r = (int)floorf((DRIVE_WORLD_HALF - y) / sy);
            if (pass == 1) { alive++; controlled += ag->controlled; }
            if (c < 0 || r < 0 || c >= DRIVE_TEXT_COLS || r >= DRIVE_TEXT_ROWS) continue;
            grid[r][c] = pass == 0 ? '+' : (ag->controlled ? ids[a % 62] : '#');
        }
    int n = snprintf(buf, (size_t)cap, "drive map %d (%s)  step %d/%d  alive %d (%d controlled)\n",
                     env->map_id, drive_map_names[env->map_id], env->steps, DRIVE_MAX_STEPS,
                     alive, controlled);
    for (int r = 0; r < DRIVE_TEXT_ROWS && n + DRIVE_TEXT_COLS + 2 < cap; r++) {
        memcpy(buf + n, grid[r], DRIVE_TEXT_COLS);
        n += DRIVE_TEXT_COLS;
        buf[n++] = '\n';
    }
    buf[n] = 0;
    return n;
}
#endif /* !__CUDACC__ */

#endif /* SHOAL_DRIVE_H */
