"""`python -m culture_probe ...` (what `accelerate launch -m culture_probe run ...` calls)."""

import sys

from culture_probe.cli import main

sys.exit(main())
