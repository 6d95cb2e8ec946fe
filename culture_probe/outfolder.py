"""`culture_probe.outfolder` moved to `culture_probe.util.outfolder`, with the package's other small utilities; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.util import outfolder

sys.modules[__name__] = outfolder
