"""The contract every backend of shoal's first-party envs keeps: the native
pools (shoal.pool.native) and the CUDA backend (shoal.cuda) call these, so
arguments, seeds, reset masks, SAME_STEP infos and episode statistics mean
the same thing, with the same errors, everywhere.

Nothing here runs per env; same_step_info runs once per step (SAME_STEP
only) and works on numpy arrays or, given torch.logical_or, on tensors.
"""
from __future__ import annotations

import numpy as np

from shoal.pool.layout import KEEP, RESEED, RESET

# The keys a native pool adds to every info (EnvPool's): which envs the rows
# are, and each env's steps into its episode. They are the pool's, not an
# env's: gymnasium's and SB3's per-env infos leave them out.
POOL_OWN_INFO_KEYS = frozenset({"env_id", "elapsed_step"})

# What a backend remembers of `episodes` between two episode_stats() calls.
SEEN_DTYPE = np.dtype([("finished", np.int64), ("return_sum", np.float64), ("length_sum", np.int64)])


def validate_num_envs(num_envs) -> int:
    """num_envs as an int; ValueError unless it is a positive int."""
    if not isinstance(num_envs, (int, np.integer)) or isinstance(num_envs, bool) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
    return int(num_envs)


def out_of_range_message(action_row, row: int, nvec: list) -> str:
    """The error for a discrete action outside its space: Discrete(n) names
    [0, n); MultiDiscrete names the first bad component and its range."""
    values = np.atleast_1d(np.asarray(action_row)).tolist()
    if len(nvec) == 1:
        return f"action {values[0]} at row {row} is out of range: expected an integer in [0, {nvec[0]})"
    k = next((k for k, (v, n) in enumerate(zip(values, nvec)) if not 0 <= v < n), 0)
    return (f"action {values} at row {row} is out of range: component {k} is {values[k]}, "
            f"expected [0, {nvec[k]}) (nvec {list(nvec)})")


def draw_seed() -> int:
    """A construction seed from OS entropy (when the user gives none)."""
    return int(np.random.SeedSequence().entropy % (2**63))


def fill_reset_requests(seed, requests: np.ndarray, seeds: np.ndarray) -> None:
    """The seed rule of a reset, written into per-env `requests` (uint8:
    RESET or RESEED) and `seeds` (uint64): None keeps each env's RNG going
    (RESET); an int s gives env i the seed s + i; a sequence gives one seed
    (or None) per env."""
    n = len(requests)
    if seed is None:
        requests[:] = RESET
        return
    if isinstance(seed, np.ndarray) and seed.ndim == 0:
        seed = seed.item()   # np.array(5): one int seed, as np.int64(5)
    if isinstance(seed, bool) or isinstance(seed, (float, str, bytes)):
        raise ValueError(f"seed must be None, an int or a sequence of ints, got {seed!r}")
    if isinstance(seed, (int, np.integer)):
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"seed must be an int >= 0 (env i takes seed + i), got {seed}")
        # The C env's seed is 64 bits: (seed + i) mod 2**64, as a single env
        # takes any int >= 0 mod 2**64 (so SyncVectorEnv's seed + i agrees).
        seeds[:] = np.arange(n, dtype=np.uint64) + np.uint64(seed % 2**64)   # uint64 arrays wrap
        requests[:] = RESEED
        return
    try:
        seed_list = list(seed)
    except TypeError:
        raise ValueError(f"seed must be None, an int or a sequence of ints, got {seed!r}") from None
    if len(seed_list) != n:
        raise ValueError(f"seed must be None, an int or a sequence of {n} ints/None, "
                         f"got a sequence of length {len(seed_list)}")
    for i, s in enumerate(seed_list):
        if s is None:
            requests[i] = RESET
        elif isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0:
            seeds[i] = int(s) % 2**64
            requests[i] = RESEED
        else:
            raise ValueError(f"seed[{i}] must be None or an int >= 0, got {s!r}")


