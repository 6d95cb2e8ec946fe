"""`culture_probe.run_command` moved to `culture_probe.runner.run_command`, in the run layer's package; this name stays,
as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.runner import run_command

sys.modules[__name__] = run_command
