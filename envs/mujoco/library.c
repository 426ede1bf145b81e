/* library.c — shoal's MuJoCo envs as one shared library over libmujoco.
 *
 * Built on first use by shoal.envs.mujoco.build (against the headers and the
 * libmujoco that the installed `mujoco` wheel ships) and driven through
 * ctypes by shoal.envs.mujoco.binding. What it exports:
 *
 *   model loading      shoal_mj_load_model / shoal_mj_free_model / sizes /
 *                      _model_bytes (the model for Python's mujoco)
 *   blocks             shoal_mj_block_new / _free / _run: a contiguous block
 *                      of envs inside the pool's buffers, with the same
 *                      shoal_block_ops table header envs give the worker loop
 *   state              shoal_mj_block_set_state / _get_state (set_state,
 *                      alignment tests), _copy_data (rendering)
 *   bench              shoal_mj_block_run_steps (the plain C loop)
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>

#include "shoal_mujoco.h"
#include "shoal_block.h"

/* Block sizes come from the model, not from compile-time constants. */
#define SHOAL_VEC_OBS_SIZE(env) ((env)->obs_size)
#define SHOAL_VEC_ACT_SIZE(env) ((env)->act_size)
#define SHOAL_VEC_ENV mujoco
#include "shoal_vec.h"

#include "half_cheetah.h"
#include "hopper.h"
#include "walker2d.h"
#include "ant.h"
#include "humanoid.h"
#include "swimmer.h"
#include "reacher.h"
#include "inverted_pendulum.h"
#include "inverted_double_pendulum.h"
#include "pusher.h"
#include "humanoid_standup.h"

/* Every env; shoal.envs.mujoco.binding finds an env's index by its name. */
static const mujoco_kind* const KINDS[] = {
    &half_cheetah_kind,
    &hopper_kind,
    &walker2d_kind,
    &ant_kind,
    &humanoid_kind,
    &swimmer_kind,
    &reacher_kind,
    &inverted_pendulum_kind,
    &inverted_double_pendulum_kind,
    &pusher_kind,
    &humanoid_standup_kind,
};
enum { NUM_KINDS = sizeof(KINDS) / sizeof(KINDS[0]) };

/* ---- models --------------------------------------------------------------- */

/* MuJoCo's default warning handler also appends to MUJOCO_LOG.TXT in the
 * current directory; a pool should not write files in the user's folder.
 * Each distinct warning is said once per process: a model's compile-time
 * warning (mujoco 4's "settotalmass is deprecated" on gymnasium's XMLs)
 * otherwise came once per env made, dozens of lines per pool. Installed
 * only where no handler is set: one the user (or another library) set
 * stays theirs. */
enum { WARNINGS_KEPT = 32 };
static unsigned long long warned[WARNINGS_KEPT];
static int warned_count;

static void warn_to_stderr(const char* message) {
    unsigned long long hash = 1469598103934665603ULL;   /* FNV-1a of the text */
    for (const char* c = message; *c; c++) hash = (hash ^ (unsigned char)*c) * 1099511628211ULL;
    for (int k = 0; k < warned_count; k++) {
        if (warned[k] == hash) return;
    }
    int kept = warned_count;   /* (read once: two threads cannot write past the table) */
    if (kept < WARNINGS_KEPT) {
        warned[kept] = hash;
        warned_count = kept + 1;
    }
    fprintf(stderr, "MuJoCo warning: %s\n", message);
}

/* A failed allocation in mj_makeData calls MuJoCo's error handler, whose
 * default writes MUJOCO_LOG.TXT and exits the process: while a block makes
 * its envs, this one jumps back there instead, which reports it (Python
 * then raises). The handler is one process-wide pointer, so it is installed
 * by the first of the threads making envs and put back by the last (two
 * pools made at once in two threads once left it installed for good); an
 * error in another thread meanwhile goes to the handler it replaced. */
static _Thread_local jmp_buf* making_envs;
static pthread_mutex_t handler_lock = PTHREAD_MUTEX_INITIALIZER;
static int threads_making_envs;
static void (*handler_replaced)(const char*);

static void jump_out_of_mujoco(const char* message) {
    if (making_envs) longjmp(*making_envs, 1);
    if (handler_replaced) {
        handler_replaced(message);
        return;
    }
    fprintf(stderr, "MuJoCo error: %s\n", message);   /* as MuJoCo's default, without its log file */
    exit(1);
}

