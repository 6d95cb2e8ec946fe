"""`culture_probe.suite` moved to `culture_probe.runner.suite`, in the run layer's package; this name stays,
as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.runner import suite

sys.modules[__name__] = suite
