"""Trainer configuration: ini files, merged, typed, overridable by flags.

    config = load("cartpole", ["--train.learning-rate", "3e-4"])
    config["train"]["learning_rate"]      # 0.0003 (a float)

A config is configs/default.ini, then configs/<env>.ini (when it exists),
then any extra ini files, then `--section.key value` flags, each layer
overriding the one before. default.ini declares every section and key; its
values fix each key's type (bool, int, float or str), so a later layer may
only set keys default.ini has, with values of that type. Errors name the
section, key or value at fault and suggest the closest valid key. `[env]
name` is load()'s env (`shoal train ENV`): no flag sets it, and an ini file
may only repeat it. A `[DEFAULT]` section is an error.

Beyond its type, each key's value must pass its rule in RULES (a range or
a set of choices), and the merged config the cross-key rules of validate():
load() checks both, so a bad value stops `shoal train` before it makes a
run folder. A malformed ini file is a ConfigError naming the file and line.

Keys are written with underscores in ini files; flags accept dashes or
underscores (`--train.learning-rate` == `--train.learning_rate`).

Env keyword arguments are one str key, `[env] kwargs`, of comma-separated
key=value pairs (`episodic_life=true, reward_clip=true`; values true/false,
none, numbers, quoted strings, tuples; a bare word is a str): env_kwargs()
parses it. `[env] train_only` names those of them that only shape training
(reward clipping, lives as episodes): evaluation drops them, so the env's
default (off) applies there and evaluation returns are the game's scores.
"""
from __future__ import annotations

import ast
import configparser
import difflib
import math
import os
import re
from importlib import resources

import numpy as np

Config = dict[str, dict[str, object]]


class ConfigError(ValueError):
    """A bad section, key or value in an ini file or a flag."""


def configs_dir() -> str:
    """The folder holding default.ini and the env ini files (shoal.configs)."""
    return str(resources.files("shoal.configs"))


def env_ini(env: str) -> str:
    """The path of env's own ini file (it may not exist): configs/<env>.ini,
    lowercase, without "_" or "-" (ExplorerPointGoal -> explorerpointgoal.ini)."""
    key = env.lower().replace("_", "").replace("-", "")
    return os.path.join(configs_dir(), f"{key}.ini")


# configparser's default section under a name no file uses, so that a file's
# [DEFAULT] is an ordinary section (refused below), not keys silently copied
# into every other section (or dropped when it is the only one).
_NO_DEFAULT_SECTION = "shoal: no default section"


def _read_ini(path: str) -> dict[str, dict[str, str]]:
    parser = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=("#", ";"),
                                       default_section=_NO_DEFAULT_SECTION)
    parser.optionxform = str  # keep keys as written; we normalise them ourselves
    try:
        with open(path) as f:
            parser.read_file(f, source=path)
    except configparser.Error as e:
        raise ConfigError(f"malformed ini file {path}: {_ini_problem(e, path)}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read config file {path}: {e}") from None
    if parser.has_section("DEFAULT"):
        with open(path, errors="replace") as f:
            lineno = next((n for n, line in enumerate(f, 1) if line.strip().startswith("[DEFAULT]")), "?")
        raise ConfigError(f"ini file {path}: line {lineno}: section [DEFAULT] is not supported (its keys "
                          f"would go to every section); put each key under its own section, e.g. [train]")
    # Keys (and sections) that differ only in case or - vs _ are one key
    # here: written twice, the second would silently win.
    merged: dict[str, dict[str, str]] = {}
    first_names: dict[tuple, str] = {}
    for section in parser.sections():
        for key, value in parser[section].items():
            name = (_norm(section), _norm(key))
            if name in first_names:
                raise ConfigError(f"ini file {path}: [{section}] {key} is {first_names[name]} again "
                                  f"(case and - vs _ do not count): give it once")
            first_names[name] = f"[{section}] {key}"
            if "\n" in value:   # configparser joins a line indented below a key onto its value
                lineno, continued = _continuation_line(path, section, key)
                raise ConfigError(f"malformed ini file {path}: line {lineno}: {continued!r} is indented "
                                  f"below [{section}] {key}, so it is read as more of that value; "
                                  f"start it at the line's beginning")
            merged.setdefault(_norm(section), {})[_norm(key)] = value
        merged.setdefault(_norm(section), {})
    return merged


