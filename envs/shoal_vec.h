/* shoal_vec.h — the vector loop shared by every env and every backend.
 *
 * Include it after an env header, naming the env's prefix:
 *
 *     #include "cartpole.h"
 *     #define SHOAL_VEC_ENV cartpole
 *     #include "shoal_vec.h"
 *
 * The env header provides, under its prefix P:
 *     P_env                       the struct holding one env's whole state
 *     P_obs_t, P_act_t            element types of observation and action rows
 *     P_agents, P_obs_size, P_act_size
 *                                 rows per env, elements per obs row and action row
 *     P_max_steps                 the step limit (0: none), in the same enum
 *     P_obs_low[], P_obs_high[]   observation bounds: one entry, or one per element
 *     P_act_nvec[]                choices per action component (P_act_size entries)
 *                                 (these three are read by the binding, on the host:
 *                                 the EnvSpec is built from them)
 *     P_seed(env, seed)           reseeds the env's RNG
 *     P_reset(env, obs, mask)     starts an episode, writes obs / mask rows
 *     P_step(env, act, obs, rew, term, trunc, mask) -> episode over?
 *
 * This file generates P_slot_reset / P_slot_step (one env, host+device: the
 * CUDA kernel calls them with one thread per env) and P_vec_reset /
 * P_vec_step (a contiguous block of envs, called by the Cython binding
 * without the GIL). Autoreset and episode bookkeeping live here and only
 * here, so every backend applies the same rules. The env itself never
 * resets on its own.
 */
#ifndef SHOAL_VEC_ENV
#error "define SHOAL_VEC_ENV (the env prefix) before including shoal_vec.h"
#endif

#ifndef SHOAL_VEC_COMMON
#define SHOAL_VEC_COMMON

#define SHOAL_CAT_(a, b) a##_##b
#define SHOAL_CAT(a, b) SHOAL_CAT_(a, b)

/* Autoreset modes (gymnasium.vector.AutoresetMode). */
enum { SHOAL_NEXT_STEP = 0, SHOAL_SAME_STEP = 1, SHOAL_DISABLED = 2 };

/* Per-env reset requests (the pool's reset_requests buffer). */
enum { SHOAL_KEEP = 0, SHOAL_RESET = 1, SHOAL_RESEED = 2 };

/* Episode bookkeeping for one env, kept beside the env state in the pool's
 * `episodes` buffer. Finished-episode totals only ever grow; the pool reads
 * differences off the hot path. Layout mirrored by pool/layout.py. */
typedef struct {
    double  episode_return;   /* return of the episode in progress (sum over rows) */
    double  return_sum;       /* sum of the returns of finished episodes */
    int64_t finished;         /* number of finished episodes */
    int64_t length_sum;       /* sum of the lengths of finished episodes */
    int32_t episode_length;   /* steps of the episode in progress */
    uint8_t needs_reset;      /* NEXT_STEP: the last step ended the episode */
    uint8_t pad_[3];
    /* A pool's step limit, shorter than the header's own (0: the header's
     * only). Set once by the pool (max_episode_steps), never by an env. */
    int32_t step_limit;
    int32_t pad2_;
} shoal_episode;

typedef char shoal_episode_is_48_bytes[sizeof(shoal_episode) == 48 ? 1 : -1];

#endif /* SHOAL_VEC_COMMON */

#define SHOAL_V(name) SHOAL_CAT(SHOAL_VEC_ENV, name)
#define SHOAL_ENV_T SHOAL_V(env)
/* Elements per obs / action row of an env. A header env's are compile-time
 * constants (P_obs_size, P_act_size); an env kind whose sizes are set at
 * construction (library-backed envs: envs/mujoco/) defines these two macros
 * before including this file, reading them off the env (every env of a block
 * has the same sizes). */
#ifndef SHOAL_VEC_OBS_SIZE
#define SHOAL_VEC_OBS_SIZE(env) SHOAL_V(obs_size)
#define SHOAL_VEC_ACT_SIZE(env) SHOAL_V(act_size)
#endif
#define SHOAL_OBS_T SHOAL_V(obs_t)
#define SHOAL_ACT_T SHOAL_V(act_t)

/* Start a new episode in one env: obs / mask from the env, reward and flags
 * zero (gymnasium's NEXT_STEP reset step). */
SHOAL_FN void SHOAL_V(slot_reset)(SHOAL_ENV_T* env, shoal_episode* ep,
                                  SHOAL_OBS_T* obs, float* rew, uint8_t* term,
                                  uint8_t* trunc, uint8_t* mask) {
    SHOAL_V(reset)(env, obs, mask);
    for (int a = 0; a < SHOAL_V(agents); a++) {
        rew[a] = 0.0f;
        term[a] = 0;
        trunc[a] = 0;
    }
    ep->needs_reset = 0;
    ep->episode_return = 0.0;
    ep->episode_length = 0;
}

/* One env, one step, autoreset applied per `mode`. final_obs may be NULL;
 * in SAME_STEP it receives the last obs of an episode that just ended. */
