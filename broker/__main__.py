"""`python -m broker` runs `krait serve` (any further arguments go to it)."""

import sys

from .cli import main

sys.exit(main(["serve", *sys.argv[1:]]))
