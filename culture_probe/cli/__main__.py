"""`python -m culture_probe.cli`, as the package's module was run before it became a package (the
benchmarks' start-up timing runs it so).
"""

import sys

from culture_probe.cli import main

sys.exit(main())
