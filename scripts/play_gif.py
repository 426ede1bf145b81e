"""Write a short GIF of a first-party env being played (same as `shoal play`).

    python scripts/play_gif.py cartpole --out cartpole.gif --steps 200 --policy random
"""
import sys

from shoal.cli import main

if __name__ == "__main__":
    sys.exit(main(["play", *sys.argv[1:]]))
