"""`culture_probe.publish` moved to `culture_probe.hub.publish`, with the other Hub publishing module; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.hub import publish

sys.modules[__name__] = publish