def _continuation_line(path: str, section: str, key: str) -> tuple:
    """(line number, text) of the first indented line that configparser
    read as more of [section] key's value (blank lines may come between)."""
    current, in_value = None, False
    with open(path, errors="replace") as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text or text.startswith(("#", ";")):
                continue
            if line[:1].isspace() and in_value:
                return n, text
            if text.startswith("["):
                current, in_value = text.strip("[]").strip(), False
            else:
                in_value = current == section and text.split("=", 1)[0].split(":", 1)[0].strip() == key
    return "?", "?"


def _ini_problem(e: configparser.Error, path: str) -> str:
    """configparser's error as 'line N: what is wrong' (its own text is multi-line)."""
    def text(lineno: int) -> str:
        with open(path, errors="replace") as f:
            return repr(f.read().splitlines()[lineno - 1].strip())

    if isinstance(e, configparser.MissingSectionHeaderError):  # a ParsingError: test it first
        return f"line {e.lineno}: {text(e.lineno)} comes before any [section] header"
    if isinstance(e, configparser.ParsingError):
        lineno = e.errors[0][0]
        return f"line {lineno}: {text(lineno)} is neither a [section], a key = value nor a comment"
    if isinstance(e, configparser.DuplicateOptionError):
        return f"line {e.lineno}: key {e.option!r} appears twice in section [{e.section}]"
    if isinstance(e, configparser.DuplicateSectionError):
        return f"line {e.lineno}: section [{e.section}] appears twice"
    return str(e)


def _norm(key: str) -> str:
    return key.strip().lower().replace("-", "_")


def _type_name(value) -> str:
    return type(value).__name__


# Number keys whose "off" value may also be written empty (`target_return =`).
EMPTY_MEANS: dict[tuple[str, str], object] = {("train", "target_return"): 0.0}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def parse_value(section: str, key: str, text: str, default, where: str = ""):
    """`text` converted to the type of `default` (the key's value so far), or
    a ConfigError naming the key, the value, where it was given (`where`: a
    file, a flag) and the expected type."""
    raw = text.strip()
    at = f" (in {where})" if where else ""

    def bad(expected: str) -> ConfigError:
        return ConfigError(f"[{section}] {key} = {raw!r}{at}: expected {expected}, such as {default!r}")

    if isinstance(default, bool):
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise bad("a bool (true/false, yes/no, on/off, 1/0)")
    if isinstance(default, int):
        try:
            return int(raw.replace("_", ""), 0)
        except ValueError:
            pass
        try:  # 1e6, 2.0: fine when integral
            as_float = float(raw.replace("_", ""))
        except ValueError:
            raise bad("an int") from None
        if not as_float.is_integer():
            raise bad("an int")
        return int(as_float)
    if isinstance(default, float):
        if raw == "" and (section, key) in EMPTY_MEANS:
            return EMPTY_MEANS[(section, key)]
        try:
            return float(raw.replace("_", ""))
        except ValueError:
            raise bad("a float") from None
    if (section, key) in PATH_KEYS:
        return os.path.expanduser(raw)   # an ini file's ~/runs: the home folder's, not ./~/runs
    return raw


PATH_KEYS = {("train", "run_dir")}


# What each key may hold beyond its type: (check, what is expected). Float
# keys without a rule must be finite. tests/test_train_config.py checks that
# every non-bool key of default.ini has a rule here or is a float.
def _at_least(lo, strict: bool = False):
    kind = "an integer" if isinstance(lo, int) else "a finite number"
    return ((lambda v: math.isfinite(v) and (v > lo if strict else v >= lo)),
            f"{kind} {'>' if strict else '>='} {lo:g}")


