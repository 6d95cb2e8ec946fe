"""Optional dependencies: curation's SPARQL libraries (`culture_probe[curation]`) and plotting
(`culture_probe[plots]`) are extras, since most users never curate and a run's numbers do not need
figures. `require` imports one, or names the `pip install` line that provides it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from culture_probe.errors import CultureProbeError

#: module -> the extra that installs it
EXTRAS = {
    "SPARQLWrapper": "curation",
    "pyoxigraph": "curation",
    "tenacity": "curation",
    "matplotlib": "plots",
    "arabic_reshaper": "plots",
    "bidi": "plots",
}


class MissingExtraError(CultureProbeError, ImportError):
    """An optional dependency is not installed; the message is the line to run."""


def require(module: str) -> ModuleType:
    """`import module`, or an error naming `pip install 'culture_probe[<extra>]'`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRAS[module.split(".")[0]]
        raise MissingExtraError(
            f"{module} is not installed; it comes with culture_probe's {extra!r} extra: "
            f"pip install 'culture_probe[{extra}]'"
        ) from None


def available(module: str) -> bool:
    """Whether an optional module can be imported."""
    try:
        require(module)
    except MissingExtraError:
        return False
    return True
