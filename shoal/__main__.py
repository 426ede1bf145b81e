"""`python -m shoal ...` runs the `shoal` command line (see shoal.cli)."""
import sys

from shoal.cli import main

sys.exit(main())
