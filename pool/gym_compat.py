"""Checks that shoal's gymnasium vector envs share with gymnasium's own."""
from __future__ import annotations

import numpy as np


def validate_reset_mask(reset_mask, num_envs: int) -> None:
    """options["reset_mask"]: same checks, order, exception types and
    messages as gymnasium's SyncVectorEnv / AsyncVectorEnv reset."""
    if not isinstance(reset_mask, np.ndarray):
        raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
    if reset_mask.shape != (num_envs,):
        raise ValueError(f"`options['reset_mask']` must have shape `({num_envs},)`, got {reset_mask.shape}")
    if reset_mask.dtype != np.bool_:
        raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
    if not np.any(reset_mask):
        raise ValueError(f"`options['reset_mask']` must contain a boolean array with at least one "
                         f"True value, got reset_mask={reset_mask}")
