"""The test browser: Debian's chromium driven by selenium through the system chromedriver, headless,
offline, its console log kept, so that a test sees the board as a reader's browser draws it from
file://.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


def missing() -> str | None:
    """Why no browser test can run here (None: chromium, its driver and selenium are installed)."""
    if not (Path(CHROMIUM).is_file() and Path(CHROMEDRIVER).is_file()):
        return f"chromium or chromedriver is not installed ({CHROMIUM}, {CHROMEDRIVER}); .ci/run installs them"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (requirements/dev)"
    return None


@contextmanager
def chrome(profile: Path) -> Iterator[object]:
    """A headless chromium whose console messages `driver.get_log("browser")` returns."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1400,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: $CULTURE_PROBE_ARTIFACTS (CI keeps it) or the test's tmp folder."""
    folder = Path(os.environ.get("CULTURE_PROBE_ARTIFACTS") or tmp_path / "artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def problems(driver: object) -> list[dict]:
    """The console's errors and warnings since the last call (the log is emptied as it is read)."""
    return [entry for entry in driver.get_log("browser") if entry["level"] in ("SEVERE", "WARNING")]  # type: ignore[attr-defined]


def cpu_seconds(driver: object) -> dict[int, float]:
    """CPU seconds (user + system) so far of each live process of the browser (chromedriver and
    every chromium process under it), read from /proc (Linux): a cost that a busy machine does not
    inflate, as it does wall time.
    """
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, float] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # exited meanwhile
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        parents[int(entry.name)] = int(fields[1])
        used[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
    root = driver.service.process.pid  # type: ignore[attr-defined]
    tree, grown = {root}, True
    while grown:
        below = {pid for pid, parent in parents.items() if parent in tree} - tree
        tree |= below
        grown = bool(below)
    return {pid: used[pid] for pid in tree if pid in used}


def cpu_spent(before: dict[int, float], after: dict[int, float]) -> float:
    """The browser's CPU seconds between two `cpu_seconds` readings (a process started meanwhile
    counts whole).
    """
    return sum(seconds - before.get(pid, 0.0) for pid, seconds in after.items())
