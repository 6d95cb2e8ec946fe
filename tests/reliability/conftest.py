"""What several reliability tests read: two finished DLAMA runs of one model, one language each."""

from __future__ import annotations

from pathlib import Path

import pytest
from dlama_fixture import write_dlama
from test_dlama_consistency import BilingualScorer

from culture_probe.runner import run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two finished DLAMA runs of one model, one language each: what every command reads,
    `consistency` pairs and `compare` lines up (made once per test module, so each module may damage
    its own copies).
    """
    root = tmp_path_factory.mktemp("dlama_runs")
    data = write_dlama(root / "dlama")
    made = {language: root / language for language in ("en", "ar")}
    for language, out in made.items():
        run(
            "dlama_arab_west",
            BilingualScorer(False),
            data_dir=str(data),
            language=language,
            out=out,
            progress=False,
        )
    return made
