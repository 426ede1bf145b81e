/* Reacher-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_REACHER_H
#define SHOAL_MUJOCO_REACHER_H

#include "shoal_mujoco.h"

static const mujoco_kind reacher_kind = {"Reacher", 0, 0, 0, 0, 0};

#endif
