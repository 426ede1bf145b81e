/* Hopper-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_HOPPER_H
#define SHOAL_MUJOCO_HOPPER_H

#include "shoal_mujoco.h"

static const mujoco_kind hopper_kind = {"Hopper", 0, 0, 0, 0, 0};

#endif