def check_reset_options(options: dict | None, spec) -> None:
    """Reset options an env does not take are ignored, as gymnasium's and
    pettingzoo's envs ignore theirs (pettingzoo's api_test passes one), except
    those the env's gymnasium counterpart honours and shoal's env does not
    (its binding's GYMNASIUM_RESET_OPTIONS: CartPole-v1's "low" / "high",
    its initial-state range): ignored, they would give a wrong result, so
    they are a ValueError."""
    if options is None:
        return
    if not isinstance(options, dict):
        raise TypeError(f"reset options must be a dict or None, got {type(options).__name__}")
    if options.keys() <= {"reset_mask"}:   # the usual case, at once (a masked reset may come every step)
        return
    honoured_elsewhere = getattr(spec.load_binding(), "GYMNASIUM_RESET_OPTIONS", ())
    refused = sorted(key for key in (options or {}) if key in honoured_elsewhere)
    if refused:
        raise ValueError(f"reset options {refused}: gymnasium's {spec.name} takes them, shoal's does not "
                         f"(its initial state comes from the seed alone, in the env's fixed range)")


def parse_reset_mask(options: dict | None, num_envs: int, as_array=np.asarray) -> np.ndarray | None:
    """options["reset_mask"] as a bool array of shape (num_envs,), or None
    when options has none; ValueError for any other dtype or shape.
    as_array turns the user's value into a numpy array (shoal.cuda passes
    one that also takes device tensors)."""
    if not options or "reset_mask" not in options:
        return None
    mask = as_array(options["reset_mask"])
    if mask.dtype != np.bool_ or mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask'] must be a bool array of shape "
                         f"({num_envs},), got {mask.dtype} {mask.shape}")
    return mask


def keep_unmasked(requests: np.ndarray, mask: np.ndarray | None) -> None:
    """Envs outside the reset mask keep their state (request KEEP)."""
    if mask is not None:
        requests[~mask] = KEEP


def construction_seed(seed):
    """A constructor's `seed` as it is kept: None drawn, a sequence (a
    generator too) made a list with each None entry drawn (an env's RNG is
    unseeded before its first reset: going on with it would give every such
    env the same fixed stream), so that the construction's reset and the
    first reset() read the same seeds; anything else as given (reset
    checks it)."""
    if seed is None:
        return draw_seed()
    if isinstance(seed, np.ndarray) and seed.ndim == 0:
        seed = seed.item()   # np.array(5): one int seed
    if isinstance(seed, (int, np.integer, float, str, bytes)):
        return seed
    try:
        return [draw_seed() if entry is None else entry for entry in seed]
    except TypeError:
        return seed


class ConstructionSeed:
    """The seed a backend is made with (EnvPool's make(seed=s)): the backend
    resets every env with it at construction, and a reset without a seed
    of an env not stepped since then gives that same seeded reset again,
    so make(seed=s) then reset() starts where make() then reset(seed=s)
    does (EnvPool's first reset is its seeded one). Any step, of any env,
    ends it for every env. The seed is construction_seed's, an int (env i:
    seed + i) or a list with one seed per env (construction_seed drew its
    None entries; a None left here: no seed of its own, so a reset() goes
    on with its RNG); the construction's reset checked it."""

    def __init__(self, seed, num_envs: int):
        self.seed = seed   # as construction_seed kept it (EnvPoolCompat.config reports it)
        if isinstance(seed, (int, np.integer)):
            self.seeds = np.uint64(int(seed) % 2**64) + np.arange(num_envs, dtype=np.uint64)
            seeded = np.ones(num_envs, dtype=np.bool_)
        else:
            entries = list(seed)
            self.seeds = np.array([0 if s is None else int(s) % 2**64 for s in entries], dtype=np.uint64)
            seeded = np.array([s is not None for s in entries], dtype=np.bool_)
        self.unstepped: np.ndarray | None = seeded if seeded.any() else None

    def on_reset(self, requests: np.ndarray, seeds: np.ndarray) -> None:
        """With a reset's requests final (seeded, masked): reseed its
        unstepped envs that have no seed of their own (seed None, or a None
        entry of a sequence: request RESET) with the construction seed;
        every env it resets has then used that seed (a second reset() goes on)."""
        if self.unstepped is None:
            return
        fresh = np.flatnonzero(self.unstepped & (requests == RESET))
        requests[fresh] = RESEED
        seeds[fresh] = self.seeds[fresh]
        self.unstepped &= requests == KEEP
        if not self.unstepped.any():
            self.unstepped = None

    def stepped(self) -> None:
        self.unstepped = None


