"""An env's SPEC repeats a few facts of its C header; loading the binding
checks them, so the two cannot drift apart silently."""
import dataclasses

import numpy as np
import pytest

import shoal
from shoal.envs import SpecMismatchError, check_spec_against_binding


@pytest.mark.parametrize("name", shoal.envs.names())
def test_every_shipped_spec_matches_its_header(name):
    spec = shoal.env_spec(name)
    try:
        binding = spec.load_binding()
    except ImportError as e:   # a library-backed env whose extra is not installed
        pytest.skip(str(e))
    check_spec_against_binding(spec, binding)   # raises on a mismatch
    assert binding.MAX_EPISODE_STEPS == spec.max_episode_steps


@pytest.mark.parametrize("field, value, named", [
    ("max_episode_steps", 499, "max_episode_steps: 499 in the spec, 500 in the header"),
    ("agents", 2, "agents: 2 in the spec, 1 in the header"),
    ("obs_shape", (5,), "obs elements"),
    ("action_nvec", (2, 2), "action components"),
    ("obs_dtype", np.float64, "obs_dtype"),
])
def test_a_spec_that_disagrees_with_its_header_is_refused(field, value, named):
    spec = dataclasses.replace(shoal.env_spec("CartPole"), **{field: value})
    with pytest.raises(SpecMismatchError, match=named):
        check_spec_against_binding(spec, spec.load_binding())
