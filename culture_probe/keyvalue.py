"""`culture_probe.keyvalue` moved to `culture_probe.util.keyvalue`, with the package's other small utilities; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.util import keyvalue

sys.modules[__name__] = keyvalue