static void begin_making_envs(jmp_buf* jump) {
    pthread_mutex_lock(&handler_lock);
    if (threads_making_envs++ == 0) {
        handler_replaced = mju_user_error;
        mju_user_error = jump_out_of_mujoco;
    }
    pthread_mutex_unlock(&handler_lock);
    making_envs = jump;
}

static void end_making_envs(void) {
    making_envs = NULL;
    pthread_mutex_lock(&handler_lock);
    if (--threads_making_envs == 0) mju_user_error = handler_replaced;
    pthread_mutex_unlock(&handler_lock);
}

mjModel* shoal_mj_load_model(const char* path, char* error, int error_size) {
    /* only where no one set a handler: a user's own (or another library's) stays */
    if (!mju_user_warning) mju_user_warning = warn_to_stderr;
    return mj_loadXML(path, NULL, error, error_size);
}

void shoal_mj_free_model(mjModel* m) { mj_deleteModel(m); }

/* nq, nv, nu, na of a model, and its timestep; ctrlrange (nu x 2) into `ctrlrange`. */
void shoal_mj_model_sizes(const mjModel* m, int* sizes, double* timestep, double* ctrlrange) {
    sizes[0] = m->nq;
    sizes[1] = m->nv;
    sizes[2] = m->nu;
    sizes[3] = m->na;
    sizes[4] = m->ntendon;
    *timestep = m->opt.timestep;
    for (int j = 0; j < 2 * m->nu; j++) ctrlrange[j] = m->actuator_ctrlrange[j];
}

/* The model as MuJoCo's binary (MJB) bytes, so Python's mujoco.MjModel of
 * it (the renderer's, model_copy's) is the very model the envs step, where
 * reloading the XML file would read whatever the file holds by then.
 * Writes them when `size` is enough; returns their size. */
int64_t shoal_mj_model_bytes(const mjModel* m, void* buffer, int64_t size) {
    const int64_t needed = mj_sizeModel(m);
    if (buffer != NULL && size >= needed) mj_saveModel(m, NULL, buffer, (int)needed);
    return needed;
}

int shoal_mj_num_kinds(void) { return NUM_KINDS; }
const char* shoal_mj_kind_name(int kind) { return KINDS[kind]->name; }

int shoal_mj_obs_size(int kind, const mjModel* m, const double* cfg) {
    return KINDS[kind]->obs_size ? KINDS[kind]->obs_size(m, cfg) : -1;
}

int shoal_mj_state_bytes(void) { return (int)sizeof(mujoco_state); }
int shoal_mj_episode_bytes(void) { return (int)sizeof(shoal_episode); }

/* ---- MuJoCo's profiling clock, off while shoal steps -------------------------
 *
 * The `mujoco` Python module sets mjcb_time when it is imported (by a
 * renderer, gymnasium's own MuJoCo envs, `import mujoco` in a script; a
 * forked worker inherits it): the clock behind mjData.timer, which mj_step
 * then reads at every stage it times. Measured on Hopper (2-core EPYC, 64
 * envs): 19% of the step. No shoal env reads mjData.timer, so the clock
 * is taken down while shoal's envs step, reset or set state, and put back
 * after. Counted across threads as the error handler above; put back only
 * where nothing set another clock meanwhile. With no clock set (the usual
 * case), nothing is locked. */
static pthread_mutex_t clock_lock = PTHREAD_MUTEX_INITIALIZER;
static int threads_without_clock;
static mjfTime clock_replaced;

static int begin_without_clock(void) {
    if (!__atomic_load_n(&mjcb_time, __ATOMIC_RELAXED)) return 0;
    pthread_mutex_lock(&clock_lock);
    if (threads_without_clock++ == 0) {
        clock_replaced = mjcb_time;
        mjcb_time = NULL;
    }
    pthread_mutex_unlock(&clock_lock);
    return 1;
}

static void end_without_clock(int began) {
    if (!began) return;
    pthread_mutex_lock(&clock_lock);
    if (--threads_without_clock == 0 && !mjcb_time) mjcb_time = clock_replaced;
    pthread_mutex_unlock(&clock_lock);
}

/* ---- blocks ---------------------------------------------------------------- */

