# cython: language_level=3, boundscheck=False, wraparound=False
"""CartPole's binding: the generic vector Block over cartpole.h, plus the raw
dynamics for tests that compare them with gymnasium's."""

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t

cdef extern from *:
    """
    #include "cartpole/cartpole.h"
    #define SHOAL_VEC_ENV cartpole
    #include "shoal_vec.h"
    """
    ctypedef struct env_t "cartpole_env":
        float x, x_dot, theta, theta_dot
        int32_t steps
    ctypedef float obs_t "cartpole_obs_t"
    ctypedef int32_t act_t "cartpole_act_t"
    enum:
        AGENTS "cartpole_agents"
        OBS_SIZE "cartpole_obs_size"
        ACT_SIZE "cartpole_act_size"
        MAX_STEPS "CARTPOLE_MAX_STEPS"
    ctypedef struct shoal_episode:
        pass
    void vec_reset "cartpole_vec_reset"(env_t* envs, shoal_episode* eps, int64_t n,
        const uint8_t* requests, const uint64_t* seeds, obs_t* obs, float* rew,
        uint8_t* term, uint8_t* trunc, uint8_t* mask) noexcept nogil
    void vec_step "cartpole_vec_step"(env_t* envs, shoal_episode* eps, int64_t n,
        const act_t* act, obs_t* obs, float* rew, uint8_t* term, uint8_t* trunc,
        uint8_t* mask, obs_t* final_obs, int mode) noexcept nogil
    int cartpole_physics(env_t* env, int32_t action) noexcept nogil

include "../vec_binding.pxi"


def physics(float[:, ::1] states, const int32_t[::1] actions):
    """Advance each (x, x_dot, theta, theta_dot) row one step in place with
    action actions[i]; returns the terminated flags. For dynamics tests."""
    cdef Py_ssize_t n = states.shape[0], i
    cdef env_t env
    terminated = np.zeros(n, dtype=np.bool_)
    cdef uint8_t[::1] term = terminated.view(np.uint8)
    for i in range(n):
        env.x, env.x_dot, env.theta, env.theta_dot = states[i, 0], states[i, 1], states[i, 2], states[i, 3]
        term[i] = cartpole_physics(&env, actions[i])
        states[i, 0], states[i, 1], states[i, 2], states[i, 3] = env.x, env.x_dot, env.theta, env.theta_dot
    return terminated
