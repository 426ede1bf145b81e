/* cartpole as a CUDA kernel: cartpole.h through the shared vector loop (shoal_kernel.cuh). */
#include "cartpole/cartpole.h"
#define SHOAL_VEC_ENV cartpole
#include "shoal_vec.h"
#include "shoal_kernel.cuh"