typedef struct {
    shoal_block_ops ops;          /* what the worker loop calls */
    mujoco_env* envs;
    int64_t count;
    shoal_episode* episodes;
    const uint8_t* requests;
    const uint8_t* selected;      /* STEP_SELECTED: which envs step */
    const uint64_t* seeds;
    const float* actions;
    double* obs;
    double* final_obs;            /* NULL unless SAME_STEP keeps final obs */
    float* rewards;
    uint8_t *terminals, *truncations, *masks;
    int mode;
    double* cfg;                  /* the block's own copy of the parameters */
} shoal_mj_block;

static void block_run(void* ctx, int command) {
    shoal_mj_block* b = (shoal_mj_block*)ctx;
    const int began = begin_without_clock();
    if (command == SHOAL_CMD_STEP)
        mujoco_vec_step(b->envs, b->episodes, b->count, b->actions, b->obs, b->rewards,
                        b->terminals, b->truncations, b->masks, b->final_obs, b->mode);
    else if (command == SHOAL_CMD_RESET)
        mujoco_vec_reset(b->envs, b->episodes, b->count, b->requests, b->seeds, b->obs,
                         b->rewards, b->terminals, b->truncations, b->masks);
    else if (command == SHOAL_CMD_STEP_SELECTED)
        mujoco_vec_step_selected(b->envs, b->episodes, b->count, b->selected, b->actions, b->obs,
                                 b->rewards, b->terminals, b->truncations, b->masks,
                                 b->final_obs, b->mode);
    end_without_clock(began);
}

void shoal_mj_block_free(shoal_mj_block* b) {
    if (!b) return;
    if (b->envs)
        for (int64_t i = 0; i < b->count; i++)
            if (b->envs[i].d) mj_deleteData(b->envs[i].d);
    free(b->envs);
    free(b->cfg);
    free(b);
}

/* A block of `count` envs of `kind` over model `m`; every pointer is the
 * block's first row (or env) in the pool's buffers. Returns NULL with a
 * message in `error` on failure. */
shoal_mj_block* shoal_mj_block_new(
        int kind, const mjModel* m, const double* cfg, int num_cfg,
        int frame_skip, int max_steps, int64_t count,
        void* states, void* episodes, const uint8_t* requests, const uint8_t* selected,
        const uint64_t* seeds,
        const float* actions, double* obs, double* final_obs, float* rewards,
        uint8_t* terminals, uint8_t* truncations, uint8_t* masks, int mode,
        char* error, int error_size) {
    if (kind < 0 || kind >= NUM_KINDS) {
        snprintf(error, error_size, "unknown MuJoCo env kind %d", kind);
        return NULL;
    }
    if (!KINDS[kind]->step || !KINDS[kind]->observe || !KINDS[kind]->reset_model
            || !KINDS[kind]->obs_size) {
        snprintf(error, error_size, "%s is not implemented in shoal's MuJoCo library yet",
                 KINDS[kind]->name);
        return NULL;
    }
    if (m->nq > 64 || m->nv > 64) {
        snprintf(error, error_size, "models with more than 64 qpos or qvel are not supported "
                 "(this one has nq=%d, nv=%d)", m->nq, m->nv);
        return NULL;
    }
    if (KINDS[kind]->obs_size(m, cfg) < 0) {
        snprintf(error, error_size, "%s cannot step this model (it lacks a body the env reads by "
                 "name, or main_body is not one of its bodies)", KINDS[kind]->name);
        return NULL;
    }
    shoal_mj_block* b = (shoal_mj_block*)calloc(1, sizeof(shoal_mj_block));
    if (!b) goto oom;
    b->cfg = (double*)malloc(sizeof(double) * (num_cfg > 0 ? num_cfg : 1));
    b->envs = (mujoco_env*)calloc((size_t)count, sizeof(mujoco_env));
    if (!b->cfg || !b->envs) goto oom;
    b->count = count;   /* now: a failure below frees the mjData made so far (the rest are NULL) */
    memcpy(b->cfg, cfg, sizeof(double) * num_cfg);
    const int obs_size = KINDS[kind]->obs_size(m, b->cfg);
    jmp_buf jump;
    if (setjmp(jump)) {   /* mj_makeData failed (out of memory) */
        end_making_envs();
        goto oom;
    }
    begin_making_envs(&jump);
    for (int64_t i = 0; i < count; i++) {
        mujoco_env* env = &b->envs[i];
        env->m = m;
        env->d = mj_makeData(m);
        if (!env->d) {
            end_making_envs();
            goto oom;
        }
        env->state = (mujoco_state*)states + i;
        env->kind = KINDS[kind];
        env->cfg = b->cfg;
        env->obs_size = obs_size;
        env->act_size = m->nu;
        env->frame_skip = frame_skip;
        env->max_steps = max_steps;
        env->dt = m->opt.timestep * frame_skip;
    }
    end_making_envs();
    b->episodes = (shoal_episode*)episodes;
    b->requests = requests;
    b->selected = selected;
    b->seeds = seeds;
    b->actions = actions;
    b->obs = obs;
    b->final_obs = final_obs;
    b->rewards = rewards;
    b->terminals = terminals;
    b->truncations = truncations;
    b->masks = masks;
    b->mode = mode;
    b->ops.run = block_run;
    b->ops.ctx = b;
    return b;
oom:
    snprintf(error, error_size, "out of memory making %lld MuJoCo envs", (long long)count);
    shoal_mj_block_free(b);
    return NULL;
}

