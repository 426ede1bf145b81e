# cython: language_level=3, boundscheck=False, wraparound=False
"""Explorer's binding, PointGoal task: explorer.h compiled with
EXPLORER_TASK = PointGoal (see explorer_pointgoal.h). The vector loop keeps
the `explorer` prefix so the shared explorer_binding.pxi fits both tasks."""

cdef extern from *:
    """
    #include "explorer_pointgoal/explorer_pointgoal.h"
    #define SHOAL_VEC_ENV explorer
    #include "shoal_vec.h"
    """

include "../explorer/explorer_binding.pxi"
