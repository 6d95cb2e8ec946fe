"""`culture_probe.dryrun` moved to `culture_probe.runner.dryrun`, in the run layer's package; this name stays,
as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.runner import dryrun

sys.modules[__name__] = dryrun
