/* shoal_kernel.cuh — the vector loop as a CUDA kernel, one thread per env.
 *
 * Include it after an env header and shoal_vec.h, with SHOAL_VEC_ENV still
 * naming the env's prefix P (see envs/<env>/kernel.cu):
 *
 *     #include "cartpole/cartpole.h"
 *     #define SHOAL_VEC_ENV cartpole
 *     #include "shoal_vec.h"
 *     #include "shoal_kernel.cuh"
 *
 * Envs with shared read-only assets also define, before including this file,
 *     SHOAL_KERNEL_ASSETS_T    the assets struct (drive_assets)
 *     SHOAL_KERNEL_ASSETS_PTR  its `__device__` pointer (drive_assets_ptr)
 *
 * Each thread runs P_slot_reset / P_slot_step of shoal_vec.h on its own env:
 * the step logic and the autoreset rules are the header's, exactly as in the
 * Cython loop. Memory is the pool's layout (env structs back to back, rows
 * of env i at rows i*agents ..), so buffers copied between the CPU pool and
 * the GPU mean the same thing on both.
 *
 * What is generated, with plain C linkage and the env's prefix (one torch
 * extension per env, see shoal/cuda.py):
 *     P_cuda_step(...), P_cuda_reset(...)   launch on a stream, return a cudaError_t
 *     P_cuda_step_staged(...)               the step with env structs staged in shared memory
 *     P_cuda_staged_smem(threads, stage_obs) its shared memory per block
 *     P_cuda_set_assets(ptr, bytes)         point P_assets_ptr at uploaded assets
 *     P_cuda_env_bytes(), P_cuda_assets_bytes(), P_cuda_layout(out[3])
 *     P_cuda_error(code)                    cudaGetErrorString
 * No torch header is needed: CI compiles this with plain nvcc.
 */
#ifndef SHOAL_VEC_ENV
#error "include an env header and shoal_vec.h with SHOAL_VEC_ENV defined first"
#endif

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#ifndef SHOAL_KERNEL_THREADS
#define SHOAL_KERNEL_THREADS 128   /* threads per block */
#endif

#define SHOAL_K(name) SHOAL_CAT(SHOAL_VEC_ENV, name)
#define SHOAL_K_ENV SHOAL_K(env)
#define SHOAL_K_OBS SHOAL_K(obs_t)
#define SHOAL_K_ACT SHOAL_K(act_t)

__global__ void SHOAL_K(step_kernel)(SHOAL_K_ENV* envs, shoal_episode* eps, int64_t n,
                                     const SHOAL_K_ACT* act, SHOAL_K_OBS* obs, float* rew,
                                     uint8_t* term, uint8_t* trunc, uint8_t* mask,
                                     SHOAL_K_OBS* final_obs, int mode) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int64_t A = SHOAL_K(agents), O = SHOAL_K(obs_size), C = SHOAL_K(act_size);
    SHOAL_K(slot_step)(&envs[i], &eps[i], act + i * A * C, obs + i * A * O, rew + i * A,
                       term + i * A, trunc + i * A, mask + i * A,
                       final_obs ? final_obs + i * A * O : 0, mode);
}

__global__ void SHOAL_K(reset_kernel)(SHOAL_K_ENV* envs, shoal_episode* eps, int64_t n,
                                      const uint8_t* requests, const uint64_t* seeds,
                                      SHOAL_K_OBS* obs, float* rew, uint8_t* term,
                                      uint8_t* trunc, uint8_t* mask) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || requests[i] == SHOAL_KEEP) return;
    const int64_t A = SHOAL_K(agents), O = SHOAL_K(obs_size);
    if (requests[i] == SHOAL_RESEED) SHOAL_K(seed)(&envs[i], seeds[i]);
    SHOAL_K(slot_reset)(&envs[i], &eps[i], obs + i * A * O, rew + i * A, term + i * A,
                        trunc + i * A, mask + i * A);
}

#ifndef SHOAL_KERNEL_STAGE_COMMON
#define SHOAL_KERNEL_STAGE_COMMON
/* Copy `bytes` between 16-byte aligned global and shared memory, all threads
 * of the block together: consecutive threads touch consecutive 8-byte words,
 * so a warp's loads and stores are coalesced. */