def _between(lo: float, hi: float):
    return (lambda v: lo <= v <= hi), f"a number in [{lo:g}, {hi:g}]"  # nan fails both


def not_a_folder(path: str) -> str | None:
    """The part of folder path `path` that exists and is not a folder (a
    file, a broken link), so that os.makedirs(path) must fail; else None."""
    p = os.path.abspath(path)
    while not os.path.isdir(p):
        if os.path.lexists(p):
            return p
        parent = os.path.dirname(p)
        if parent == p:
            return None
        p = parent
    return None


def output_file_problem(path: str, example: str = "out.txt") -> str | None:
    """Why no file can be written at `path` (a folder there, a missing or
    read-only folder), or None: checked before the work whose output it
    holds, which makes no folders."""
    if os.path.isdir(path):
        return f"is a folder; expected a file path such as {os.path.join(path, example)}"
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"folder {folder} does not exist"
    if not os.access(folder, os.W_OK):
        return f"folder {folder} is not writable"
    return None


def _one_of(*choices: str):
    return (lambda v: v in choices), f"one of {', '.join(choices)}"


_FINITE = (math.isfinite, "a finite number")

RULES: dict[tuple[str, str], tuple] = {
    ("env", "name"): ((lambda v: v != ""), "an env name"),
    ("vec", "backend"): _one_of("serial", "multiprocessing", "cuda"),
    ("vec", "num_envs"): _at_least(1),
    ("vec", "num_workers"): _at_least(0),
    ("vec", "num_batches"): _at_least(1),
    ("train", "seed"): ((lambda v: 0 <= v < 2**32), "an integer in [0, 2**32)"),  # numpy's seed range
    ("train", "device"): ((lambda v: v in ("cpu", "cuda", "auto") or re.fullmatch(r"cuda:\d+", v)),
                          "one of cpu, cuda, cuda:N, auto"),
    ("train", "torch_threads"): _at_least(0),
    ("train", "total_timesteps"): _at_least(1),
    ("train", "max_train_seconds"): _at_least(0.0),
    ("train", "learning_rate"): _at_least(0.0, strict=True),
    ("train", "num_steps"): _at_least(1),
    ("train", "gamma"): _between(0.0, 1.0),
    ("train", "gae_lambda"): _between(0.0, 1.0),
    ("train", "num_minibatches"): _at_least(1),
    ("train", "update_epochs"): _at_least(1),
    ("train", "clip_coef"): _at_least(0.0),
    ("train", "ent_coef"): _at_least(0.0),
    ("train", "vf_coef"): _at_least(0.0),
    ("train", "max_grad_norm"): _at_least(0.0, strict=True),
    ("train", "eval_interval"): _at_least(0.0),
    # >= 1: a run always ends with an evaluation (its summary's eval_return)
    ("train", "eval_episodes"): _at_least(1),
    ("train", "target_return"): _FINITE,
    ("train", "log_interval"): _at_least(0.0),
    ("train", "dashboard"): _one_of("auto", "rich", "plain", "none"),
    # an existing file there (or on the way) would fail os.makedirs once the run starts
    ("train", "run_dir"): ((lambda v: v != "" and not_a_folder(v) is None),
                           "a folder path (not an existing file, nor a path through one)"),
    ("train", "checkpoint_interval"): _at_least(0.0),
    ("train", "reward_clip"): _at_least(0.0, strict=True),
    ("train", "wandb_project"): ((lambda v: v != ""), "a W&B project name"),
    ("dist", "backend"): _one_of("auto", "gloo", "nccl"),
    ("dist", "timeout"): _at_least(1.0),
    ("dist", "node_sum"): _one_of("auto", "off"),
    ("policy", "hidden_size"): _at_least(1),
    ("policy", "num_layers"): _at_least(1),
    ("policy", "activation"): _one_of("tanh", "relu"),
    ("policy", "obs_clip"): _at_least(0.0, strict=True),
    ("policy", "encoder"): _one_of("auto", "mlp", "cnn"),
}


