"""One helper for a module that moves after a release: its old file keeps the old name alive, as the
new module itself, until the release that removes it. Unused today: nothing was released under an
older name (0.1.0).

    # culture_probe/suite.py, after it moved to culture_probe.runner.suite in a release
    from culture_probe.util.moves import moved
    moved(__name__, "culture_probe.runner.suite", removed_in="0.3.0")
"""

from __future__ import annotations

import importlib
import sys
import warnings


def moved(old: str, new: str, *, removed_in: str) -> None:
    """Make module `old` (call it from the old module's file with `__name__`) the module `new`
    itself, so that an import or a patch of either name reaches one module, and warn once where it
    went and when the old name goes.
    """
    warnings.warn(
        f"{old} moved to {new}; import it from there (the old name is removed in culture_probe {removed_in}).",
        DeprecationWarning,
        stacklevel=3,
    )
    sys.modules[old] = importlib.import_module(new)
