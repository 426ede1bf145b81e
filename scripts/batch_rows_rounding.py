"""Whether a policy's forward over R rows equals the same rows' outputs
within a forward over 2R (what num_batches 2 against 1 asks of the
trainer's rollout: README, "Reproducibility"). torch's CPU matrix products
and convolutions block rows, so some R round otherwise.

    python -P scripts/batch_rows_rounding.py --env cartpole breakout --rows 1 2 3 4 5 6 8 12 16

One torch thread (the trainer's default). Prints, per env and R, "equal"
or the largest difference of the actor head and the value.
"""
import argparse

import numpy as np
import torch

import shoal
from shoal import config, train


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", nargs="+", default=["cartpole", "breakout"])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 32])
    args = parser.parse_args()
    torch.set_num_threads(1)
    for name in args.env:
        cfg = config.load(name)
        spec = shoal.env_spec(name)
        torch.manual_seed(0)
        policy = train.policy_from_config(spec, cfg["policy"])
        for rows in args.rows:
            if np.dtype(spec.obs_dtype) == np.uint8:   # pixels (the CNN)
                x = torch.randint(0, 255, (2 * rows, *spec.obs_shape), dtype=torch.uint8)
            else:
                x = torch.randn(2 * rows, *spec.obs_shape)
            with torch.no_grad():
                head, value, _ = policy(x)
                half_head, half_value, _ = policy(x[:rows])
            diff = max((head[:rows] - half_head).abs().max().item(), (value[:rows] - half_value).abs().max().item())
            print(f"{name:10s} {rows:4d} rows: {'equal' if diff == 0 else f'differ, up to {diff:.1e}'}")


if __name__ == "__main__":
    main()
