"""The committed lock (`requirements/test.lock`, what `make install` and CI install) and setup.cfg's
open ranges (what users install) never drift apart, and the environment the tests run in is the
lock's.
"""

from __future__ import annotations

import configparser
import re
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "requirements" / "test.lock"
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9_.-]*)==(\S+)")


def locked() -> dict[str, Version]:
    """Every pinned distribution of the lock, by normalised name."""
    return {
        canonicalize_name(match[1]): Version(match[2])
        for line in LOCK.read_text(encoding="utf-8").splitlines()
        if (match := PIN.match(line))
    }


def declared(extras: tuple[str, ...] = ("test",)) -> list[Requirement]:
    """setup.cfg's install_requires and the requirements of `extras`, following `culture_probe[...]`
    references.
    """
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    sections = config["options.extras_require"]
    requirements = [
        Requirement(line)
        for line in config["options"]["install_requires"].splitlines()
        if lines(line)
    ]
    pending, seen = list(extras), set()
    while pending:
        extra = pending.pop()
        seen.add(extra)
        for requirement in (
            Requirement(line) for line in sections[extra].splitlines() if lines(line)
        ):
            if canonicalize_name(requirement.name) == "culture-probe":
                pending += [name for name in requirement.extras if name not in seen]
            else:
                requirements.append(requirement)
    return requirements


def lines(line: str) -> bool:
    """Whether a line of a setup.cfg list is a requirement (not blank, not a comment)."""
    return bool(line.strip()) and not line.strip().startswith("#")


def test_every_declared_requirement_is_locked_within_its_range() -> None:
    pins = locked()
    applicable = [r for r in declared() if r.marker is None or r.marker.evaluate()]
    assert len(applicable) > 30  # install_requires and the test extras with plots and curation
    missing = [str(r) for r in applicable if canonicalize_name(r.name) not in pins]
    assert not missing, f"in setup.cfg but not in {LOCK.name}: {missing}; run `make lock`"
    outside = {
        str(r): str(pins[canonicalize_name(r.name)])
        for r in applicable
        if not r.specifier.contains(pins[canonicalize_name(r.name)], prereleases=True)
    }
    assert not outside, (
        f"{LOCK.name} pins versions setup.cfg's ranges exclude: {outside}; run `make lock`"
    )


def test_every_pin_carries_a_hash() -> None:
    text = LOCK.read_text(encoding="utf-8")
    # after the two header comment lines
    entries = re.split(r"\n(?=[A-Za-z0-9])", text.split("\n", 2)[2])
    unhashed = [
        entry.split()[0] for entry in entries if PIN.match(entry) and "--hash=sha256:" not in entry
    ]
    assert len(entries) == len(locked()) and not unhashed, unhashed


def test_the_environment_under_test_is_the_lock() -> None:
    # `make install` syncs the venv to the lock: a package at another version means the tests ran on
    # something the lock does not record
    wrong = {}
    for name, pinned in locked().items():
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            installed = None
        if installed != pinned:
            wrong[name] = (str(pinned), str(installed))
    if Path(sys.prefix).resolve() != REPO / ".venv":
        pytest.skip(f"not run from `make install`'s venv ({sys.prefix})")
    assert not wrong, (
        f"installed versions differ from {LOCK.name} (locked, installed): {wrong}; run `make install`"
    )
