"""Every notebook in notebooks/ runs top to bottom (one test per notebook) in a python3 kernel from
this venv, and the outputs committed with it are the ones it produces now.

The stored outputs are written by `make notebooks` (`python tests/test_notebooks.py --update [NAME
...]`), which executes each notebook exactly as the test does and writes it back.
"""

from __future__ import annotations

import argparse
import ast
import configparser
import difflib
import hashlib
import os
import re
import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import packages_distributions
from pathlib import Path

# test extras (setup.cfg): a missing one fails the suite instead of skipping every notebook
import nbclient
import nbformat
import pytest

from culture_probe.models.planted import PLANTABLE_ARCHS

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
REGENERATE = "make notebooks"
# Fixed in the kernel so that outputs do not depend on the machine or on what ran before: no
# progress bars or library chatter, one torch thread count everywhere (float sums depend on it),
# offline hubs.
KERNEL_ENV = {
    "OMP_NUM_THREADS": "2",
    "MKL_NUM_THREADS": "2",
    "TQDM_DISABLE": "1",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}
# tqdm.auto warns on import when ipywidgets is missing (whether it is depends on the environment)
QUIET_WARNINGS = "ignore:IProgress not found"
IMAGE = re.compile(r"image/")
SCRATCH_PREFIX = "culture_probe_notebook_"
# `path:line: SomeWarning: message` and its source line, from an installed package (versions vary by
# environment)
THIRD_PARTY_WARNING = re.compile(
    r"^\S*(site|dist)-packages/\S+:\d+: \w*Warning: .*\n(  .*\n)?", re.MULTILINE
)


def declared_distributions() -> set[str]:
    """Normalised names in setup.cfg's install_requires and `test` extra (what a test environment
    installs).
    """
    config = configparser.ConfigParser()
    config.read(REPO / "setup.cfg")
    lines = (
        config["options"]["install_requires"].split()
        + config["options.extras_require"]["test"].split()
    )
    return {normalised(re.split(r"[<>=!~\[;]", line)[0]) for line in lines if line}


def normalised(distribution: str) -> str:
    """A distribution name as pip compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", distribution).lower()


def imported_modules(path: Path) -> set[str]:
    """Top-level modules a notebook's code cells import (shell and magic lines left out)."""
    modules = set()
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code":
            code = "\n".join(
                line
                for line in cell.source.splitlines()
                if not line.lstrip().startswith(("%", "!"))
            )
            for node in ast.walk(ast.parse(code)):
                if isinstance(node, ast.Import):
                    modules |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    modules.add(node.module.split(".")[0])
    return modules


@contextmanager
def scratch_folder() -> Iterator[Path]:
    """A fresh folder for one kernel's caches and temporary files, removed afterwards: a notebook's
    outputs must not depend on planted models or scores cached by an earlier notebook or test, nor
    leave files in /tmp.
    """
    folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def kernel_environment(scratch: Path) -> dict[str, str]:
    """The kernel's environment: this one, plus the repo on sys.path (also before `pip install -e
    .`), its caches and temporary files in `scratch`, and KERNEL_ENV.
    """
    folders = {
        "TMPDIR": "tmp",
        "HF_HOME": "hf",
        "HF_DATASETS_CACHE": "datasets",
        "CULTURE_PROBE_CACHE": "cache",
    }
    for name in folders.values():
        (scratch / name).mkdir()
    pythonpath = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    warnings = ",".join(filter(None, [os.environ.get("PYTHONWARNINGS"), QUIET_WARNINGS]))
    return {
        **os.environ,
        **KERNEL_ENV,
        "PYTHONPATH": pythonpath,
        "PYTHONWARNINGS": warnings,
        **{variable: str(scratch / name) for variable, name in folders.items()},
    }


def executed(path: Path) -> nbformat.NotebookNode:
    """The notebook at `path` run top to bottom in a fresh python3 kernel (cwd: its folder), outputs
    filled in; raises CellExecutionError naming the failing cell.
    """
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=900,
        # the kernel's start (60 s by default) is a hang guard too: a busy machine takes minutes for
        # its imports
        startup_timeout=600,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(path.parent)}},
    )
    with scratch_folder() as scratch:
        client.execute(env=kernel_environment(scratch))
    return notebook


