"""`culture_probe.metric_spaces` moved to `culture_probe.hub.metric_spaces`, with the other Hub publishing module; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.hub import metric_spaces

sys.modules[__name__] = metric_spaces