/* Returns how long the call took (ns), which decides whether the next one
 * gives up the GIL (binding.py, Block._run). */
int64_t shoal_mj_block_run(shoal_mj_block* b, int command) {
    struct timespec began, ended;
    clock_gettime(CLOCK_MONOTONIC, &began);
    block_run(b, command);
    clock_gettime(CLOCK_MONOTONIC, &ended);
    return (int64_t)(ended.tv_sec - began.tv_sec) * 1000000000 + (ended.tv_nsec - began.tv_nsec);
}

shoal_block_ops* shoal_mj_block_ops(shoal_mj_block* b) { return &b->ops; }

/* Env i of the block: set qpos / qvel (mj_forward, as gymnasium's set_state)
 * and write its obs row. */
void shoal_mj_block_set_state(shoal_mj_block* b, int64_t i, const double* qpos, const double* qvel) {
    mujoco_env* env = &b->envs[i];
    const int began = begin_without_clock();
    mujoco_set_state(env, qpos, qvel);
    env->kind->observe(env, b->obs + i * env->obs_size);
    end_without_clock(began);
}

void shoal_mj_block_get_state(shoal_mj_block* b, int64_t i, double* qpos, double* qvel) {
    const mujoco_env* env = &b->envs[i];
    memcpy(qpos, env->d->qpos, sizeof(double) * env->m->nq);
    memcpy(qvel, env->d->qvel, sizeof(double) * env->m->nv);
}

/* Env i of the block's whole mjData into `dest` (an mjData of `dest_model`,
 * the block's model read back from shoal_mj_model_bytes, or one loaded
 * from the same file by the same libmujoco), for rendering:
 * after mj_step the positions a renderer draws (xpos, geom_xpos, ...) are
 * those its last substep started from, not those of the final qpos, and
 * gymnasium draws them as they are. Returns 0, or -1 (nothing copied) where
 * mj_copyData would stop the process with an mjERROR: another model (its
 * compiler signature, its sizes), data buffers of other sizes, or a stack
 * in use. */
int shoal_mj_block_copy_data(shoal_mj_block* b, int64_t i, const mjModel* dest_model, mjData* dest) {
    const mujoco_env* env = &b->envs[i];
    const mjModel* m = env->m;
    const mjData* src = env->d;
    /* A model read back from MJB bytes (shoal_mj_model_bytes: the renderer's)
     * has signature 0: its model buffer's size stands in for it. */
    const int other_signature = dest_model->signature != 0 && dest_model->signature != m->signature;
    if (other_signature || dest_model->nbuffer != m->nbuffer || dest_model->nq != m->nq || dest_model->nv != m->nv
            || dest_model->nbody != m->nbody || dest_model->ngeom != m->ngeom
            || dest->nbuffer != src->nbuffer || dest->narena != src->narena || src->pstack != 0)
        return -1;
    mj_copyData(dest, m, src);
    return 0;
}

/* The plain C loop, for benchmarks: `steps` steps of the whole block, step t
 * reading its actions from row (first_row + t) % rows of `table`
 * (rows x count x nu). */
void shoal_mj_block_run_steps(shoal_mj_block* b, const float* table, int64_t rows, int64_t steps,
                              int64_t first_row) {
    const float* saved = b->actions;
    const int64_t stride = b->count * b->envs[0].act_size;
    for (int64_t t = 0; t < steps; t++) {
        b->actions = table + ((first_row + t) % rows) * stride;
        block_run(b, SHOAL_CMD_STEP);
    }
    b->actions = saved;
}
