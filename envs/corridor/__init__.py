"""Corridor: walk to the end of a corridor (see corridor.h)."""
from shoal.envs import header_spec

SPEC = header_spec("Corridor", __name__)   # spaces, agents, step limit: read off corridor.h
