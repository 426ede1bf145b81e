/* Ant-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_ANT_H
#define SHOAL_MUJOCO_ANT_H

#include "shoal_mujoco.h"

static const mujoco_kind ant_kind = {"Ant", 0, 0, 0, 0, 0};

#endif
