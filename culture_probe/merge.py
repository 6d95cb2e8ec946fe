"""`culture_probe.merge` moved to `culture_probe.runner.merge`, in the run layer's package; this name stays, as the
same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.runner import merge

sys.modules[__name__] = merge
