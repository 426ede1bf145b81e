/* drive as a CUDA kernel: drive.h through the shared vector loop (shoal_kernel.cuh). */
#include "drive/drive.h"
#define SHOAL_VEC_ENV drive
#include "shoal_vec.h"
#define SHOAL_KERNEL_ASSETS_T drive_assets
#define SHOAL_KERNEL_ASSETS_PTR drive_assets_ptr
#include "shoal_kernel.cuh"
