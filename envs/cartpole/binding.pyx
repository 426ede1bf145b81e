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

# gymnasium's CartPole-v1 reset takes options {"low": ..., "high": ...}, its
# initial-state range; shoal's draws from [-0.05, 0.05] by the seed alone, so
# a reset refuses them (pool.contract.check_reset_options) rather than ignore them.
GYMNASIUM_RESET_OPTIONS = ("low", "high")


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
# gymnasium's CartPole-v1 frame: its size, geometry and colours (600 x 400,
# 125 px per metre, a 50 x 30 cart whose middle is 100 px above the bottom
# edge, a 10 px wide pole from an axle 7.5 px above that), filled without
# gymnasium's anti-aliased edges, so a video recorder sees the same picture.
RENDER_SHAPE = (400, 600)  # (H, W) pixels
cdef float CART_HALF_W = 25.0
cdef float CART_HALF_H = 15.0
cdef float CART_Y = 100.0   # the cart's middle and the track, px above the bottom edge
cdef float AXLE_UP = 7.5    # the axle above the cart's middle
cdef float POLE_HALF_W = 5.0
cdef float PX_PER_M = 125.0 # 600 px across 2 * 2.4 m


cdef void _fill(uint8_t[:, :, ::1] out, int y0, int y1, int x0, int x1,
                uint8_t r, uint8_t g, uint8_t b) noexcept nogil:
    cdef int y, x
    y0 = max(y0, 0); x0 = max(x0, 0)
    y1 = min(y1, out.shape[0]); x1 = min(x1, out.shape[1])
    for y in range(y0, y1):
        for x in range(x0, x1):
            out[y, x, 0] = r; out[y, x, 1] = g; out[y, x, 2] = b


cdef void _fill_pole(uint8_t[:, :, ::1] out, float axle_x, float axle_y, float theta) noexcept nogil:
    """The pole: a rectangle 10 px wide, from 5 px below the axle to its length
    less 5 px above, turned by theta (clockwise on screen for theta > 0).
    Coordinates here are y-up from the bottom edge, as gymnasium draws."""
    cdef int h = out.shape[0], w = out.shape[1], x, y, row
    cdef float c = cosf(theta), s = sinf(theta), length = PX_PER_M * 1.0  # 2 * half-length 0.5 m
    cdef float along, across, dx, dy
    cdef int x0 = <int>(axle_x - length - 6), x1 = <int>(axle_x + length + 6)
    cdef int y0 = <int>(axle_y - length - 6), y1 = <int>(axle_y + length + 6)
    x0 = max(x0, 0); x1 = min(x1, w - 1); y0 = max(y0, 0); y1 = min(y1, h - 1)
    for y in range(y0, y1 + 1):
        row = h - 1 - y
        for x in range(x0, x1 + 1):
            dx = x - axle_x
            dy = y - axle_y
            across = dx * c - dy * s    # the pole's own axes: it points up at theta = 0
            along = dx * s + dy * c
            if -POLE_HALF_W <= across <= POLE_HALF_W and -POLE_HALF_W <= along <= length - POLE_HALF_W:
                out[row, x, 0] = 202; out[row, x, 1] = 152; out[row, x, 2] = 101


def render_rgb(const uint8_t[::1] env_bytes, uint8_t[:, :, ::1] out):
    """Draw one env (its raw struct) into `out` (H, W, 3): track, cart, pole, axle."""
    cdef const env_t* env = <const env_t*>&env_bytes[0]
    cdef int h = out.shape[0], w = out.shape[1], x, y, row
    cdef float cart_x, axle_y
    if env_bytes.shape[0] != sizeof(env_t) or h != RENDER_SHAPE[0] or w != RENDER_SHAPE[1]:
        raise ValueError(f"need {sizeof(env_t)} env bytes and a {RENDER_SHAPE + (3,)} frame")
    _fill(out, 0, h, 0, w, 255, 255, 255)
    cart_x = w / 2.0 + env.x * PX_PER_M
    # rows count down from the top: y px above the bottom edge is row h - 1 - y
    _fill(out, h - 1 - <int>(CART_Y + CART_HALF_H), h - 1 - <int>(CART_Y - CART_HALF_H) + 1,
          <int>(cart_x - CART_HALF_W), <int>(cart_x + CART_HALF_W) + 1, 0, 0, 0)
    axle_y = CART_Y + AXLE_UP
    _fill_pole(out, cart_x, axle_y, env.theta)
    for y in range(<int>axle_y - 5, <int>axle_y + 6):  # the axle: a disc of radius 5
        for x in range(<int>cart_x - 5, <int>cart_x + 6):
            if 0 <= x < w and (x - <int>cart_x) ** 2 + (y - <int>axle_y) ** 2 <= 25:
                row = h - 1 - y
                out[row, x, 0] = 129; out[row, x, 1] = 132; out[row, x, 2] = 203
    _fill(out, h - 1 - <int>CART_Y, h - <int>CART_Y, 0, w, 0, 0, 0)  # the track, drawn last as gymnasium does


def render_text(const uint8_t[::1] env_bytes):
    """One line: cart position and velocity, pole angle (degrees) and rate, step."""
    cdef const env_t* env = <const env_t*>&env_bytes[0]
    if env_bytes.shape[0] != sizeof(env_t):
        raise ValueError(f"need {sizeof(env_t)} env bytes")
    return (f"x={env.x:+.3f} x_dot={env.x_dot:+.3f} theta={env.theta * 57.29578:+.2f}deg "
            f"theta_dot={env.theta_dot:+.3f} step={env.steps}")