def path_patterns() -> list[tuple[re.Pattern[str], str]]:
    """(pattern, placeholder) pairs for the paths of this machine and run: the repository, the venv,
    the mirror, temporary folders, the home folder. Outputs are stored with the placeholders, so no
    notebook names a path of the machine that wrote it.

    Stored outputs may come from another checkout: a path is recognised by its tail where it can be.
    """
    anchor = r"(?=[/\s'\"`)\]]|$)"  # the end of a path component
    places = [
        (str(REPO), "<repo>"),
        (sys.prefix, "<venv>"),
        (os.environ.get("CULTURE_PROBE_MIRROR", ""), "<mirror>"),
        (tempfile.gettempdir(), "<tmp>"),
        (str(Path.home()), "<home>"),
    ]
    return [
        (re.compile(rf"(/[\w.-]+)*/{SCRATCH_PREFIX}\w+/tmp{anchor}"), "<tmp>"),  # a kernel's TMPDIR
        # the default mirror beside any checkout
        (re.compile(rf"(/[\w.-]+)*/shared/mirror{anchor}"), "<mirror>"),
        *(
            (re.compile(re.escape(place) + anchor), name)
            for place, name in places
            if len(place) > 1
        ),
        # tempfile.mkdtemp's random names
        (re.compile(r"<tmp>/(?!<dir>)[^/\s'\"`]+"), "<tmp>/<dir>"),
    ]


def version_patterns() -> list[tuple[re.Pattern[str], str]]:
    """(pattern, placeholder) pairs for what follows from the installed libraries' versions: the
    versions a report prints, a planted model's folder name (`PlantedSpec.key()` hashes the torch,
    transformers and tokenizers versions) and hex digests (a tokenizer's sha256, a git revision).
    Outputs are stored with the placeholders, so a dependency release cannot make a stored output
    stale.
    """
    libraries = "culture_probe|torch|transformers|datasets|tokenizers|numpy|scipy|accelerate"
    archs = "|".join(re.escape(arch) for arch in sorted(PLANTABLE_ARCHS, key=len, reverse=True))
    return [
        (re.compile(rf"\b({libraries}) \d+\.\d+[\w.+-]*"), r"\1 <version>"),
        (re.compile(rf"\b({archs})-[0-9a-f]{{16}}\b"), r"\1-<key>"),
        (re.compile(r"\b[0-9a-f]{40}(?:[0-9a-f]{24})?\b"), "<digest>"),
    ]


def placeholder_patterns() -> list[tuple[re.Pattern[str], str]]:
    """Everything a stored output shows as a placeholder: paths of the machine, versions and what
    hashes them.
    """
    return [*path_patterns(), *version_patterns()]


