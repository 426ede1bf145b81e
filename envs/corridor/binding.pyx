# cython: language_level=3, boundscheck=False, wraparound=False
"""Corridor's binding: the generic vector Block over corridor.h."""

from libc.stdint cimport int32_t

cdef extern from *:
    """
    #include "corridor/corridor.h"
    #define SHOAL_VEC_ENV corridor
    #include "shoal_vec.h"
    """
    ctypedef struct env_t "corridor_env":
        int32_t pos, steps
    ctypedef float obs_t "corridor_obs_t"
    ctypedef int32_t act_t "corridor_act_t"

include "../vec_binding.pxi"
