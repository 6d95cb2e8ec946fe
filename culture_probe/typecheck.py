"""`culture_probe.typecheck` moved to `culture_probe.util.typecheck`, with the package's other small utilities; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.util import typecheck

sys.modules[__name__] = typecheck
