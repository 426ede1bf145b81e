/* corridor as a CUDA kernel: corridor.h through the shared vector loop (shoal_kernel.cuh). */
#include "corridor/corridor.h"
#define SHOAL_VEC_ENV corridor
#include "shoal_vec.h"
#include "shoal_kernel.cuh"
