# cython: language_level=3, boundscheck=False, wraparound=False
"""CartPole's binding: the generic vector Block over cartpole.h, plus the raw
dynamics for tests that compare them with gymnasium's."""

from libc.math cimport cosf, sinf
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


# ---- rendering (host only; see shoal.render) ---------------------------------
RENDER_SHAPE = (200, 300)  # (H, W) pixels


cdef void _fill(uint8_t[:, :, ::1] out, int y0, int y1, int x0, int x1,
                uint8_t r, uint8_t g, uint8_t b) noexcept nogil:
    cdef int y, x
    y0 = max(y0, 0); x0 = max(x0, 0)
    y1 = min(y1, out.shape[0]); x1 = min(x1, out.shape[1])
    for y in range(y0, y1):
        for x in range(x0, x1):
            out[y, x, 0] = r; out[y, x, 1] = g; out[y, x, 2] = b


def render_rgb(const uint8_t[::1] env_bytes, uint8_t[:, :, ::1] out):
    """Draw one env (its raw struct) into `out` (H, W, 3): track, cart, pole."""
    cdef const env_t* env = <const env_t*>&env_bytes[0]
    cdef int h = out.shape[0], w = out.shape[1], k, steps = 60
    cdef float scale = w / 4.8 * 0.8, cart_x, cart_y, px, py
    if env_bytes.shape[0] != sizeof(env_t) or h != RENDER_SHAPE[0] or w != RENDER_SHAPE[1]:
        raise ValueError(f"need {sizeof(env_t)} env bytes and a {RENDER_SHAPE + (3,)} frame")
    _fill(out, 0, h, 0, w, 255, 255, 255)
    cart_y = h * 0.7
    cart_x = w / 2 + env.x * scale
    _fill(out, <int>cart_y, <int>cart_y + 1, 0, w, 0, 0, 0)  # the track
    _fill(out, <int>(cart_y - 10), <int>(cart_y + 10), <int>(cart_x - 20), <int>(cart_x + 20), 0, 0, 0)
    for k in range(steps + 1):  # the pole: 2 * half-length, tilted by theta
        px = cart_x + (k / <float>steps) * 1.0 * scale * sinf(env.theta)
        py = cart_y - 10 - (k / <float>steps) * 1.0 * scale * cosf(env.theta)
        _fill(out, <int>py - 3, <int>py + 3, <int>px - 3, <int>px + 3, 202, 152, 101)


def render_text(const uint8_t[::1] env_bytes):
    """One line: cart position and velocity, pole angle (degrees) and rate, step."""
    cdef const env_t* env = <const env_t*>&env_bytes[0]
    if env_bytes.shape[0] != sizeof(env_t):
        raise ValueError(f"need {sizeof(env_t)} env bytes")
    return (f"x={env.x:+.3f} x_dot={env.x_dot:+.3f} theta={env.theta * 57.29578:+.2f}deg "
            f"theta_dot={env.theta_dot:+.3f} step={env.steps}")