__device__ __forceinline__ void shoal_block_copy(void* dst, const void* src, size_t bytes) {
    const size_t words = bytes / 8;
    uint64_t* d = (uint64_t*)dst;
    const uint64_t* s = (const uint64_t*)src;
    for (size_t w = threadIdx.x; w < words; w += blockDim.x) d[w] = s[w];
    for (size_t b = 8 * words + threadIdx.x; b < bytes; b += blockDim.x)
        ((uint8_t*)dst)[b] = ((const uint8_t*)src)[b];
}

__host__ __device__ static inline size_t shoal_round16(size_t bytes) { return (bytes + 15) & ~(size_t)15; }
#endif

/* The staged step: the same slot_step, on a copy of the block's env structs
 * in shared memory. Env structs are an array of structs, so in the direct
 * kernel the 32 threads of a warp each walk their own struct: every load
 * touches 32 cache lines, and for envs of kilobytes (Snake 2.6 KB, Drive
 * 1.8 KB) the working set of the resident threads overflows L1 and the
 * kernel runs at a fraction of the memory bandwidth (scripts/profile_gpu.py).
 * Here the block's structs, which are contiguous, are copied in and out with
 * coalesced loads, and the step's scattered accesses hit shared memory. With
 * stage_obs the obs rows are written to shared memory too and copied out
 * coalesced. Dynamic shared memory: blockDim.x * (env bytes [+ obs bytes]). */
__global__ void SHOAL_K(step_staged_kernel)(SHOAL_K_ENV* envs, shoal_episode* eps, int64_t n,
                                            const SHOAL_K_ACT* act, SHOAL_K_OBS* obs, float* rew,
                                            uint8_t* term, uint8_t* trunc, uint8_t* mask,
                                            SHOAL_K_OBS* final_obs, int mode, int stage_obs) {
    extern __shared__ __align__(16) unsigned char shoal_stage[];
    const int64_t A = SHOAL_K(agents), O = SHOAL_K(obs_size), C = SHOAL_K(act_size);
    const int64_t first = (int64_t)blockIdx.x * blockDim.x;
    const int64_t count = n - first < (int64_t)blockDim.x ? n - first : (int64_t)blockDim.x;
    SHOAL_K_ENV* staged = (SHOAL_K_ENV*)shoal_stage;
    SHOAL_K_OBS* staged_obs =
        (SHOAL_K_OBS*)(shoal_stage + shoal_round16(blockDim.x * sizeof(SHOAL_K_ENV)));
    const size_t env_bytes = (size_t)count * sizeof(SHOAL_K_ENV);
    const size_t obs_bytes = (size_t)count * A * O * sizeof(SHOAL_K_OBS);
    shoal_block_copy(staged, envs + first, env_bytes);
    __syncthreads();
    const int64_t t = threadIdx.x, i = first + t;
    if (t < count) {
        SHOAL_K_OBS* out = stage_obs ? staged_obs + t * A * O : obs + i * A * O;
        SHOAL_K(slot_step)(&staged[t], &eps[i], act + i * A * C, out, rew + i * A,
                           term + i * A, trunc + i * A, mask + i * A,
                           final_obs ? final_obs + i * A * O : 0, mode);
    }
    __syncthreads();
    shoal_block_copy(envs + first, staged, env_bytes);
    if (stage_obs) shoal_block_copy(obs + first * A * O, staged_obs, obs_bytes);
}

static unsigned SHOAL_K(blocks)(int64_t n) {
    return (unsigned)((n + SHOAL_KERNEL_THREADS - 1) / SHOAL_KERNEL_THREADS);
}

/* Dynamic shared memory of the staged kernel at `threads` per block. */
extern "C" size_t SHOAL_K(cuda_staged_smem)(int threads, int stage_obs) {
    size_t bytes = shoal_round16((size_t)threads * sizeof(SHOAL_K_ENV));
    if (stage_obs)
        bytes += (size_t)threads * SHOAL_K(agents) * SHOAL_K(obs_size) * sizeof(SHOAL_K_OBS);
    return bytes;
}

/* The staged step (see step_staged_kernel), `threads` per block (a multiple
 * of 32). Fails with cudaErrorInvalidValue where the block's stage does not
 * fit the device's shared memory. */