# ----------------------------------------------------------------------------
# Env keyword arguments: [env] kwargs and [env] train_only
# ----------------------------------------------------------------------------
def _split_top(text: str) -> list[str]:
    """text split at the commas outside brackets and quotes."""
    parts, depth, quote, start = [], 0, None, 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _kwarg_value(text: str):
    """A kwargs value: true/false, none, a Python literal, else the bare word as a str."""
    low = text.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return text


def parse_env_kwargs(text: str) -> dict:
    """`[env] kwargs` text ("episodic_life=true, reward_clip=true") as a dict,
    or a ConfigError naming the pair at fault."""
    out: dict = {}
    for part in _split_top(text):
        part = part.strip()
        if not part:
            continue
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key.isidentifier() or not value:
            raise ConfigError(f"[env] kwargs = {text!r}: {part!r} is not key=value "
                              f"(expected e.g. episodic_life=true, reward_clip=true)")
        if key in out:
            raise ConfigError(f"[env] kwargs = {text!r}: {key!r} appears twice")
        out[key] = _kwarg_value(value)
    return out


def parse_names(text: str) -> list[str]:
    """`[env] train_only` text ("reward_clip, episodic_life") as a list of names."""
    names = [n.strip() for n in text.split(",") if n.strip()]
    bad = [n for n in names if not n.isidentifier()]
    if bad:
        raise ConfigError(f"[env] train_only = {text!r}: {bad[0]!r} is not a keyword argument name")
    return names


def _parses(parse, expected: str):
    """A rule: the value parses."""
    def ok(v) -> bool:
        try:
            parse(v)
        except ConfigError:
            return False
        return True
    return ok, expected


RULES[("env", "kwargs")] = _parses(parse_env_kwargs, "comma-separated key=value pairs "
                                   "(e.g. episodic_life=true, reward_clip=true)")
RULES[("env", "train_only")] = _parses(parse_names, "comma-separated keyword argument names")


def env_kwargs(env: dict, evaluation: bool = False) -> dict:
    """The env keyword arguments of an [env] section (none in a config that
    predates [env] kwargs); for evaluation, without the [env] train_only ones."""
    kwargs = parse_env_kwargs(env.get("kwargs", ""))
    if evaluation:
        drop = set(parse_names(env.get("train_only", "")))
        kwargs = {k: v for k, v in kwargs.items() if k not in drop}
    return kwargs


# ----------------------------------------------------------------------------
# The policy's encoder: [policy] encoder = auto | mlp | cnn
# ----------------------------------------------------------------------------
CNN_MIN_SIZE = 36  # the Nature CNN's smallest input (8x8 s4, 4x4 s2, 3x3 s1 leave 1x1)


def image_shape(spec) -> tuple[int, int, int] | None:
    """(C, H, W) the CNN sees for spec's observations, or None when they are
    not images: uint8 (C, H, W), or (S, H, W, 3) RGB stacks (C = 3 S), with
    H, W >= 36. (Snake's uint8 cell codes are a flat vector: not an image.)"""
    if np.dtype(spec.obs_dtype) != np.uint8:
        return None
    shape = tuple(int(n) for n in spec.obs_shape)
    if len(shape) == 3:
        c, h, w = shape
    elif len(shape) == 4 and shape[3] == 3:
        c, h, w = shape[0] * 3, shape[1], shape[2]
    else:
        return None
    return (c, h, w) if min(h, w) >= CNN_MIN_SIZE else None


