"""gymnasium spaces laid out in shared memory, in gymnasium's batched structure.

A batch of a space is what `gymnasium.vector.utils.create_empty_array(space, n)`
returns: one (n, *shape) array per leaf (Box, Discrete, MultiDiscrete,
MultiBinary), nested in dicts and tuples like the space. Here the leaf arrays
are carved out of one memory region instead, so that a worker process can
write row i of every leaf and the parent reads the batch without a copy.

Row access is compiled once per space into plain closures (`row_writer`,
`row_reader`): the hot loop of a worker calls them per env and step.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
from gymnasium import spaces
from gymnasium.error import CustomSpaceError
from gymnasium.vector.utils import create_empty_array

from shoal.pool.layout import ALIGN

_LEAVES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def copy_arrays(value: Any) -> Any:
    """`value` with every numpy array in it copied, through dicts and tuples
    (a Dict / Tuple space's batch, an info dict); anything else as it is."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, dict):
        return {key: copy_arrays(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return tuple(copy_arrays(item) for item in value)
    return value


def check_shareable(space: spaces.Space) -> None:
    """Raise CustomSpaceError unless every leaf of `space` is a fixed-size array."""
    if isinstance(space, _LEAVES):
        return
    if isinstance(space, spaces.Tuple):
        for sub in space.spaces:
            check_shareable(sub)
        return
    if isinstance(space, spaces.Dict):
        for sub in space.spaces.values():
            check_shareable(sub)
        return
    raise CustomSpaceError(
        f"{type(space).__name__} spaces have no fixed-size layout in shared memory; "
        f"shared memory supports Box, Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of them")


def is_shareable(space: spaces.Space) -> bool:
    try:
        check_shareable(space)
    except CustomSpaceError:
        return False
    return True


def _align(offset: int) -> int:
    return (offset + ALIGN - 1) // ALIGN * ALIGN


def batch_bytes(space: spaces.Space, n: int) -> int:
    """Bytes that `carve_batch(space, n, ...)` takes, alignment included."""
    total = 0

    def count(shape, dtype):
        nonlocal total
        total = _align(total) + int(np.prod(shape)) * np.dtype(dtype).itemsize
        return np.empty(0)  # placeholder: only the size matters here

    check_shareable(space)
    create_empty_array(space, n=n, fn=count)
    return _align(total)


def carve_batch(space: spaces.Space, n: int, memory, offset: int = 0) -> Any:
    """The batch structure of `space` for `n` envs, as arrays over `memory`
    starting at `offset` (same order and sizes as batch_bytes)."""
    position = offset

    def view(shape, dtype):
        nonlocal position
        position = _align(position)
        count = int(np.prod(shape))
        array = np.frombuffer(memory, dtype=dtype, count=count, offset=position).reshape(shape)
        position += count * np.dtype(dtype).itemsize
        return array

    check_shareable(space)
    return create_empty_array(space, n=n, fn=view)


def row_writer(space: spaces.Space, batch: Any) -> Callable[[int, Any], None]:
    """A function (i, value) that stores one space element into row i of
    `batch`. A leaf value of another shape than the space's is a ValueError
    (the pool that gets it from a worker closes), as gymnasium's
    SyncVectorEnv raises one, not broadcast into the row (as numpy, and
    gymnasium's AsyncVectorEnv, would do with a (1, 3) or scalar value for
    a (3,) row), which would hide the env's bug. Likewise a value whose
    dtype numpy would not cast "same_kind" (floats into a uint8 or
    Discrete row, strings into floats) is a TypeError, as SyncVectorEnv's
    np.stack raises, not wrapped around or truncated into the row."""
    if isinstance(space, _LEAVES):
        return _leaf_writer(batch)
    if isinstance(space, spaces.Tuple):
        writers = [row_writer(sub, part) for sub, part in zip(space.spaces, batch)]

        def write_tuple(i, value):
            for write, item in zip(writers, value, strict=True):
                write(i, item)
        return write_tuple
    if isinstance(space, spaces.Dict):
        writers = [(key, row_writer(sub, batch[key])) for key, sub in space.spaces.items()]

        def write_dict(i, value):
            for key, write in writers:
                write(i, value[key])
        return write_dict
    raise CustomSpaceError(f"no row writer for {space}")


# The dtype np.stack gives a Python scalar.
_SCALAR_DTYPES = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}


def _leaf_writer(batch: np.ndarray) -> Callable[[int, Any], None]:
    row_shape, row_dtype, store = batch.shape[1:], batch.dtype, batch.__setitem__
    castable: dict = {row_dtype: True}   # a value's dtype (or Python type) -> casts "same_kind"

    def write_leaf(i, value):
        shape = getattr(value, "shape", None)   # an array's (or tensor's); else numpy's reading
        if shape is None:
            shape = () if isinstance(value, (int, float)) else np.shape(value)
        if tuple(shape) != row_shape:
            raise ValueError(f"a value of shape {tuple(shape)} where the space's shape is {row_shape} "
                             f"(the env returned an observation outside its observation_space)")
        key = getattr(value, "dtype", None) or type(value)
        ok = castable.get(key)
        if ok is None:
            ok = _casts_same_kind(_value_dtype(value), row_dtype)
            if isinstance(key, np.dtype) or key in _SCALAR_DTYPES:   # not lists: each may hold other types
                castable[key] = ok
        if not ok:
            raise TypeError(f"Cannot cast array data from {_value_dtype(value)!r} to {row_dtype!r} according "
                            f"to the rule 'same_kind' (the env returned an observation outside its "
                            f"observation_space; SyncVectorEnv raises this too)")
        store(i, value)
    return write_leaf


def _value_dtype(value):
    """The dtype numpy would give `value`: its own (an array's, or a torch
    tensor's, which is not numpy's), a Python scalar's, or a list's."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        dtype = _SCALAR_DTYPES.get(type(value)) or np.asarray(value).dtype
    return dtype


def _casts_same_kind(dtype, row_dtype: np.dtype) -> bool:
    """Would np.stack (SyncVectorEnv's) cast a value of `dtype` into a
    `row_dtype` row? Dtypes that are not numpy's (a torch tensor's) are left
    to numpy's store."""
    return not isinstance(dtype, np.dtype) or bool(np.can_cast(dtype, row_dtype, "same_kind"))


def row_reader(space: spaces.Space, batch: Any) -> Callable[[int], Any]:
    """A function i -> row i of `batch`, typed as gymnasium's `iterate` yields
    it (np.int64 scalar for Discrete, arrays for rows, dict / tuple)."""
    if isinstance(space, _LEAVES):
        if batch.ndim == 1:
            return batch.__getitem__  # a numpy scalar: already a copy
        # A copy, not a view: an env may keep its action (e.g. to penalise
        # the next one's change), and the next step overwrites this memory.
        return lambda i: batch[i].copy()
    if isinstance(space, spaces.Tuple):
        readers = [row_reader(sub, part) for sub, part in zip(space.spaces, batch)]
        return lambda i: tuple(read(i) for read in readers)
    if isinstance(space, spaces.Dict):
        readers = [(key, row_reader(sub, batch[key])) for key, sub in space.spaces.items()]
        return lambda i: {key: read(i) for key, read in readers}
    raise CustomSpaceError(f"no row reader for {space}")


def copy_if_fits(space: spaces.Space, batch: Any, values: Any) -> bool:
    """Copy a user's batch (e.g. actions) into `batch` if it has exactly the
    structure and shapes of `batch`, and dtypes equal to its own or integers
    that widen into it, so that the copy changes no value an env would see.
    Returns False (maybe after copying some leaves: the caller then sends the
    values another way) when it does not fit."""
    if isinstance(space, _LEAVES):
        if not isinstance(values, np.ndarray) or values.shape != batch.shape:
            return False
        # Integers that widen losslessly (int32 actions for a Discrete's
        # int64 batch) reach the env with the same values: no need to pickle.
        if values.dtype != batch.dtype and not (
                values.dtype.kind in "iu" and batch.dtype.kind in "iu"
                and np.can_cast(values.dtype, batch.dtype, "safe")):
            return False
        np.copyto(batch, values)
        return True
    if isinstance(space, spaces.Tuple):
        return isinstance(values, (tuple, list)) and len(values) == len(space.spaces) and all(
            copy_if_fits(sub, part, value) for sub, part, value in zip(space.spaces, batch, values))
    if isinstance(space, spaces.Dict):
        return hasattr(values, "keys") and set(values.keys()) == set(space.spaces) and all(
            copy_if_fits(sub, batch[key], values[key]) for key, sub in space.spaces.items())
    return False


class ObsSplit:
    """An observation space of which only some top-level entries have a
    fixed layout (a Dict or Tuple mixing e.g. a Box with a Text): those
    travel through shared memory, as `shared` (a Dict / Tuple space of
    them), the others pickled, as `piped_part(obs)` ({key or index: value}).
    `join` puts a batch back together in the space's own structure."""

    def __init__(self, space: spaces.Dict | spaces.Tuple):
        self.space = space
        items = list(space.spaces.items()) if isinstance(space, spaces.Dict) else list(enumerate(space.spaces))
        self.keys = [k for k, _ in items]
        self.shared_keys = [k for k, sub in items if is_shareable(sub)]
        self.piped_keys = [k for k, sub in items if not is_shareable(sub)]
        subs = [space[k] for k in self.shared_keys]
        self.shared = spaces.Dict(dict(zip(self.shared_keys, subs))) if isinstance(space, spaces.Dict) \
            else spaces.Tuple(subs)

    @classmethod
    def of(cls, space: spaces.Space) -> "ObsSplit | None":
        """The split of `space`, or None where there is nothing to split
        (all of it shareable, or none of its top-level entries)."""
        if not isinstance(space, (spaces.Dict, spaces.Tuple)) or is_shareable(space):
            return None
        subs = space.spaces.values() if isinstance(space, spaces.Dict) else space.spaces
        return cls(space) if any(is_shareable(sub) for sub in subs) else None

    def shared_part(self, obs) -> Any:
        if isinstance(self.space, spaces.Dict):
            return {k: obs[k] for k in self.shared_keys}
        return tuple(obs[k] for k in self.shared_keys)

    def piped_part(self, obs) -> dict:
        return {k: obs[k] for k in self.piped_keys}

    def empty_piped(self, n: int) -> dict:
        """A batch of the piped entries (gymnasium's create_empty_array)."""
        return {k: create_empty_array(self.space[k], n=n, fn=np.zeros) for k in self.piped_keys}

    def join(self, shared_batch, piped_batch: dict) -> Any:
        """The whole batch: shared entries (views of shared memory) and piped ones, in the space's order."""
        if isinstance(self.space, spaces.Dict):
            return {k: piped_batch[k] if k in piped_batch else shared_batch[k] for k in self.keys}
        shared = dict(zip(self.shared_keys, shared_batch))
        return tuple(piped_batch[k] if k in piped_batch else shared[k] for k in self.keys)
