# cython: language_level=3, boundscheck=False, wraparound=False
"""Explorer's binding, Explore task (see explorer.h); the shared part is
explorer_binding.pxi."""

cdef extern from *:
    """
    #include "explorer/explorer.h"
    #define SHOAL_VEC_ENV explorer
    #include "shoal_vec.h"
    """

include "explorer_binding.pxi"