def volatile_patterns() -> list[tuple[re.Pattern[str], str]]:
    """(pattern, replacement) pairs for text that differs between runs or machines but not with the
    library's results: the placeholders' text, durations, timestamps, memory addresses. The numbers
    the library computes are left alone.
    """
    return [
        *placeholder_patterns(),
        (
            re.compile(r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?"),
            "<timestamp>",
        ),
        (
            re.compile(r"\b(in|after|took) \d+(\.\d+)? ?(s|ms|seconds?|minutes?)\b"),
            r"\1 <duration>",
        ),
        (re.compile(r"\b0x[0-9a-fA-F]{6,}\b"), "0x<address>"),
        # a model's identity holds (weight file, size, modification time in ns)
        (
            re.compile(r"""(["'][^"']+\.(safetensors|bin|pt|pth)["'], \d+, )\d{16,}"""),
            r"\1<mtime_ns>",
        ),
    ]


def without_progress(text: str) -> str:
    """`text` as a terminal shows it: of a line rewritten with carriage returns (progress bars), the
    last state.
    """
    return "\n".join(line.rsplit("\r", 1)[-1] for line in text.split("\n"))


def merged(outputs: list[nbformat.NotebookNode]) -> list[nbformat.NotebookNode]:
    """`outputs` with consecutive chunks of one stream joined: how a stream is chunked depends on
    timing.
    """
    joined: list[nbformat.NotebookNode] = []
    for output in outputs:
        previous = joined[-1] if joined else None
        if (
            output.output_type == "stream"
            and previous
            and previous.output_type == "stream"
            and previous.name == output.name
        ):
            joined[-1] = nbformat.from_dict({**previous, "text": previous.text + output.text})
        else:
            joined.append(output)
    return joined


def stream_lines(output: nbformat.NotebookNode) -> list[str]:
    """A stream's lines as compared: progress bars at their last state, no installed package's
    warnings, no blank lines (`tokenizers`' trainers print blank lines in place of progress bars,
    sometimes in the same chunk as the next print).
    """
    text = THIRD_PARTY_WARNING.sub("", without_progress(output.text))
    return [line for line in text.splitlines() if line.strip()]


def output_lines(output: nbformat.NotebookNode) -> list[str]:
    """One output as comparable lines: streams and text data verbatim, images by their presence only
    (font rendering differs between machines).
    """
    if output.output_type == "stream":
        lines = stream_lines(output)
        return [f"[{output.name}]", *lines] if lines else []
    if output.output_type == "error":
        return [f"[error] {output.ename}: {output.evalue}"]
    lines = [f"[{output.output_type}]"]
    for mime, data in sorted(output.get("data", {}).items()):
        text = "<image>" if IMAGE.match(mime) else data if isinstance(data, str) else repr(data)
        lines += [f"  {mime}:", *text.splitlines()]
    return lines


def cell_lines(
    cell: nbformat.NotebookNode, patterns: list[tuple[re.Pattern[str], str]]
) -> list[str]:
    """A code cell's execution count and outputs as lines, volatile text normalised."""
    text = "\n".join(
        [
            f"[execution_count] {cell.execution_count}",
            *(line for output in merged(cell.outputs) for line in output_lines(output)),
        ]
    )
    for pattern, replacement in patterns:
        text = pattern.sub(replacement, text)
    return text.splitlines()


def mismatches(stored: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> list[str]:
    """One message (cell number and a short diff) per code cell whose stored outputs differ from the
    fresh ones.
    """
    patterns = volatile_patterns()
    messages = []
    for number, (old, new) in enumerate(zip(stored.cells, fresh.cells, strict=True)):
        if new.cell_type != "code":
            continue
        diff = list(
            difflib.unified_diff(
                cell_lines(old, patterns),
                cell_lines(new, patterns),
                "stored",
                "fresh",
                n=1,
                lineterm="",
            )
        )
        if diff:
            shown = [line[:200] for line in diff[:30]] + (["..."] if len(diff) > 30 else [])
            messages.append(f"cell {number} (In [{new.execution_count}]):\n" + "\n".join(shown))
    return messages


def error_outputs(notebook: nbformat.NotebookNode) -> list[nbformat.NotebookNode]:
    """Error outputs of any cell (a cell tagged raises-exception runs on after one)."""
    return [
        o
        for cell in notebook.cells
        for o in cell.get("outputs", [])
        if o.get("output_type") == "error"
    ]


def images(cell: nbformat.NotebookNode) -> list[str]:
    """The image data of a code cell's outputs, as stored (base64)."""
    return [
        data
        for output in cell.outputs
        for mime, data in output.get("data", {}).items()
        if IMAGE.match(mime)
    ]


def storable(stored: nbformat.NotebookNode, fresh: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`fresh` as committed, written so that re-running changes no byte when nothing changed: a code
    cell keeps its stored outputs while they match the fresh ones (same normalised text, same image
    bytes), since paths of temporary folders differ in every run; no timing or other run-specific
    metadata (the notebook's own metadata is kept, not the kernel's version details); an id on every
    cell.
    """
    patterns = volatile_patterns()
    fresh.metadata = stored.metadata
    for old, cell in zip(stored.cells, fresh.cells, strict=True):
        cell.metadata.pop("execution", None)
        cell.setdefault("id", old.get("id") or uuid.uuid4().hex[:8])
        if cell.cell_type != "code":
            continue
        # left out: the blank lines `tokenizers`' trainers print in place of their progress bars
        shown = [o for o in cell.outputs if o.output_type != "stream" or o.text.strip()]
        cell.outputs = [with_placeholders(o) for o in merged(shown)]
        if cell_lines(old, patterns) == cell_lines(cell, patterns) and images(old) == images(cell):
            cell.outputs = [with_placeholders(o) for o in merged(old.outputs)]
    return fresh


def text_fields(output: nbformat.NotebookNode) -> list[tuple[dict, str]]:
    """(holder, key) of every text an output shows: a stream's text, its text/* data (images are
    bytes).
    """
    if output.output_type == "stream":
        return [(output, "text")]
    return [(output["data"], mime) for mime in output.get("data", {}) if not IMAGE.match(mime)]


def with_placeholders(output: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """`output` with every path of this machine, library version and digest replaced by its
    placeholder (`<mirror>`, `<tmp>/<dir>`, `transformers <version>`, `bert-<key>`, ...).
    """
    for holder, key in text_fields(output):
        text = holder[key] if isinstance(holder[key], str) else "".join(holder[key])
        for pattern, placeholder in placeholder_patterns():
            text = pattern.sub(placeholder, text)
        holder[key] = text
    return output


def update(path: Path) -> bool:
    """Execute the notebook at `path` and store its outputs. Returns whether the file changed."""
    stored = nbformat.read(path, as_version=4)
    fresh = executed(path)
    if error_outputs(fresh):
        raise RuntimeError(f"notebooks/{path.name} has error outputs: fix it first")
    text = nbformat.writes(storable(stored, fresh)) + "\n"
    if text == path.read_text(encoding="utf-8"):
        return False
    path.write_text(text, encoding="utf-8")
    return True


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_imports_are_declared_dependencies(path: Path) -> None:
    # a notebook must not rely on a package that only happens to be installed (e.g. pulled in by
    # another one)
    declared, owners = declared_distributions(), packages_distributions()
    third_party = imported_modules(path) - set(sys.stdlib_module_names) - {"culture_probe"}
    undeclared = {
        module: owners.get(module)
        for module in third_party
        if not {normalised(d) for d in owners.get(module, [module])} & declared
    }
    assert not undeclared, (
        f"{path.name} imports {undeclared}: add them to setup.cfg (install_requires or test extras)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_stored_outputs_hold_no_path_version_or_digest(path: Path) -> None:
    stored = nbformat.read(path, as_version=4)
    for number, cell in enumerate(stored.cells):
        for output in cell.get("outputs", []):
            for holder, key in text_fields(output):
                text = holder[key] if isinstance(holder[key], str) else "".join(holder[key])
                named = [
                    pattern.pattern
                    for pattern, placeholder in placeholder_patterns()
                    if pattern.sub(placeholder, text) != text
                ]
                assert not named, (
                    f"notebooks/{path.name} cell {number} names a local path, a library version or a digest "
                    f"({named}); run `{REGENERATE}`"
                )


def report_output(
    monkeypatch: pytest.MonkeyPatch, transformers_version: str
) -> nbformat.NotebookNode:
    """A notebook cell showing a planted model's report header, as made with `transformers_version`
    installed: the model's folder is named by the real `PlantedSpec.key()`, which hashes the
    installed versions.
    """
    import transformers

    from culture_probe.models.planted import PlantedFact, PlantedSpec
    from culture_probe.record import RunRecord
    from culture_probe.report.markdown import header

    monkeypatch.setattr(transformers, "__version__", transformers_version)
    spec = PlantedSpec(
        facts=(PlantedFact("Cairo is in", "Africa"),), arch="bert", tokenizer="wordpiece"
    )
    folder = f"/tmp/{SCRATCH_PREFIX}x1/tmp/planted/{spec.arch}-{spec.key()[:16]}"
    tokenizer_sha = hashlib.sha256(
        f"tokenizer.json under {transformers_version}".encode()
    ).hexdigest()
    identity = {"name_or_path": folder, "tokenizer_sha256": tokenizer_sha}
    config = {
        "config": "dlama_arab_west",
        "benchmark": {"title": "DLAMA-v1", "version": "1.0.0", "rows": 8},
        "model": {"spec": folder, "kind": "masked", "identity": identity},
        "run": {},
        "versions": {
            "culture_probe": "0.1.0",
            "torch": "2.13.0+cpu",
            "transformers": transformers_version,
        },
    }
    cell = nbformat.v4.new_code_cell(execution_count=1)
    cell.outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/markdown": header(RunRecord.from_json(config))}
        )
    ]
    return cell


def test_a_transformers_release_cannot_make_a_stored_output_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # the header names the planted model's folder, its tokenizer digest and the versions: all change
    # with a release
    before, after = report_output(monkeypatch, "5.24.0"), report_output(monkeypatch, "5.99.1")
    assert before.outputs[0].data["text/markdown"] != after.outputs[0].data["text/markdown"]
    stored = nbformat.v4.new_notebook(cells=[before])
    assert not mismatches(stored, nbformat.v4.new_notebook(cells=[after]))
    text = nbformat.writes(storable(stored, nbformat.v4.new_notebook(cells=[after])))
    assert (
        "5.24.0" not in text
        and "5.99.1" not in text
        and "bert-<key>" in text
        and "<digest>" in text
    )


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_runs_and_its_stored_outputs_are_current(path: Path) -> None:
    stored = nbformat.read(path, as_version=4)
    fresh = executed(path)  # raises CellExecutionError naming the failing cell
    stale = mismatches(stored, fresh)
    assert not error_outputs(fresh)
    assert not stale, (
        f"notebooks/{path.name}: the stored outputs of {len(stale)} cell(s) differ from a fresh run "
        f"(regenerate them with `{REGENERATE}`):\n\n" + "\n\n".join(stale)
    )


def main() -> None:
    """`make notebooks`: re-execute the notebooks (all, or those named) and store their outputs."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument(
        "--update", action="store_true", required=True, help="write the outputs into the files"
    )
    parser.add_argument("names", nargs="*", help="notebook names (default: all)")
    names = {name.removesuffix(".ipynb") for name in parser.parse_args().names}
    if unknown := names - {path.stem for path in NOTEBOOKS}:
        parser.error(f"no such notebook in notebooks/: {', '.join(sorted(unknown))}")
    mirror = REPO.parent / "shared" / "mirror"  # as tests/conftest.py does
    if not os.environ.get("CULTURE_PROBE_MIRROR") and mirror.is_dir():
        os.environ["CULTURE_PROBE_MIRROR"] = str(mirror)
    for path in NOTEBOOKS:
        if not names or path.stem in names:
            print(f"notebooks/{path.name}:", "written" if update(path) else "unchanged", flush=True)


if __name__ == "__main__":
    main()
