"""``python -m placement_gym``: the same as the ``placement-gym`` console script."""

import sys

from placement_gym.cli import main

sys.exit(main())
