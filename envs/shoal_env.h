/* shoal_env.h — what every env header includes.
 *
 * SHOAL_FN marks every env function. Under nvcc it expands to
 * __host__ __device__ so the very same source becomes a CUDA kernel body;
 * elsewhere it is plain `static inline` C. Env headers therefore use no libc
 * call a GPU lacks (math from <math.h> only: sinf, cosf, sqrtf, ...), allocate
 * nothing and keep no globals: the whole state of one env, RNG included,
 * lives in its struct.
 */
#ifndef SHOAL_ENV_H
#define SHOAL_ENV_H

#include <stdint.h>
#include <math.h>

#ifdef __CUDACC__
#define SHOAL_FN __host__ __device__ static inline
#else
#define SHOAL_FN static inline
#endif

/* ---- RNG: SplitMix64, one 64-bit word of state -------------------------
 * Small, fast, statistically sound (passes BigCrush), identical on CPU and
 * GPU. Seeding hashes the seed once, so seeds s and s+1 (env i and env i+1
 * of a pool, see the seed rule) give unrelated streams. */
typedef struct { uint64_t state; } shoal_rng;

SHOAL_FN uint64_t shoal_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

SHOAL_FN void shoal_rng_seed(shoal_rng* rng, uint64_t seed) {
    rng->state = shoal_mix64(seed ^ 0x5851F42D4C957F2DULL);
}

SHOAL_FN uint64_t shoal_rng_u64(shoal_rng* rng) {
    rng->state += 0x9E3779B97F4A7C15ULL;
    return shoal_mix64(rng->state);
}

SHOAL_FN uint32_t shoal_rng_u32(shoal_rng* rng) {
    return (uint32_t)(shoal_rng_u64(rng) >> 32);
}

/* Uniform integer in [0, n), n > 0 (multiply-shift, no modulo bias worth
 * measuring for the small n envs use). */
SHOAL_FN uint32_t shoal_rng_below(shoal_rng* rng, uint32_t n) {
    return (uint32_t)(((uint64_t)shoal_rng_u32(rng) * n) >> 32);
}

/* Uniform float in [lo, hi): 24 random bits, exact in float32. */
SHOAL_FN float shoal_rng_uniform(shoal_rng* rng, float lo, float hi) {
    float unit = (float)(shoal_rng_u32(rng) >> 8) * (1.0f / 16777216.0f);
    return lo + (hi - lo) * unit;
}

/* ---- the spaces, beside P_agents / P_obs_size / P_act_size -------------
 * An env header also declares what its spaces are (the binding exports
 * them and shoal.envs builds the env's EnvSpec from them):
 *     P_max_steps                  in the sizes enum: the step limit (0: none)
 *     P_obs_low[], P_obs_high[]    static const tables of obs bounds: one
 *                                  entry (every element) or one per element
 *     P_act_nvec[]                 static const table, one entry per action
 *                                  component: component j is in [0, nvec[j])
 * The tables are read on the host only. SHOAL_REPEAT_n(x) writes x n times
 * (n a power of two up to 64), for runs of equal bounds in a per-element
 * table. */
#define SHOAL_REPEAT_2(x) x, x
#define SHOAL_REPEAT_4(x) SHOAL_REPEAT_2(x), SHOAL_REPEAT_2(x)
#define SHOAL_REPEAT_8(x) SHOAL_REPEAT_4(x), SHOAL_REPEAT_4(x)
#define SHOAL_REPEAT_16(x) SHOAL_REPEAT_8(x), SHOAL_REPEAT_8(x)
#define SHOAL_REPEAT_32(x) SHOAL_REPEAT_16(x), SHOAL_REPEAT_16(x)
#define SHOAL_REPEAT_64(x) SHOAL_REPEAT_32(x), SHOAL_REPEAT_32(x)

/* ---- shared read-only assets (maps, floorplans) --------------------------
 * An env whose envs share big read-only data keeps it in one flat struct T,
 * built once per process on the host, indexed from the env struct (never a
 * pointer in it), and uploaded once per GPU by the CUDA backend.
 * SHOAL_ASSETS_STORAGE(P, T) declares, under the env's prefix P:
 *     P_assets_host, P_assets_ready   the host copy and its built flag
 *     P_assets_ptr                    (nvcc) the GPU copy, set by shoal.cuda
 * and SHOAL_ASSETS_OF(P) is the copy the current code runs against: the
 * GPU's in device code, the host's everywhere else. */
#ifdef __CUDACC__
#define SHOAL_ASSETS_STORAGE(P, T) \
    __device__ const T* P##_assets_ptr; \
    static T P##_assets_host; \
    static int P##_assets_ready = 0;
#ifdef __CUDA_ARCH__
#define SHOAL_ASSETS_OF(P) (P##_assets_ptr)
#else
#define SHOAL_ASSETS_OF(P) (&P##_assets_host)
#endif
#else
#define SHOAL_ASSETS_STORAGE(P, T) \
    static T P##_assets_host; \
    static int P##_assets_ready = 0;
#define SHOAL_ASSETS_OF(P) (&P##_assets_host)
#endif

#endif /* SHOAL_ENV_H */