SHOAL_FN void SHOAL_V(slot_step)(SHOAL_ENV_T* env, shoal_episode* ep,
                                 const SHOAL_ACT_T* act, SHOAL_OBS_T* obs,
                                 float* rew, uint8_t* term, uint8_t* trunc,
                                 uint8_t* mask, SHOAL_OBS_T* final_obs,
                                 int mode) {
    if (ep->needs_reset) {
        if (mode == SHOAL_NEXT_STEP) {
            /* The step after a done: the action is ignored, the env resets. */
            SHOAL_V(slot_reset)(env, ep, obs, rew, term, trunc, mask);
        } else {
            /* DISABLED, stepped past a done without a reset: the env goes on
             * as its header says, but no episode is counted again. The
             * pool's limit, as gymnasium's TimeLimit, keeps truncating once
             * its count is reached (episode_length is zeroed by a reset). */
            SHOAL_V(step)(env, act, obs, rew, term, trunc, mask);
            ep->episode_length += 1;
            if (ep->step_limit > 0 && ep->episode_length >= ep->step_limit)
                for (int a = 0; a < SHOAL_V(agents); a++) trunc[a] = (uint8_t)(trunc[a] || mask[a]);
        }
        return;
    }
    int over = SHOAL_V(step)(env, act, obs, rew, term, trunc, mask);
    double step_return = 0.0;
    for (int a = 0; a < SHOAL_V(agents); a++) step_return += rew[a];
    ep->episode_return += step_return;
    ep->episode_length += 1;
    if (ep->step_limit > 0 && ep->episode_length >= ep->step_limit) {
        /* The pool's time limit, as gymnasium's TimeLimit: every present
         * row is truncated, terminated on this step or not. */
        for (int a = 0; a < SHOAL_V(agents); a++) trunc[a] = (uint8_t)(trunc[a] || mask[a]);
        over = 1;
    }
    if (!over) return;

    ep->finished += 1;
    ep->return_sum += ep->episode_return;
    ep->length_sum += ep->episode_length;
    ep->episode_return = 0.0;
    if (mode == SHOAL_SAME_STEP) {
        ep->episode_length = 0;   /* NEXT_STEP / DISABLED: zeroed by the reset */
        if (final_obs) {
            const int n = SHOAL_V(agents) * SHOAL_VEC_OBS_SIZE(env);
            for (int k = 0; k < n; k++) final_obs[k] = obs[k];
        }
        SHOAL_V(reset)(env, obs, mask);
    } else {
        ep->needs_reset = 1;
    }
}

/* Host-side loops over a contiguous block of n envs; every pointer points at
 * the block's first row. */
#ifndef __CUDACC__
static void SHOAL_V(vec_reset)(SHOAL_ENV_T* envs, shoal_episode* eps, int64_t n,
                               const uint8_t* requests, const uint64_t* seeds,
                               SHOAL_OBS_T* obs, float* rew, uint8_t* term,
                               uint8_t* trunc, uint8_t* mask) {
    if (n <= 0) return;
    const int64_t A = SHOAL_V(agents), O = SHOAL_VEC_OBS_SIZE(envs);
    for (int64_t i = 0; i < n; i++) {
        if (requests[i] == SHOAL_KEEP) continue;
        if (requests[i] == SHOAL_RESEED) SHOAL_V(seed)(&envs[i], seeds[i]);
        SHOAL_V(slot_reset)(&envs[i], &eps[i], obs + i * A * O, rew + i * A,
                            term + i * A, trunc + i * A, mask + i * A);
    }
}

static void SHOAL_V(vec_step)(SHOAL_ENV_T* envs, shoal_episode* eps, int64_t n,
                              const SHOAL_ACT_T* act, SHOAL_OBS_T* obs,
                              float* rew, uint8_t* term, uint8_t* trunc,
                              uint8_t* mask, SHOAL_OBS_T* final_obs, int mode) {
    if (n <= 0) return;
    const int64_t A = SHOAL_V(agents), O = SHOAL_VEC_OBS_SIZE(envs), C = SHOAL_VEC_ACT_SIZE(envs);
    for (int64_t i = 0; i < n; i++) {
        SHOAL_V(slot_step)(&envs[i], &eps[i], act + i * A * C, obs + i * A * O,
                           rew + i * A, term + i * A, trunc + i * A, mask + i * A,
                           final_obs ? final_obs + i * A * O : 0, mode);
    }
}

/* vec_step for the envs i with selected[i] != 0 only: the others keep their
 * state, episode bookkeeping and rows as they are. */
static void SHOAL_V(vec_step_selected)(SHOAL_ENV_T* envs, shoal_episode* eps, int64_t n,
                                       const uint8_t* selected, const SHOAL_ACT_T* act,
                                       SHOAL_OBS_T* obs, float* rew, uint8_t* term,
                                       uint8_t* trunc, uint8_t* mask, SHOAL_OBS_T* final_obs,
                                       int mode) {
    if (n <= 0) return;
    const int64_t A = SHOAL_V(agents), O = SHOAL_VEC_OBS_SIZE(envs), C = SHOAL_VEC_ACT_SIZE(envs);
    for (int64_t i = 0; i < n; i++) {
        if (!selected[i]) continue;
        SHOAL_V(slot_step)(&envs[i], &eps[i], act + i * A * C, obs + i * A * O,
                           rew + i * A, term + i * A, trunc + i * A, mask + i * A,
                           final_obs ? final_obs + i * A * O : 0, mode);
    }
}
#endif

#undef SHOAL_VEC_OBS_SIZE
#undef SHOAL_VEC_ACT_SIZE
#undef SHOAL_ENV_T
#undef SHOAL_OBS_T
#undef SHOAL_ACT_T
#undef SHOAL_V
