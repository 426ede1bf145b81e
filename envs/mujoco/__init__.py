"""gymnasium's MuJoCo v5 envs, native: C over MuJoCo's C API (one header per
env in this folder, built into one library by build.py on first use).

These are library-backed envs (kind "worker", docs/design.md): each worker
loads the model once and keeps one mjData per env; the pool, the seed rule,
autoreset, episode statistics and the gymnasium ids work as for header envs.
Semantics are gymnasium v5's (tests/test_mujoco.py checks them step by step
against gymnasium), with the same keyword arguments and defaults:

    shoal.make("HalfCheetah", 16, ctrl_cost_weight=0.2)
    gymnasium.make_vec("shoal/HalfCheetah-v5", num_envs=16, vectorization_mode="vector_entry_point")

The specs below are importable without mujoco; stepping an env needs it
(`pip install "shoal[mujoco]"`).

Rendering takes gymnasium's render keywords (RENDER_DEFAULTS: width,
height, camera_id, camera_name, default_camera_config, max_geom,
visual_options) in gymnasium.make / SingleEnv; they change the frames only,
so they are not part of a spec (a pool renders with gymnasium's defaults).
EnvPool's option names get an error naming gymnasium's keyword for them.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from shoal.envs import EnvSpec, unknown_kwargs_error

INF = math.inf
# The info keys gymnasium's locomotion envs also give at reset (their
# _get_reset_info): positions and the Humanoids' tendon arrays.
TENDON_INFO_KEYS = ("tendon_length", "tendon_velocity")
POSITION_INFO_KEYS = frozenset({"x_position", "y_position", "z_distance_from_origin",
                                "distance_from_origin", *TENDON_INFO_KEYS})
KINEMATIC_INFO_KEYS = POSITION_INFO_KEYS | {"x_velocity", "y_velocity"}
C_INT_MAX = 2**31 - 1
GENERIC_KWARGS = ("xml_file", "frame_skip", "max_episode_steps")


@dataclass(frozen=True)
class Model:
    """What shoal needs to know about one gymnasium MuJoCo env beyond its spec."""
    xml_file: str              # in gymnasium's assets folder
    frame_skip: int
    params: tuple              # ((name, default), ...): the C header's cfg order; a
                               # tuple default (a range) takes one cfg slot per element
    info_keys: tuple           # names of the C env's info slots, in order
    # The obs size for a parameter dict (mirrors the header's obs_size()):
    # lets a spec be configured without loading the model.
    obs_size: object
    # The Humanoids' tendon_length and tendon_velocity arrays: the info slot
    # where they start (ntendon lengths, then ntendon velocities; see
    # mujoco_tendon_info in shoal_mujoco.h), and the key gymnasium lists them
    # after. None: the env has none.
    tendon_slot: int | None = None
    tendons_after: str = ""

    @property
    def gymnasium_info_keys(self) -> tuple:
        """The info keys in gymnasium's dict order: positions and velocities
        first, then the reward terms, each group in slot order; the tendon
        arrays where gymnasium puts them."""
        keys = (tuple(key for key in self.info_keys if key in KINEMATIC_INFO_KEYS)
                + tuple(key for key in self.info_keys if key not in KINEMATIC_INFO_KEYS))
        if self.tendon_slot is None:
            return keys
        at = keys.index(self.tendons_after) + 1
        return keys[:at] + TENDON_INFO_KEYS + keys[at:]

    @property
    def reset_info_keys(self) -> tuple:
        """gymnasium's reset info: the positions (and tendon arrays) among the
        info keys (the header's positions() writes them after a reset, too)."""
        return tuple(key for key in self.gymnasium_info_keys if key in POSITION_INFO_KEYS)


MODELS = {
    "HalfCheetah": Model(
        "half_cheetah.xml", 5,
        (("forward_reward_weight", 1.0), ("ctrl_cost_weight", 0.1), ("reset_noise_scale", 0.1),
         ("exclude_current_positions_from_observation", True)),
        ("reward_forward", "reward_ctrl", "x_position", "x_velocity"),
        lambda p: 18 - bool(p["exclude_current_positions_from_observation"])),
    "Hopper": Model(
        "hopper.xml", 4,
        (("forward_reward_weight", 1.0), ("ctrl_cost_weight", 1e-3), ("healthy_reward", 1.0),
         ("terminate_when_unhealthy", True), ("healthy_state_range", (-100.0, 100.0)),
         ("healthy_z_range", (0.7, INF)), ("healthy_angle_range", (-0.2, 0.2)),
         ("reset_noise_scale", 5e-3), ("exclude_current_positions_from_observation", True)),
        ("reward_forward", "reward_ctrl", "reward_survive", "x_position", "z_distance_from_origin",
         "x_velocity"),
        lambda p: 12 - bool(p["exclude_current_positions_from_observation"])),
    "Walker2d": Model(
        "walker2d_v5.xml", 4,
        (("forward_reward_weight", 1.0), ("ctrl_cost_weight", 1e-3), ("healthy_reward", 1.0),
         ("terminate_when_unhealthy", True), ("healthy_z_range", (0.8, 2.0)),
         ("healthy_angle_range", (-1.0, 1.0)), ("reset_noise_scale", 5e-3),
         ("exclude_current_positions_from_observation", True)),
        ("reward_forward", "reward_ctrl", "reward_survive", "x_position", "z_distance_from_origin",
         "x_velocity"),
        lambda p: 18 - bool(p["exclude_current_positions_from_observation"])),
    "Ant": Model(
        "ant.xml", 5,
        (("forward_reward_weight", 1.0), ("ctrl_cost_weight", 0.5), ("contact_cost_weight", 5e-4),
         ("healthy_reward", 1.0), ("main_body", 1), ("terminate_when_unhealthy", True),
         ("healthy_z_range", (0.2, 1.0)), ("contact_force_range", (-1.0, 1.0)),
         ("reset_noise_scale", 0.1), ("exclude_current_positions_from_observation", True),
         ("include_cfrc_ext_in_observation", True)),
        ("reward_forward", "reward_ctrl", "reward_contact", "reward_survive", "x_position",
         "y_position", "distance_from_origin", "x_velocity", "y_velocity"),
        lambda p: 29 - 2 * bool(p["exclude_current_positions_from_observation"])
        + 13 * 6 * bool(p["include_cfrc_ext_in_observation"])),
    "Humanoid": Model(
        "humanoid.xml", 5,
        (("forward_reward_weight", 1.25), ("ctrl_cost_weight", 0.1), ("contact_cost_weight", 5e-7),
         ("contact_cost_range", (-INF, 10.0)), ("healthy_reward", 5.0),
         ("terminate_when_unhealthy", True), ("healthy_z_range", (1.0, 2.0)),
         ("reset_noise_scale", 1e-2), ("exclude_current_positions_from_observation", True),
         ("include_cinert_in_observation", True), ("include_cvel_in_observation", True),
         ("include_qfrc_actuator_in_observation", True), ("include_cfrc_ext_in_observation", True)),
        ("reward_survive", "reward_forward", "reward_ctrl", "reward_contact", "x_position",
         "y_position", "distance_from_origin", "x_velocity", "y_velocity"),
        lambda p: _humanoid_obs(p), tendon_slot=9, tendons_after="y_position"),
    "Swimmer": Model(
        "swimmer.xml", 4,
        (("forward_reward_weight", 1.0), ("ctrl_cost_weight", 1e-4), ("reset_noise_scale", 0.1),
         ("exclude_current_positions_from_observation", True)),
        ("reward_forward", "reward_ctrl", "x_position", "y_position", "distance_from_origin",
         "x_velocity", "y_velocity"),
        lambda p: 10 - 2 * bool(p["exclude_current_positions_from_observation"])),
    "Reacher": Model(
        "reacher.xml", 2,
        (("reward_dist_weight", 1.0), ("reward_control_weight", 1.0)),
        ("reward_dist", "reward_ctrl"),
        lambda p: 10),
    "InvertedPendulum": Model(
        "inverted_pendulum.xml", 2,
        (("reset_noise_scale", 0.01),),
        ("reward_survive",),
        lambda p: 4),
    "InvertedDoublePendulum": Model(
        "inverted_double_pendulum.xml", 5,
        (("healthy_reward", 10.0), ("reset_noise_scale", 0.1)),
        ("reward_survive", "distance_penalty", "velocity_penalty"),
        lambda p: 9),
    "Pusher": Model(
        "pusher_v5.xml", 5,
        (("reward_near_weight", 0.5), ("reward_dist_weight", 1.0), ("reward_control_weight", 0.1)),
        ("reward_dist", "reward_ctrl", "reward_near"),
        lambda p: 23),
    "HumanoidStandup": Model(
        "humanoidstandup.xml", 5,
        (("uph_cost_weight", 1.0), ("ctrl_cost_weight", 0.1), ("impact_cost_weight", 5e-7),
         ("impact_cost_range", (-INF, 10.0)), ("reset_noise_scale", 1e-2),
         ("exclude_current_positions_from_observation", True),
         ("include_cinert_in_observation", True), ("include_cvel_in_observation", True),
         ("include_qfrc_actuator_in_observation", True), ("include_cfrc_ext_in_observation", True)),
        ("reward_linup", "reward_quadctrl", "reward_impact", "x_position", "y_position",
         "z_distance_from_origin"),
        lambda p: _humanoid_obs(p), tendon_slot=6, tendons_after="z_distance_from_origin"),
}


def _humanoid_obs(p) -> int:
    # nq 24, nv 23, 14 bodies less the world body: cinert 13x10, cvel 13x6,
    # qfrc_actuator nv - 6, cfrc_ext 13x6 (gymnasium v5 drops the world body).
    return (24 - 2 * bool(p["exclude_current_positions_from_observation"]) + 23
            + 130 * bool(p["include_cinert_in_observation"])
            + 78 * bool(p["include_cvel_in_observation"])
            + 17 * bool(p["include_qfrc_actuator_in_observation"])
            + 78 * bool(p["include_cfrc_ext_in_observation"]))


_ACTION_BOUND = {"Humanoid": 0.4, "HumanoidStandup": 0.4, "InvertedPendulum": 3.0, "Pusher": 2.0}
_ACTIONS = {"HalfCheetah": 6, "Hopper": 3, "Walker2d": 6, "Ant": 8, "Humanoid": 17, "Swimmer": 2,
            "Reacher": 2, "InvertedPendulum": 1, "InvertedDoublePendulum": 1, "Pusher": 7,
            "HumanoidStandup": 17}
_EPISODE_STEPS = {"Reacher": 50, "Pusher": 100}
# gymnasium's info values that are not float64 (the C env's slots are):
# reward_ctrl is float32 where gymnasium computes it from the float32 action
# (Humanoid's and HumanoidStandup's come from data.ctrl, float64), and
# InvertedPendulum's reward_survive is int(not terminated).
GYMNASIUM_INFO_DTYPES = {
    **{name: {"reward_ctrl": np.dtype(np.float32)}
       for name in ("HalfCheetah", "Hopper", "Walker2d", "Ant", "Swimmer", "Reacher", "Pusher")},
    "InvertedPendulum": {"reward_survive": np.dtype(np.int64)},
}
# The models' opt.timestep (checked against the model when it loads): a
# step lasts timestep * frame_skip, and gymnasium's render_fps is its inverse.
TIMESTEP = {"HalfCheetah": 0.01, "Hopper": 0.002, "Walker2d": 0.002, "Ant": 0.01, "Humanoid": 0.003,
            "Swimmer": 0.01, "Reacher": 0.01, "InvertedPendulum": 0.02, "InvertedDoublePendulum": 0.01,
            "Pusher": 0.01, "HumanoidStandup": 0.003}


def _metadata(name: str, frame_skip: int) -> dict:
    return {"render_fps": int(np.round(1.0 / (TIMESTEP[name] * frame_skip)))}
_REWARD_THRESHOLD = {"HalfCheetah": 4800.0, "Hopper": 3800.0, "Swimmer": 360.0, "Ant": 6000.0,
                     "Reacher": -3.75, "InvertedPendulum": 950.0, "InvertedDoublePendulum": 9100.0,
                     "Pusher": 0.0}


# gymnasium v5's DEFAULT_CAMERA_CONFIG of each env, as its default_camera_config
# (Swimmer and InvertedDoublePendulum default to None: no config). Keys not
# given keep gymnasium's free camera: looking at the median of the geoms at
# the first frame, from the model's extent, azimuth 90, elevation -45.
DEFAULT_CAMERA_CONFIG = {
    "HalfCheetah": {"distance": 4.0},
    "Hopper": {"trackbodyid": 2, "distance": 3.0, "lookat": (0.0, 0.0, 1.15), "elevation": -20.0},
    "Walker2d": {"trackbodyid": 2, "distance": 4.0, "lookat": (0.0, 0.0, 1.15), "elevation": -20.0},
    "Ant": {"distance": 4.0},
    "Humanoid": {"trackbodyid": 1, "distance": 4.0, "lookat": (0.0, 0.0, 2.0), "elevation": -20.0},
    "Swimmer": None,
    "Reacher": {"trackbodyid": 0},
    "InvertedPendulum": {"trackbodyid": 0, "distance": 2.04},
    "InvertedDoublePendulum": None,
    "Pusher": {"trackbodyid": -1, "distance": 4.0},
    "HumanoidStandup": {"trackbodyid": 1, "distance": 4.0, "lookat": (0.0, 0.0, 0.8925),
                        "elevation": -20.0},
}
# The fields of mujoco.MjvCamera, which default_camera_config sets.
CAMERA_FIELDS = ("type", "fixedcamid", "trackbodyid", "lookat", "distance", "azimuth", "elevation",
                 "orthographic")
# gymnasium's MujocoEnv render keywords and their defaults (default_camera_config: the env's).
RENDER_DEFAULTS = {"width": 480, "height": 480, "camera_id": None, "camera_name": None,
                   "default_camera_config": None, "max_geom": 1000, "visual_options": None}


def render_options(name: str, **kwargs) -> dict:
    """gymnasium's render keywords of env `name`, checked, with its defaults
    for those not given. camera_id / camera_name are checked against the
    model when a renderer loads it (binding.FrameRenderer)."""
    unknown = sorted(set(kwargs) - set(RENDER_DEFAULTS))
    if unknown:
        raise TypeError(f"{name}: {unknown} are not render keywords ({', '.join(RENDER_DEFAULTS)})")
    options = {**RENDER_DEFAULTS, "default_camera_config": DEFAULT_CAMERA_CONFIG[name], **kwargs}
    for key in ("width", "height", "max_geom"):
        value = options[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name}: {key} must be a positive int, got {value!r}")
        options[key] = int(value)
    camera_id, camera_name = options["camera_id"], options["camera_name"]
    if camera_id is not None and camera_name is not None:   # gymnasium's MujocoRenderer's words
        raise ValueError("Both `camera_id` and `camera_name` cannot be specified at the same time.")
    if camera_id is not None:
        if isinstance(camera_id, bool) or not isinstance(camera_id, (int, np.integer)):
            raise ValueError(f"{name}: camera_id must be an int (-1: the free camera), got {camera_id!r}")
        options["camera_id"] = int(camera_id)
    if camera_name is not None and not isinstance(camera_name, str):
        raise ValueError(f"{name}: camera_name must be a str, got {camera_name!r}")
    config = options["default_camera_config"]
    if config is not None:
        if not isinstance(config, dict):
            raise ValueError(f"{name}: default_camera_config must be a dict of mujoco.MjvCamera "
                             f"fields or None, got {config!r}")
        odd = sorted(set(config) - set(CAMERA_FIELDS))
        if odd:
            raise ValueError(f"{name}: default_camera_config keys {odd} are not mujoco.MjvCamera "
                             f"fields ({', '.join(CAMERA_FIELDS)})")
        if "lookat" in config and np.shape(config["lookat"]) != (3,):
            raise ValueError(f"{name}: default_camera_config['lookat'] must be 3 numbers, "
                             f"got {config['lookat']!r}")
    visual_options = options["visual_options"]
    if visual_options is not None and not isinstance(visual_options, dict):
        raise ValueError(f"{name}: visual_options must be a dict {{mujoco.mjtVisFlag: bool}} or None, "
                         f"got {visual_options!r}")
    return options


# EnvPool's names for MuJoCo options (its envpool/mujoco/gym headers) ->
# gymnasium's keyword for the same thing, in the envs that take it; the
# options gymnasium v5 has no keyword for are explained by _ENVPOOL_FIXED.
_ENVPOOL_RENAMED = {
    **{f"{option}_{end}": (f"{option}_range=(min, max)",)
       for option in ("healthy_z", "healthy_angle", "healthy_state", "contact_force")
       for end in ("min", "max")},
    "contact_cost_max": ("contact_cost_range=(-inf, max)", "impact_cost_range=(-inf, max)"),
    "contact_cost_weight": ("impact_cost_weight",),           # HumanoidStandup
    "ctrl_cost_weight": ("reward_control_weight",),           # Reacher, Pusher
    "dist_cost_weight": ("reward_dist_weight",),
    "near_cost_weight": ("reward_near_weight",),
    "reset_qpos_scale": ("reset_noise_scale",),
    "reset_qvel_scale": ("reset_noise_scale",),
}
# EnvPool's use_contact_force=False (its v4 Ant and Humanoid): no contact
# cost in the reward, and for Ant no contact forces in the observation
# (EnvPool's Humanoid observes them either way). True is gymnasium v5's.
ENVPOOL_NO_CONTACT_FORCE = {
    "Ant": {"include_cfrc_ext_in_observation": False, "contact_cost_weight": 0.0},
    "Humanoid": {"contact_cost_weight": 0.0},
}
# EnvPool's v5 options that gymnasium v5 has no keyword for, at the values
# that are gymnasium v5's (EnvPool 1.2.5's make_spec("<Env>-v5").config):
# the drop-in takes these values and refuses others (_ENVPOOL_FIXED says why).
ENVPOOL_V5_VALUES = {
    "Ant": {"legacy_healthy_reward": False, "exclude_worldbody_contact_forces": True},
    "Hopper": {"legacy_healthy_reward": False, "velocity_min": -10.0, "velocity_max": 10.0},
    "Walker2d": {"legacy_healthy_reward": False, "velocity_min": -10.0, "velocity_max": 10.0},
    "Humanoid": {"legacy_healthy_reward": False, "exclude_worldbody_observations": True,
                 "exclude_root_actuator_forces": True},
    "HumanoidStandup": {"exclude_worldbody_observations": True, "exclude_root_actuator_forces": True,
                        "forward_reward_weight": 1.0, "healthy_reward": 1.0},
    "InvertedDoublePendulum": {"reward_if_not_terminated": True, "constraint_obs_dim": 1,
                               "observation_min": -10.0, "observation_max": 10.0, "healthy_z_max": 1.0},
    "InvertedPendulum": {"reward_if_not_terminated": True, "healthy_reward": 1.0, "healthy_z_min": -0.2,
                         "healthy_z_max": 0.2},
    "Pusher": {"reward_after_step": True, "weighted_reward_info": True, "reset_qvel_scale": 0.005,
               "cylinder_x_min": -0.3, "cylinder_x_max": 0.0, "cylinder_y_min": -0.2, "cylinder_y_max": 0.2,
               "cylinder_dist_min": 0.17},
    "Reacher": {"obs_include_z_distance": False, "reward_after_step": True, "reset_qpos_scale": 0.1,
                "reset_qvel_scale": 0.005, "reset_goal_scale": 0.2},
}
# ... and why, where it is one env's (keyed (env, option)) or any env's (option)
_ENVPOOL_FIXED_IN = {
    ("HumanoidStandup", "forward_reward_weight"):
        "gymnasium v5's HumanoidStandup does not weight its uph term (it takes uph_cost_weight and "
        "leaves it unused), and neither does shoal's",
    ("HumanoidStandup", "healthy_reward"): "gymnasium v5's HumanoidStandup adds a constant 1 per step",
}
_ENVPOOL_FIXED = {
    "frame_stack": "stack observations with gymnasium's FrameStackObservation wrapper",
    "legacy_healthy_reward": "the healthy reward is gymnasium v5's (EnvPool's legacy_healthy_reward=False)",
    "exclude_worldbody_contact_forces": "gymnasium v5 always leaves the world body's contact forces out",
    "exclude_worldbody_observations": "gymnasium v5 always leaves the world body out of the observation",
    "exclude_root_actuator_forces": "gymnasium v5 always leaves the root's actuator forces out",
    "reward_if_not_terminated": "the survive reward is gymnasium v5's "
                                "(EnvPool's reward_if_not_terminated=True)",
    "constraint_obs_dim": "the observation is gymnasium v5's (EnvPool's constraint_obs_dim=1)",
    "obs_include_z_distance": "the observation is gymnasium v5's (EnvPool's obs_include_z_distance=False)",
    "reward_after_step": "rewards are gymnasium v5's (EnvPool's reward_after_step=True)",
    "weighted_reward_info": "the info's reward terms are gymnasium v5's, weighted",
    **dict.fromkeys(("velocity_min", "velocity_max", "observation_min", "observation_max"),
                    "gymnasium v5 clips the observed velocities to [-10, 10] (no keyword)"),
    "gymnasium_v5_render_camera": "render_mode='rgb_array' always uses gymnasium v5's camera "
                                  "(gymnasium.make's camera_id, camera_name, default_camera_config)",
    **dict.fromkeys(("reset_qpos_scale", "reset_qvel_scale", "reset_goal_scale", "cylinder_x_min",
                     "cylinder_x_max", "cylinder_y_min", "cylinder_y_max", "cylinder_dist_min"),
                    "gymnasium v5 draws this env's reset state from fixed ranges (no keyword)"),
}


def envpool_fixed_why(name: str, key: str) -> str:
    """Why EnvPool's option `key` of env `name` has one value in shoal."""
    return _ENVPOOL_FIXED_IN.get((name, key)) or _ENVPOOL_FIXED.get(key, "gymnasium v5's value")


def _envpool_hint(name: str, key: str, accepted) -> str | None:
    """Why env `name` does not take `key` and what it takes instead, for
    EnvPool's option names and gymnasium's render keywords; None otherwise."""
    if key == "use_contact_force" and name in ENVPOOL_NO_CONTACT_FORCE:
        off = ", ".join(f"{k}={v!r}" for k, v in ENVPOOL_NO_CONTACT_FORCE[name].items())
        return f"{key}: EnvPool's option; its False is gymnasium's {off}"
    if (name, key) in _ENVPOOL_FIXED_IN:
        return f"{key}: EnvPool's option; {_ENVPOOL_FIXED_IN[name, key]}"
    for usage in _ENVPOOL_RENAMED.get(key, ()):
        if usage.partition("=")[0] in accepted:
            return f"{key}: EnvPool's name; shoal uses gymnasium's {usage}"
    if key in _ENVPOOL_FIXED:
        return f"{key}: EnvPool's option; {_ENVPOOL_FIXED[key]}"
    if key.startswith(("healthy_", "contact_force_")) and key in _ENVPOOL_RENAMED:
        return f"{key}: EnvPool's option; gymnasium's {name}-v5 has no keyword for it"
    if key in RENDER_DEFAULTS:
        return (f"{key}: a render keyword of one env (gymnasium.make, SingleEnv); a pool "
                f"renders with gymnasium's defaults")
    return None


def default_kwargs(name: str) -> dict:
    """gymnasium v5's keyword arguments of env `name` and their defaults."""
    model = MODELS[name]
    return {"xml_file": model.xml_file, "frame_skip": model.frame_skip,
            "max_episode_steps": _EPISODE_STEPS.get(name, 1000), **dict(model.params)}


def configure(spec: EnvSpec, **kwargs) -> EnvSpec:
    """`spec` with some of gymnasium's keyword arguments changed (the
    configurator of every MuJoCo spec: EnvSpec.configure)."""
    allowed = default_kwargs(spec.name)
    if "post_constraint" in kwargs:
        kwargs = dict(kwargs)
        _check_post_constraint(spec.name, kwargs.pop("post_constraint"))
    unknown = sorted(set(kwargs) - set(allowed))
    if unknown:
        error = unknown_kwargs_error(spec.name, unknown, allowed)
        hints = [hint for key in unknown if (hint := _envpool_hint(spec.name, key, allowed))]
        if hints:   # after Python's own wording, which TorchRL matches on
            error = TypeError(f"{error} ({'; '.join(hints)})")
        raise error
    merged = {**spec.env_kwargs, **kwargs}
    for key, default in allowed.items():
        value = merged[key]
        if isinstance(default, tuple):
            merged[key] = _number_pair(spec.name, key, value)
        elif key == "xml_file":
            if not isinstance(value, str):
                raise ValueError(f"{spec.name}: xml_file must be a path, got {value!r}")
        elif key == "max_episode_steps" and value is None:
            pass   # no limit of its own (gymnasium.make's TimeLimit is then the limit)
        elif key == "main_body" and isinstance(value, str):
            merged[key] = _body_index(spec.name, merged["xml_file"], value)
        elif key in ("frame_skip", "max_episode_steps", "main_body"):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < (
                    0 if key == "main_body" else 1):
                raise ValueError(f"{spec.name}: {key} must be a positive int, got {value!r}")
            if value > C_INT_MAX:   # the C env holds it (and counts steps) in an int
                raise ValueError(f"{spec.name}: {key} must be at most 2**31 - 1, got {value!r}"
                                 + ("; None means no limit" if key == "max_episode_steps" else ""))
            merged[key] = int(value)
        elif isinstance(default, bool):
            merged[key] = bool(value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                raise ValueError(f"{spec.name}: {key} must be a number, got {value!r}")
            if key == "reset_noise_scale" and not value >= 0:   # gymnasium fails at reset
                raise ValueError(f"{spec.name}: reset_noise_scale must be >= 0, got {value!r}")
            merged[key] = float(value)
    return dataclasses.replace(spec, env_kwargs=merged,
                               obs_shape=(MODELS[spec.name].obs_size(merged),),
                               max_episode_steps=merged["max_episode_steps"],
                               metadata=_metadata(spec.name, merged["frame_skip"]),
                               **_model_fields(spec.name, merged["xml_file"]))


def _number_pair(name: str, key: str, value) -> tuple:
    """A range keyword (low, high) as two floats: any sequence of two
    numbers (a tuple, a list, a numpy array, a config library's list)."""
    try:
        pair = tuple(float(v) for v in value) if not isinstance(value, (str, bytes)) else ()
    except (TypeError, ValueError):
        pair = ()
    if len(pair) != 2:
        raise ValueError(f"{name}: {key} must be a pair of numbers (low, high), got {value!r}")
    return pair


# Bodies an env's C header finds by name (gymnasium's get_body_com): a
# custom model must have them.
_BODIES_READ = {"Reacher": ("fingertip", "target"), "Pusher": ("tips_arm", "object", "goal")}


def _model_fields(name: str, xml_file: str) -> dict:
    """The spec fields that come from the model file: the action bounds
    (gymnasium's are the model's ctrlrange) and, for a model other than
    the env's own, the file's digest (EnvSpec.asset_digest)."""
    if xml_file == MODELS[name].xml_file:
        own = _spec(name)
        return {"action_low": own.action_low, "action_high": own.action_high, "asset_digest": None}
    from shoal.envs.mujoco.binding import model_identity

    path, digest = model_identity(xml_file)
    low, high = _custom_model_bounds(name, path, digest)
    return {"action_low": low.copy(), "action_high": high.copy(), "asset_digest": digest}


@functools.lru_cache(maxsize=64)
def _custom_model_bounds(name: str, path: str, digest: str) -> tuple:
    """A custom model's action bounds, after checking that the env's C
    header can step it: shoal's envs have fixed observation and action
    sizes, so the model must have the env's own model's sizes (masses,
    frictions, geometry, ctrlrange may change; joints, actuators, bodies
    may not) and the bodies the header reads by name."""
    from shoal.envs.mujoco.binding import import_mujoco, model_path

    try:
        mujoco = import_mujoco()
    except ImportError as e:
        raise ImportError(f'{name}: xml_file {path} is read with mujoco: pip install "shoal[mujoco]"') from e
    try:
        model = mujoco.MjModel.from_xml_path(path)
    except ValueError as e:
        raise ValueError(f"{name}: MuJoCo could not load xml_file {path}: {e}") from None
    own = mujoco.MjModel.from_xml_path(str(model_path(MODELS[name].xml_file)))

    def sizes(m):
        return {"nq": m.nq, "nv": m.nv, "nu": m.nu, "nbody": m.nbody}

    if sizes(model) != sizes(own):
        raise ValueError(f"{name}: xml_file {path} has sizes {sizes(model)}, {name}'s own model "
                         f"{MODELS[name].xml_file} {sizes(own)}. shoal's {name} has fixed observation and "
                         f"action sizes, so it takes models of its own model's sizes (masses, frictions, "
                         f"geometry and ctrlrange may change; joints, actuators and bodies may not)")
    missing = [body for body in _BODIES_READ.get(name, ())
               if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body) < 0]
    if missing:
        raise ValueError(f"{name}: xml_file {path} has no bodies named {missing}, which {name} reads "
                         f"(as gymnasium's {name} does)")
    low, high = model.actuator_ctrlrange.astype(np.float32).T
    return low, high


def _body_index(name: str, xml_file, body: str) -> int:
    """gymnasium's main_body given by name: its index in the model (what the
    C env takes), looked up with mujoco's Python bindings."""
    from shoal.envs.mujoco.binding import import_mujoco, model_path

    if not isinstance(xml_file, str):
        raise ValueError(f"{name}: xml_file must be a path, got {xml_file!r}")
    try:
        mujoco = import_mujoco()
    except ImportError as e:
        raise ImportError(f'{name}: main_body={body!r} is looked up in the model with mujoco: '
                          f'pip install "shoal[mujoco]"') from e
    model = mujoco.MjModel.from_xml_path(str(model_path(xml_file)))
    index = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
    if index < 0:
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, k) for k in range(model.nbody)]
        raise ValueError(f"{name}: main_body {body!r} is not a body of {xml_file} (its bodies: "
                         f"{[n for n in names if n]}, or their indices)")
    return int(index)


