/* snake as a CUDA kernel: snake.h through the shared vector loop (shoal_kernel.cuh). */
#include "snake/snake.h"
#define SHOAL_VEC_ENV snake
#include "shoal_vec.h"
#include "shoal_kernel.cuh"
