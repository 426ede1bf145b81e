# cython: language_level=3, boundscheck=False, wraparound=False
"""Corridor's binding: the generic vector Block over corridor.h, plus
decode / place, which read and set one env's state for tests."""

from libc.stdint cimport int32_t, uint8_t

cdef extern from *:
    """
    #include "corridor/corridor.h"
    #define SHOAL_VEC_ENV corridor
    #include "shoal_vec.h"
    """
    enum: CORRIDOR_LEN
    ctypedef struct env_t "corridor_env":
        int32_t pos, steps
    ctypedef float obs_t "corridor_obs_t"
    ctypedef int32_t act_t "corridor_act_t"

include "../vec_binding.pxi"

CELLS = CORRIDOR_LEN


cdef env_t* _one_env(uint8_t[::1] env_bytes) except NULL:
    """The struct in one env's bytes: pool.env_states[i * ENV_BYTES:(i + 1) * ENV_BYTES]."""
    if env_bytes.shape[0] != sizeof(env_t):
        raise ValueError(f"env_bytes must hold {sizeof(env_t)} bytes, got {env_bytes.shape[0]}")
    return <env_t*>&env_bytes[0]


def decode(uint8_t[::1] env_bytes):
    """One env's state: {"pos": its cell, "steps": steps taken this episode}."""
    cdef env_t* env = _one_env(env_bytes)
    return {"pos": env.pos, "steps": env.steps}


def place(uint8_t[::1] env_bytes, int pos, int steps=0):
    """Set one env's state (a test scenario); the next step starts from it."""
    if not 0 <= pos < CORRIDOR_LEN:
        raise ValueError(f"pos must be in [0, {CORRIDOR_LEN}), got {pos}")
    cdef env_t* env = _one_env(env_bytes)
    env.pos, env.steps = pos, steps