def resolve_encoder(spec, choice: str) -> str:
    """"mlp" or "cnn" for [policy] encoder = choice: auto is cnn for images
    (image_shape), else mlp. A ValueError for cnn on observations that are not images."""
    if choice == "auto":
        return "cnn" if image_shape(spec) else "mlp"
    if choice == "cnn" and image_shape(spec) is None:
        raise ValueError(f"[policy] encoder = cnn: {spec.name}'s observations "
                         f"({np.dtype(spec.obs_dtype).name} {tuple(spec.obs_shape)}) are not uint8 images "
                         f"(C, H, W) with H, W >= {CNN_MIN_SIZE}; use mlp or auto")
    if choice not in ("mlp", "cnn"):
        raise ValueError(f"[policy] encoder = {choice!r}: expected one of auto, mlp, cnn")
    return choice


def check_value(section: str, key: str, value, where: str = "") -> None:
    """A ConfigError naming the key and value unless `value` passes the key's rule."""
    rule = RULES.get((section, key))
    if rule is None and isinstance(value, float):
        rule = _FINITE
    if rule is None or isinstance(value, bool):
        return
    ok, expected = rule
    if not ok(value):
        at = f" (in {where})" if where else ""
        raise ConfigError(f"[{section}] {key} = {value!r}: expected {expected}{at}")


def validate(config: Config) -> None:
    """Every key's rule, then the rules between keys; a ConfigError naming the first broken one."""
    for section, keys in config.items():
        for key, value in keys.items():
            check_value(section, key, value)
    vec, pc = config["vec"], config["policy"]
    if vec["backend"] != "cuda" and vec["num_envs"] % vec["num_batches"]:
        raise ConfigError(f"[vec] num_batches = {vec['num_batches']}: expected a divisor of "
                          f"[vec] num_envs = {vec['num_envs']} (each batch steps the same number of envs)")
    # [vec] num_workers is the multiprocessing pool's (the trainer gives serial pools none);
    # the pool's own errors name its arguments, not these keys
    if vec["backend"] == "multiprocessing" and vec["num_workers"] > vec["num_envs"]:
        raise ConfigError(workers_exceed_envs(vec["num_workers"], vec["num_envs"]))
    if vec["backend"] == "multiprocessing" and vec["num_workers"] % vec["num_batches"]:
        raise ConfigError(f"[vec] num_workers = {vec['num_workers']}: expected a multiple of [vec] "
                          f"num_batches = {vec['num_batches']} (each batch has workers of its own); set "
                          f"--vec.num-workers {max(vec['num_batches'], vec['num_workers'] // vec['num_batches'] * vec['num_batches'])}"
                          f" (0: one per core) or --vec.num-batches 1")
    if pc.get("separate_critic") and pc["lstm"]:
        raise ConfigError("[policy] separate_critic = true: expected lstm = false (the separate "
                          "critic is an MLP of the obs)")
    from shoal import envs  # here: shoal.envs imports the compiled envs
    try:
        spec = envs.spec(config["env"]["name"])
    except ValueError:  # an unknown env is reported where it is made
        spec = None
    if spec is not None:
        spec = _configured(spec, config["env"])
    if spec is not None and vec["backend"] == "cuda" and spec.kind != "header":
        raise ConfigError(f"[vec] backend = cuda: {spec.name} has no CUDA kernel (its envs are stepped "
                          f"by CPU workers, kind {spec.kind!r}); use backend multiprocessing or serial")
    if spec is not None:
        try:
            encoder = resolve_encoder(spec, pc.get("encoder", "mlp"))
        except ValueError as e:
            raise ConfigError(str(e)) from None
        if encoder == "cnn" and pc["normalize_obs"]:
            raise ConfigError("[policy] normalize_obs = true: expected false with the cnn encoder "
                              "(it scales its uint8 frames by 1/255)")
    check_minibatches(config, vec["num_envs"], spec.agents if spec is not None else 1)


