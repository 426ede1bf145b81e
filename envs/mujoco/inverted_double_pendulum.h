/* InvertedDoublePendulum-v5 (gymnasium), over MuJoCo's C API. NOT WRITTEN YET: a placeholder
 * kind that blocks refuse to run. */
#ifndef SHOAL_MUJOCO_INVERTED_DOUBLE_PENDULUM_H
#define SHOAL_MUJOCO_INVERTED_DOUBLE_PENDULUM_H

#include "shoal_mujoco.h"

static const mujoco_kind inverted_double_pendulum_kind = {"InvertedDoublePendulum", 0, 0, 0, 0, 0};

#endif
