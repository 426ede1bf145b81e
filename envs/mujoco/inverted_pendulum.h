/* InvertedPendulum-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_INVERTED_PENDULUM_H
#define SHOAL_MUJOCO_INVERTED_PENDULUM_H

#include "shoal_mujoco.h"

static const mujoco_kind inverted_pendulum_kind = {"InvertedPendulum", 0, 0, 0, 0, 0};

#endif
