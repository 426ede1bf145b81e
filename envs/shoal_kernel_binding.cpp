// shoal_kernel_binding.cpp — the Python face of one env's CUDA kernel.
//
// Compiled by shoal/cuda.py together with envs/<env>/kernel.cu into the
// torch extension shoal_<env>_kernel, with -DSHOAL_KERNEL_ENV=<env prefix>.
// It only forwards raw device addresses (tensor.data_ptr()) and a CUDA
// stream handle to the launchers of shoal_kernel.cuh and turns a CUDA error
// into a Python RuntimeError; tensors, devices and checks live in Python.
#include <pybind11/pybind11.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#define SHOAL_B_CAT_(a, b) a##_##b
#define SHOAL_B_CAT(a, b) SHOAL_B_CAT_(a, b)
#define SHOAL_B(name) SHOAL_B_CAT(SHOAL_KERNEL_ENV, name)

extern "C" {
int SHOAL_B(cuda_step)(void* envs, void* eps, int64_t n, const void* act, void* obs, void* rew,
                       void* term, void* trunc, void* mask, void* final_obs, int mode, void* stream);
int SHOAL_B(cuda_step_staged)(void* envs, void* eps, int64_t n, const void* act, void* obs,
                              void* rew, void* term, void* trunc, void* mask, void* final_obs,
                              int mode, int threads, int stage_obs, void* stream);
size_t SHOAL_B(cuda_staged_smem)(int threads, int stage_obs);
int SHOAL_B(cuda_reset)(void* envs, void* eps, int64_t n, const void* requests, const void* seeds,
                        void* obs, void* rew, void* term, void* trunc, void* mask, void* stream);
int SHOAL_B(cuda_set_assets)(const void* device_ptr, size_t bytes);
size_t SHOAL_B(cuda_env_bytes)(void);
size_t SHOAL_B(cuda_assets_bytes)(void);
void SHOAL_B(cuda_layout)(int64_t* out);
const char* SHOAL_B(cuda_error)(int code);
}

namespace {

void check(int code, const char* what) {
    if (code != 0)
        throw std::runtime_error(std::string("shoal CUDA ") + what + ": " + SHOAL_B(cuda_error)(code));
}

void* ptr(std::uintptr_t address) { return reinterpret_cast<void*>(address); }

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.doc() = "One shoal env's CUDA kernels (raw device addresses; see shoal/cuda.py).";
    m.def("step", [](std::uintptr_t envs, std::uintptr_t eps, int64_t n, std::uintptr_t act,
                     std::uintptr_t obs, std::uintptr_t rew, std::uintptr_t term,
                     std::uintptr_t trunc, std::uintptr_t mask, std::uintptr_t final_obs,
                     int mode, std::uintptr_t stream) {
        check(SHOAL_B(cuda_step)(ptr(envs), ptr(eps), n, ptr(act), ptr(obs), ptr(rew), ptr(term),
                                 ptr(trunc), ptr(mask), ptr(final_obs), mode, ptr(stream)),
              "step");
    });
    m.def("step_staged", [](std::uintptr_t envs, std::uintptr_t eps, int64_t n, std::uintptr_t act,
                            std::uintptr_t obs, std::uintptr_t rew, std::uintptr_t term,
                            std::uintptr_t trunc, std::uintptr_t mask, std::uintptr_t final_obs,
                            int mode, int threads, int stage_obs, std::uintptr_t stream) {
        check(SHOAL_B(cuda_step_staged)(ptr(envs), ptr(eps), n, ptr(act), ptr(obs), ptr(rew),
                                        ptr(term), ptr(trunc), ptr(mask), ptr(final_obs), mode,
                                        threads, stage_obs, ptr(stream)),
              "step_staged");
    });
    m.def("staged_smem", [](int threads, int stage_obs) {
        return SHOAL_B(cuda_staged_smem)(threads, stage_obs);
    });
    m.def("reset", [](std::uintptr_t envs, std::uintptr_t eps, int64_t n, std::uintptr_t requests,
                      std::uintptr_t seeds, std::uintptr_t obs, std::uintptr_t rew,
                      std::uintptr_t term, std::uintptr_t trunc, std::uintptr_t mask,
                      std::uintptr_t stream) {
        check(SHOAL_B(cuda_reset)(ptr(envs), ptr(eps), n, ptr(requests), ptr(seeds), ptr(obs),
                                  ptr(rew), ptr(term), ptr(trunc), ptr(mask), ptr(stream)),
              "reset");
    });
    m.def("set_assets", [](std::uintptr_t device_ptr, size_t bytes) {
        check(SHOAL_B(cuda_set_assets)(ptr(device_ptr), bytes), "set_assets");
    });
    int64_t layout[3];
    SHOAL_B(cuda_layout)(layout);
    m.attr("ENV_BYTES") = SHOAL_B(cuda_env_bytes)();
    m.attr("ASSETS_BYTES") = SHOAL_B(cuda_assets_bytes)();
    m.attr("AGENTS") = layout[0];
    m.attr("OBS_SIZE") = layout[1];
    m.attr("ACT_SIZE") = layout[2];
}
