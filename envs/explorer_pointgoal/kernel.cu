/* explorer_pointgoal as a CUDA kernel: explorer_pointgoal.h through the shared vector loop (shoal_kernel.cuh). */
#include "explorer_pointgoal/explorer_pointgoal.h"
#define SHOAL_VEC_ENV explorer_pointgoal
#include "shoal_vec.h"
#define SHOAL_KERNEL_ASSETS_T explorer_assets
#define SHOAL_KERNEL_ASSETS_PTR explorer_assets_ptr
#include "shoal_kernel.cuh"
