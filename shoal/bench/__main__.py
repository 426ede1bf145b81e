"""`python -m shoal.bench`: the same as `shoal bench`."""
import sys

from shoal.bench import main

sys.exit(main())