def check_minibatches(config: Config, envs: int, agents: int, ranks: int = 1) -> None:
    """ConfigError unless [train] num_minibatches fits the batch the update
    cuts (that of each of `ranks` data-parallel ranks, stepping `envs` envs
    of `agents` agents): num_steps x envs x agents rows, or with [policy]
    lstm the agent rows alone (its minibatches are whole rows, their time
    order kept). Above it the update would clamp it silently."""
    tc, lstm = config["train"], config["policy"].get("lstm")
    limit = envs * agents * (1 if lstm else tc["num_steps"])
    if tc["num_minibatches"] <= limit:
        return
    whose, split = ("each rank's", f" / {ranks} ranks") if ranks > 1 else ("the", "")
    what = (f"agent rows, [vec] num_envs{split} x agents = {limit} (with [policy] lstm, a minibatch is whole rows)"
            if lstm else f"batch size, [train] num_steps x [vec] num_envs{split} x agents = {limit}")
    raise ConfigError(f"[train] num_minibatches = {tc['num_minibatches']}: expected at most {whose} {what}")


def workers_exceed_envs(workers: int, envs: int, ranks: int = 1) -> str:
    """The error for [vec] num_workers more than the envs each pool steps
    ([vec] num_envs, split over `ranks` data-parallel ranks), naming the
    keys and the flags that fix it."""
    if ranks == 1:
        envs_text, more_envs = f"[vec] num_envs = {envs}", workers
    else:
        envs_text = f"the {envs // ranks} envs per rank ([vec] num_envs = {envs} over {ranks} ranks)"
        more_envs = workers * ranks
    return (f"[vec] num_workers = {workers} is more than {envs_text}: every worker steps at least one "
            f"env; set --vec.num-workers {envs // ranks} or fewer (0: one per core), or "
            f"--vec.num-envs {more_envs} or more")


def _configured(spec, env: dict):
    """spec configured with [env] kwargs, or a ConfigError naming them; the
    evaluation env (without [env] train_only) must have the same spaces."""
    text = env.get("kwargs", "")
    try:
        configured = spec.configure(**env_kwargs(env))
        for_eval = spec.configure(**env_kwargs(env, evaluation=True))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"[env] kwargs = {text!r}: {e}") from None
    if (tuple(for_eval.obs_shape), for_eval.action_size, tuple(for_eval.action_nvec)) != \
            (tuple(configured.obs_shape), configured.action_size, tuple(configured.action_nvec)):
        raise ConfigError(f"[env] train_only = {env.get('train_only', '')!r}: evaluation without these "
                          f"would change the observation or action space; list only options such as "
                          f"reward_clip, episodic_life")
    return configured


def _infer(text: str):
    """The typed value of a default.ini entry: bool, int, float, else str."""
    raw = text.strip()
    if raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    for convert in (int, float):
        try:
            return convert(raw)
        except ValueError:
            pass
    return raw


def defaults() -> Config:
    """configs/default.ini, typed."""
    ini = _read_ini(os.path.join(configs_dir(), "default.ini"))
    return {s: {k: _infer(v) for k, v in keys.items()} for s, keys in ini.items()}


def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else f"; valid: {', '.join(sorted(options))}"


def all_keys(config: Config) -> list[str]:
    return [f"{s}.{k}" for s, keys in config.items() for k in keys]


def apply(config: Config, section: str, key: str, text: str, where: str = "") -> None:
    """Set config[section][key] from `text` (typed like the default), or a
    ConfigError naming the unknown section / key and the closest valid one."""
    section, key = _norm(section), _norm(key)
    at = f" (in {where})" if where else ""
    if section not in config:
        raise ConfigError(f"unknown section [{section}]{at}{_suggest(section, config)}")
    if key not in config[section]:
        dotted = [k.replace("_", "-") for k in all_keys(config)]
        close = difflib.get_close_matches(f"{section}.{key}".replace("_", "-"), dotted, n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]!r}?" if close else _suggest(key, config[section])
        raise ConfigError(f"unknown key {key!r} in section [{section}]{at}{hint}")
    value = parse_value(section, key, text, config[section][key], where)
    check_value(section, key, value, where)
    config[section][key] = value


