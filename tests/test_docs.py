"""The documentation builds without warnings (`mkdocs build --strict`: no broken links, no missing
pages), every page is in the nav once, and each benchmark page has the sections a reader looks for.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
BENCHMARK_SECTIONS = ("Protocol", "Deviations from the original code", "Example output")


class _Loader(yaml.SafeLoader):
    """mkdocs.yml may hold tags such as `!ENV` or `!!python/name:`; the nav needs none of them."""


_Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
_Loader.add_multi_constructor("tag:yaml.org,2002:python/", lambda loader, suffix, node: None)


def nav_pages(entries) -> list[str]:
    """Every page path in a mkdocs nav, in order (external URLs left out)."""
    pages = []
    for entry in entries:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            pages += nav_pages(value)
        elif not re.match(r"[a-z]+://", value):
            pages.append(value)
    return pages


def headings(markdown: str) -> list[str]:
    """The ATX headings of a page, outside fenced code blocks, without their `#` marks."""
    found, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        elif not fenced and (match := re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)):
            found.append(match.group(1))
    return found


def test_nav_lists_every_page_once():
    config = yaml.load((REPO / "mkdocs.yml").read_text(encoding="utf-8"), Loader=_Loader)
    listed = nav_pages(config["nav"])
    repeated = sorted({p for p in listed if listed.count(p) > 1})
    assert not repeated, f"listed more than once in mkdocs.yml's nav: {repeated}"
    missing = sorted(p for p in listed if not (DOCS / p).is_file())
    assert not missing, f"nav entries without a file under docs/: {missing}"
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    unlisted = sorted(set(pages) - set(listed))
    assert not unlisted, f"pages under docs/ missing from mkdocs.yml's nav: {unlisted}"


@pytest.mark.parametrize("page", sorted(p.name for p in (DOCS / "benchmarks").glob("*.md")))
def test_benchmark_page_sections(page):
    found = headings((DOCS / "benchmarks" / page).read_text(encoding="utf-8"))
    absent = [s for s in BENCHMARK_SECTIONS if s not in found]
    assert not absent, f"docs/benchmarks/{page} lacks the sections {absent}"


def test_headings_ignore_code_blocks():
    assert headings("# A\n```text\n## not a heading\n```\n### B ##\n") == ["A", "B"]


def test_mkdocs_build_strict(tmp_path):
    if shutil.which("mkdocs", path=str(Path(sys.executable).parent)) is None:
        pytest.skip("mkdocs is not installed (it is in the test extras: pip install -e '.[test]')")
    pytest.importorskip(
        "mkdocstrings_handlers.python",
        reason="mkdocstrings[python] builds the API reference (it is in the test extras: pip install -e '.[test]')",
    )
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    warnings = [line for line in done.stderr.splitlines() if "WARNING" in line]
    assert not warnings, "\n".join(warnings)
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "cli" / "index.html").is_file()
    # the API reference is generated from the docstrings, not left as `::: name` text
    api = (tmp_path / "site" / "api" / "top-level" / "index.html").read_text(encoding="utf-8")
    assert "culture_probe.runner.run" in api and ":::" not in api


def deviation_section(markdown: str) -> str:
    """The text of a benchmark page's "Deviations from the original code" section, up to the next
    heading of its level or higher.
    """
    start = markdown.index("Deviations from the original code")
    level = markdown.rfind("\n", 0, start)
    hashes = markdown[level + 1 : start].strip()
    rest = markdown[start:]
    end = re.search(rf"\n#{{1,{len(hashes)}}} ", rest)
    return rest[: end.start()] if end else rest


@pytest.mark.parametrize("benchmark", ["dlama", "fmlama", "camel", "xfakt", "maps"])
def test_each_deviation_is_on_its_benchmark_page_with_its_upstream_side(benchmark):
    """Every deviation the protocol declares is a row of the page's deviation table, and each option
    the upstream profile sets for it is named there, so the docs cannot fall behind the code.
    """
    import importlib

    task = importlib.import_module(f"culture_probe.benchmarks.{benchmark}.task").TASK
    section = deviation_section(
        (DOCS / "benchmarks" / f"{benchmark}.md").read_text(encoding="utf-8")
    )
    assert "--protocol upstream" in section
    for deviation in task.deviations:
        row = next(
            (
                line
                for line in section.splitlines()
                if re.match(rf"\|\s*\**{re.escape(deviation.id)}\**\s*\|", line)
            ),
            None,
        )
        assert row is not None, f"{benchmark}: {deviation.id} has no row in the deviation table"
        for option in deviation.upstream or {}:
            assert option in row, f"{benchmark} {deviation.id}: the row does not name {option}"


#: citations of documents a user does not have: the internal design specs (`spec 4.4`, `spec section
#: 7`, `specs/camel.md`, `spec dlama.md`, `(spec §5)`), DESIGN.md, and "the shared mirror" (users
#: know only a local mirror set with CULTURE_PROBE_MIRROR)
INTERNAL_CITATION = re.compile(
    r"\bspecs?\s+(?:section\s+|table\s+|§\s*)?\d|\bspecs?\s*§|\bspecs/|\bspecs?\s+[a-z_]+\.md\b|\bDESIGN\.md\b"
    r"|shared\s+mirror",
    re.IGNORECASE,
)


def internal_citations(text: str) -> list[str]:
    """The internal citations in a text, each with the line it is on."""
    return [
        f"{number}: {line.strip()}"
        for number, line in enumerate(text.splitlines(), 1)
        if INTERNAL_CITATION.search(line)
    ]


def test_internal_citation_pattern():
    for cited in (
        "(spec 4.4)",
        "Spec section 7:",
        "specs/camel.md 5.2",
        "(spec §5.1)",
        "spec dlama.md 2.2",
        "in the shared mirror",
        "see DESIGN.md",
    ):
        assert internal_citations(cited), cited
    for fine in (
        "the paper's section 4.4",
        "model['spec']",
        "a planted spec's hash",
        "a local mirror (CULTURE_PROBE_MIRROR)",
    ):
        assert not internal_citations(fine), fine


def test_user_facing_text_cites_only_what_users_have():
    """Docstrings (rendered into the API docs), messages and descriptions of the package, the docs
    pages, the README and the metric modules' READMEs cite the papers or the docs, never the design
    specs kept outside the repository.
    """
    import ast

    found = []
    for path in sorted((REPO / "culture_probe").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # every string literal: docstrings, messages, `culture-probe list` descriptions
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [
                    f"{path.relative_to(REPO)}:{node.lineno}+{hit}"
                    for hit in internal_citations(node.value)
                ]
    pages = [
        REPO / "README.md",
        *DOCS.rglob("*.md"),
        *(REPO / "culture_probe" / "metrics_modules").rglob("README*"),
    ]
    for path in sorted(pages):
        found += [
            f"{path.relative_to(REPO)}:{hit}"
            for hit in internal_citations(path.read_text(encoding="utf-8"))
        ]
    assert not found, "user-facing text cites internal specs or the shared mirror:\n" + "\n".join(
        found
    )


def quick_start(page: str) -> list[list[str]]:
    """The `culture-probe` commands of a page's first bash block under "Quick start" that need no
    network (no `--endpoint wikidata`), each from its subcommand on, continuation lines joined.
    """
    text = (DOCS / page).read_text(encoding="utf-8")
    block = re.search(r"## Quick start\n+```bash\n(.*?)```", text, flags=re.S)
    assert block, f"docs/{page} has no Quick start bash block"
    commands = []
    for line in block.group(1).replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words[:1] == ["culture-probe"] and "wikidata" not in words:
            commands.append(words[1:])
    return commands


@pytest.mark.filterwarnings("ignore::culture_probe.runner.SmallLimitWarning")
def test_the_curation_quick_start_runs_as_written_and_its_pair_is_probed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The offline commands of docs/curation.md's quick start, run from a checkout's root as a user
    copies them: the curation writes facts (it exited 2 on the fixture's seven empty predicates),
    and the run probes the pair it wrote in both languages (dlama_arab_west refused it by the
    paper's counts, dlama_custom for want of `pair=`), with a masked stand-in that ranks every
    candidate alike in place of the Hub model, and a small limit.
    """
    pytest.importorskip("pyoxigraph", reason="curation needs culture_probe[curation]")
    from stand_ins import NoIdeaScorer

    from culture_probe.cli import main

    class Flat(NoIdeaScorer):
        kind, identity = "masked", {"name_or_path": "flat"}

    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.load", lambda spec: Flat())
    monkeypatch.setattr("culture_probe.engine.loading.ModelSpec.kind", lambda spec: "masked")
    # the report's figures have their own tests
    monkeypatch.setattr(
        "culture_probe.report.markdown.available", lambda name: name != "matplotlib"
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests").symlink_to(REPO / "tests")
    commands = quick_start("curation.md")
    assert [argv[:2] for argv in commands] == [["curate", "dlama"], ["run", "dlama_custom"]]
    curate, probe = commands
    assert main(curate) == 0, capsys.readouterr().err
    assert main([*probe, "--limit", "2", "--no-cache"]) == 0, capsys.readouterr().err
    items = Path(probe[probe.index("--out") + 1]) / "items.jsonl"
    assert {json.loads(line)["language"] for line in items.open(encoding="utf-8")} == {"ar", "en"}
