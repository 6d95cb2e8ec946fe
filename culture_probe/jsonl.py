"""`culture_probe.jsonl` moved to `culture_probe.util.jsonl`, with the package's other small utilities; this
name stays, as the same module, for one release (docs/architecture.md, "Moved modules").
"""

import sys

from culture_probe.util import jsonl

sys.modules[__name__] = jsonl