def same_step_info(final_obs, final_mask, terminals, truncations, logical_or=np.logical_or) -> dict:
    """The SAME_STEP step info: {"final_obs": the ended episodes' last obs,
    "_final_obs": rows whose episode ended (terminal or truncated)}.
    final_mask is the backend's buffer for the latter, filled here."""
    logical_or(terminals, truncations, out=final_mask)
    return {"final_obs": final_obs, "_final_obs": final_mask}


def episode_stats_since(episodes: np.ndarray, seen: np.ndarray) -> dict:
    """Episodes finished since `seen` (SEEN_DTYPE per env), summed over all
    envs: {"episodes", "mean_return", "mean_length"} (means NaN if none).
    `episodes` holds each env's counts (fields "finished", "return_sum",
    "length_sum": the backend's layout.EPISODE_DTYPE or a SEEN_DTYPE copy);
    `seen` is updated to them."""
    count = int((episodes["finished"] - seen["finished"]).sum())
    ret = float((episodes["return_sum"] - seen["return_sum"]).sum())
    length = int((episodes["length_sum"] - seen["length_sum"]).sum())
    for name in SEEN_DTYPE.names:
        seen[name] = episodes[name]
    nan = float("nan")
    return {"episodes": count,
            "mean_return": ret / count if count else nan,
            "mean_length": length / count if count else nan}


def nonfinite_action_message(action, where: str) -> str:
    """The error for a Box action the pool refuses (`where`: which env or
    row gave it). Box actions are float32: NaN, inf and doubles beyond
    float32's range (which become inf) are refused."""
    return (f"action {action} {where} is not finite in float32: Box actions are float32, so NaN, inf "
            f"and values beyond +-{float(np.finfo(np.float32).max):.4g} are refused")


ATARI_BINDING = "shoal.envs.atari.binding"
# EnvPool's game keys of an Atari pool's step info: the unclipped reward,
# and 1 when the game is over (with episodic_life, not at every lost life).
GAME_INFO_KEYS = ("reward", "terminated")   # ordered: as the pool's info, whatever the hash seed


def game_info_keys(spec) -> tuple:
    """The game keys the gymnasium views (SingleEnv, NativeVectorEnv,
    ShoalVecEnv) add to an env's step info: GAME_INFO_KEYS for an Atari env
    whose episodes are lives or whose rewards are clipped, so that a logger
    (CleanRL's over EnvPool) can sum whole games' real scores; none else
    (the info is then gymnasium's)."""
    if spec.binding == ATARI_BINDING and any(
            spec.env_kwargs.get(key) for key in ("episodic_life", "terminal_on_life_loss", "reward_clip")):
        return GAME_INFO_KEYS
    return ()


class GameScores:
    """Whole Atari games, summed from a pool's step infos (GAME_INFO_KEYS):
    each env's real score and steps so far in its game. The training
    episodes may be lives with clipped rewards; these are the games."""

    def __init__(self, num_envs: int):
        self.scores = np.zeros(num_envs)
        self.lengths = np.zeros(num_envs, dtype=np.int64)

    def add(self, info: dict, truncated: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Count the step of the envs info["env_id"] names (truncated: their
        flags); (env ids whose game ended, over or cut at the frame limit,
        their scores, their lengths in steps, in emulator frames), those
        envs' next games started. Frames are ALE's episode_frame_number at
        the game's last step: the start's no-op frames and frameskip x steps,
        what SB3's Monitor under AtariWrapper counts. In SAME_STEP an ended
        episode's step is final_info's (info holds its reset)."""
        envs, reward, game_over = info["env_id"], info["reward"], info["terminated"]
        frames = info["episode_frame_number"]
        finished = info.get("_final_obs")
        if finished is not None and finished.any():
            reward = np.where(finished, info["final_info"]["reward"], reward)
            game_over = np.where(finished, info["final_info"]["terminated"], game_over)
            frames = np.where(finished, info["final_info"]["episode_frame_number"], frames)
        self.scores[envs] += reward
        self.lengths[envs] += 1
        over = (game_over != 0) | truncated
        ended = envs[over]
        scores, lengths = self.scores[ended], self.lengths[ended]   # (copies: fancy indexing)
        self.scores[ended] = 0.0
        self.lengths[ended] = 0
        return ended, scores, lengths, frames[over]

    def restart(self) -> None:
        """Every env starts a new game (a reset of the whole pool)."""
        self.scores[:] = 0.0
        self.lengths[:] = 0
