/* Swimmer-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_SWIMMER_H
#define SHOAL_MUJOCO_SWIMMER_H

#include "shoal_mujoco.h"

static const mujoco_kind swimmer_kind = {"Swimmer", 0, 0, 0, 0, 0};

#endif