def _same_env(a: str, b: str) -> bool:
    from shoal import envs  # here: shoal.envs imports the compiled envs
    try:
        return envs.spec(a).name == envs.spec(b).name
    except ValueError:
        return a.strip().lower() == b.strip().lower()


def merge_ini(config: Config, path: str) -> None:
    """Override config with the entries of ini file `path`. Its [env] name
    may only repeat the env being configured (a run's saved config.ini has
    one): the env is `shoal train ENV`'s argument, not a key."""
    for section, keys in _read_ini(path).items():
        for key, text in keys.items():
            if (_norm(section), _norm(key)) == ("env", "name"):
                if not _same_env(text, str(config["env"]["name"])):
                    raise ConfigError(f"[env] name = {text.strip()!r} (in {path}): the env is shoal train's "
                                      f"ENV argument ({config['env']['name']}), not a key: remove the line "
                                      f"or train with `shoal train {text.strip()}`")
                continue
            apply(config, section, key, text, where=path)


def parse_flags(config: Config, flags: list[str]) -> None:
    """Apply `--section.key value` / `--section.key=value` flags in order."""
    i = 0
    while i < len(flags):
        flag = flags[i]
        if not flag.startswith("--") or "." not in flag:
            raise ConfigError(f"unexpected argument {flag!r}: config flags look like "
                              f"--section.key value (e.g. --train.learning-rate 3e-4)")
        name, eq, value = flag[2:].partition("=")
        if not eq:
            if i + 1 >= len(flags) or (flags[i + 1].startswith("--") and "." in flags[i + 1]):
                raise ConfigError(f"flag {flag} needs a value" + (
                    f" (the next argument, {flags[i + 1]}, is another flag)" if i + 1 < len(flags) else ""))
            value = flags[i + 1]
            i += 1
        section, _, key = name.partition(".")
        if (_norm(section), _norm(key)) == ("env", "name"):
            raise ConfigError(f"flag --{name}: the env is shoal train's ENV argument, not a key: "
                              f"`shoal train {value} ...` trains {value}")
        apply(config, section, key, value, where=f"flag --{name}")
        i += 1


def load(env: str | None, flags: list[str] = (), extra_ini: list[str] = ()) -> Config:
    """default.ini, then configs/<env>.ini, then extra ini files, then flags;
    validated (a ConfigError names the first bad key)."""
    config = defaults()
    if env is not None:  # first: an ini file's [env] name is checked against it
        config["env"]["name"] = env
    if env is not None and os.path.exists(env_ini(env)):
        merge_ini(config, env_ini(env))
    for path in extra_ini:
        if not os.path.exists(path):
            raise ConfigError(f"config file {path!r} does not exist")
        merge_ini(config, path)
    parse_flags(config, list(flags))
    validate(config)
    return config


def to_ini(config: Config) -> str:
    """The config as ini text (what a run saves next to its logs)."""
    lines = []
    for section, keys in config.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {str(v).lower() if isinstance(v, bool) else v}" for k, v in keys.items()]
        lines.append("")
    return "\n".join(lines)


def help_text(config: Config) -> str:
    """Every key as a flag with its default, section by section."""
    lines = []
    for section, keys in config.items():
        lines.append(f"[{section}]")
        for k, v in keys.items():
            if (section, k) == ("env", "name"):  # set by shoal train ENV, not by a flag
                continue
            shown = str(v).lower() if isinstance(v, bool) else v
            flag = f"--{section}.{k.replace('_', '-')}"
            lines.append(f"  {flag:<30} {shown!s:<18} ({_type_name(v)})")
    return "\n".join(lines)