extern "C" int SHOAL_K(cuda_step_staged)(void* envs, void* eps, int64_t n, const void* act,
                                         void* obs, void* rew, void* term, void* trunc,
                                         void* mask, void* final_obs, int mode, int threads,
                                         int stage_obs, void* stream) {
    if (n <= 0) return 0;
    if (threads <= 0 || threads % 32) return (int)cudaErrorInvalidValue;
    const size_t smem = SHOAL_K(cuda_staged_smem)(threads, stage_obs);
    if (smem > 48 * 1024) {  /* past the default limit: opt in (per device, so every call) */
        cudaError_t e = cudaFuncSetAttribute(SHOAL_K(step_staged_kernel),
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (e != cudaSuccess) return (int)e;
    }
    const unsigned blocks = (unsigned)((n + threads - 1) / threads);
    SHOAL_K(step_staged_kernel)<<<blocks, threads, smem, (cudaStream_t)stream>>>(
        (SHOAL_K_ENV*)envs, (shoal_episode*)eps, n, (const SHOAL_K_ACT*)act, (SHOAL_K_OBS*)obs,
        (float*)rew, (uint8_t*)term, (uint8_t*)trunc, (uint8_t*)mask, (SHOAL_K_OBS*)final_obs,
        mode, stage_obs);
    return (int)cudaGetLastError();
}

extern "C" int SHOAL_K(cuda_step)(void* envs, void* eps, int64_t n, const void* act, void* obs,
                                  void* rew, void* term, void* trunc, void* mask,
                                  void* final_obs, int mode, void* stream) {
    if (n <= 0) return 0;
    SHOAL_K(step_kernel)<<<SHOAL_K(blocks)(n), SHOAL_KERNEL_THREADS, 0, (cudaStream_t)stream>>>(
        (SHOAL_K_ENV*)envs, (shoal_episode*)eps, n, (const SHOAL_K_ACT*)act, (SHOAL_K_OBS*)obs,
        (float*)rew, (uint8_t*)term, (uint8_t*)trunc, (uint8_t*)mask, (SHOAL_K_OBS*)final_obs, mode);
    return (int)cudaGetLastError();
}

extern "C" int SHOAL_K(cuda_reset)(void* envs, void* eps, int64_t n, const void* requests,
                                   const void* seeds, void* obs, void* rew, void* term,
                                   void* trunc, void* mask, void* stream) {
    if (n <= 0) return 0;
    SHOAL_K(reset_kernel)<<<SHOAL_K(blocks)(n), SHOAL_KERNEL_THREADS, 0, (cudaStream_t)stream>>>(
        (SHOAL_K_ENV*)envs, (shoal_episode*)eps, n, (const uint8_t*)requests,
        (const uint64_t*)seeds, (SHOAL_K_OBS*)obs, (float*)rew, (uint8_t*)term, (uint8_t*)trunc,
        (uint8_t*)mask);
    return (int)cudaGetLastError();
}

/* Point the env's __device__ assets pointer (of the current device) at
 * `bytes` bytes already on that device: the host-built assets, uploaded
 * once per GPU by the loader. Envs without assets accept bytes == 0. */
extern "C" int SHOAL_K(cuda_set_assets)(const void* device_ptr, size_t bytes) {
#ifdef SHOAL_KERNEL_ASSETS_T
    if (bytes != sizeof(SHOAL_KERNEL_ASSETS_T)) return (int)cudaErrorInvalidValue;
    const SHOAL_KERNEL_ASSETS_T* p = (const SHOAL_KERNEL_ASSETS_T*)device_ptr;
    return (int)cudaMemcpyToSymbol(SHOAL_KERNEL_ASSETS_PTR, &p, sizeof(p));
#else
    (void)device_ptr;
    return bytes == 0 ? 0 : (int)cudaErrorInvalidValue;
#endif
}

extern "C" size_t SHOAL_K(cuda_env_bytes)(void) { return sizeof(SHOAL_K_ENV); }

extern "C" size_t SHOAL_K(cuda_assets_bytes)(void) {
#ifdef SHOAL_KERNEL_ASSETS_T
    return sizeof(SHOAL_KERNEL_ASSETS_T);
#else
    return 0;
#endif
}

/* agents, obs elements per row, action elements per row */
extern "C" void SHOAL_K(cuda_layout)(int64_t* out) {
    out[0] = SHOAL_K(agents);
    out[1] = SHOAL_K(obs_size);
    out[2] = SHOAL_K(act_size);
}

extern "C" const char* SHOAL_K(cuda_error)(int code) {
    return cudaGetErrorString((cudaError_t)code);
}

#undef SHOAL_K_ENV
#undef SHOAL_K_OBS
#undef SHOAL_K_ACT