def _check_post_constraint(name: str, value) -> None:
    """EnvPool's post_constraint: True is gymnasium v5's behaviour, which
    shoal's envs have (a no-op); False is EnvPool's pre-v5 one, refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}: post_constraint must be a bool, got {value!r}")
    if not value:
        raise ValueError(
            f"{name}: post_constraint=False is EnvPool's pre-v5 (v3/v4) behaviour, which skips "
            f"mj_rnePostConstraint after a step; shoal's envs are gymnasium v5's, whose "
            f"do_simulation calls it after every step (post_constraint=True, EnvPool's default "
            f"and the only value shoal takes)")


def cfg_values(spec: EnvSpec) -> list[float]:
    """The spec's parameters as the C header's cfg array (tuples flattened)."""
    values = []
    for key, _ in MODELS[spec.name].params:
        value = spec.env_kwargs[key]
        values.extend(float(v) for v in value) if isinstance(value, tuple) else values.append(float(value))
    return values


def _spec(name: str) -> EnvSpec:
    bound = _ACTION_BOUND.get(name, 1.0)
    kwargs = default_kwargs(name)
    return EnvSpec(
        name=name,
        binding="shoal.envs.mujoco.binding",
        agents=1,
        obs_shape=(MODELS[name].obs_size(kwargs),),
        obs_dtype=np.float64,
        obs_low=-np.inf,
        obs_high=np.inf,
        action_low=np.full(_ACTIONS[name], -bound, dtype=np.float32),
        action_high=np.full(_ACTIONS[name], bound, dtype=np.float32),
        max_episode_steps=kwargs["max_episode_steps"],
        reward_threshold=_REWARD_THRESHOLD.get(name),
        metadata=_metadata(name, kwargs["frame_skip"]),
        kind="worker",
        version=5,
        env_kwargs=kwargs,
        configurator=configure,
    )


SPECS = [_spec(name) for name in MODELS]
