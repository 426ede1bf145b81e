"""Memory over a sweep of MuJoCo model files, as domain randomisation does:
each of COUNT envs (default 300) is made from its own rewrite of Humanoid's
model (one density changed), reset, stepped once and closed. The resident
memory of this process is printed every 50 envs: a model kept after its env
closed (~0.5 MB for Humanoid) shows as steady growth.

    python -P scripts/mujoco_model_sweep.py [COUNT]

Needs the mujoco extra. Writes one model file to a temporary folder.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import gymnasium

import shoal  # noqa: F401  (registers the shoal/ ids)
from shoal.envs.mujoco.binding import model_path


def rss_mib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) // 1024


def main(count: int) -> None:
    source = model_path("humanoid.xml").read_text()
    marker = '<geom conaffinity="1"'
    if marker not in source:
        raise SystemExit(f"humanoid.xml has no {marker!r} to vary: gymnasium's asset changed")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "humanoid.xml"
        for k in range(count + 1):
            # a distinct file each time: another density on the first geom
            path.write_text(source.replace(marker, f'{marker} density="{1000 + k}"', 1))
            env = gymnasium.make("shoal/Humanoid-v5", xml_file=str(path))
            env.reset(seed=0)
            env.step(env.action_space.sample())
            env.close()
            if k % 50 == 0:
                print(f"{k:5d} envs  RSS {rss_mib()} MiB", flush=True)


if __name__ == "__main__":
    if any(arg in ("-h", "--help") for arg in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300)
