"""`culture_probe.extras` moved to `culture_probe.util.extras`, with the package's other small utilities; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.util import extras

sys.modules[__name__] = extras
