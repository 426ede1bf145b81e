/* Humanoid-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_HUMANOID_H
#define SHOAL_MUJOCO_HUMANOID_H

#include "shoal_mujoco.h"

static const mujoco_kind humanoid_kind = {"Humanoid", 0, 0, 0, 0, 0};

#endif
