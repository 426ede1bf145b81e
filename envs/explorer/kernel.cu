/* explorer as a CUDA kernel: explorer.h through the shared vector loop (shoal_kernel.cuh). */
#include "explorer/explorer.h"
#define SHOAL_VEC_ENV explorer
#include "shoal_vec.h"
#define SHOAL_KERNEL_ASSETS_T explorer_assets
#define SHOAL_KERNEL_ASSETS_PTR explorer_assets_ptr
#include "shoal_kernel.cuh"
