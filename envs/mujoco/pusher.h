/* Pusher-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_PUSHER_H
#define SHOAL_MUJOCO_PUSHER_H

#include "shoal_mujoco.h"

static const mujoco_kind pusher_kind = {"Pusher", 0, 0, 0, 0, 0};

#endif
