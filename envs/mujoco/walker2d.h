/* Walker2d-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_WALKER2D_H
#define SHOAL_MUJOCO_WALKER2D_H

#include "shoal_mujoco.h"

static const mujoco_kind walker2d_kind = {"Walker2d", 0, 0, 0, 0, 0};

#endif
