"""A metric as a Hub Space that `evaluate.load("<owner>/<metric>")` reads with no culture_probe
installed: the library's `evaluate` module with its culture_probe imports turned into one relative
import of a sibling file, and that file written now from the installed library's own source (each
needed definition and what it uses, in dependency order), so that no second copy is kept in the
repository. `requirements.txt` lists only what the two files import, with culture_probe's own
version ranges. Used by `culture-probe push-metrics` (`culture_probe.hub.publish`).
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from culture_probe.errors import PublishError
from culture_probe.metrics import MODULES_DIR
from culture_probe.sharing import front_matter

# the Space's sibling module holding the library code its metric runs
FORMULAS = "culture_probe_formulas"
# the installed package, whose source the formulas are copied from
LIBRARY = Path(__file__).resolve().parents[1]  # the culture_probe package


def write_metric_space(folder: Path, owner: str, name: str) -> Path:
    """A Space holding one metric as a self-contained `evaluate` module: `<name>.py` (the library's
    module with its culture_probe imports turned into one relative import),
    `culture_probe_formulas.py` (the definitions those names need, copied from the installed
    library's source now, so never a second copy to keep in step), a README with the module's
    docstring, `app.py` (evaluate's widget) and `requirements.txt` (only what an index serves: the
    packages the two files import, with culture_probe's own version ranges). `evaluate.load` fetches
    the sibling because the module imports it relatively (evaluate/loading.py `get_imports`).
    """
    module = _space_module(
        (MODULES_DIR / name / f"{name}.py").read_text(encoding="utf-8"), f"{owner}/{name}"
    )
    formulas = formulas_source(module.needed, used_by=f"{name}.py")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.py").write_text(module.text, encoding="utf-8")
    (folder / f"{FORMULAS}.py").write_text(formulas.text, encoding="utf-8")
    from culture_probe.version import __version__

    doc = ast.get_docstring(ast.parse(module.text)) or ""
    card = {
        "title": name,
        "sdk": "gradio",
        "app_file": "app.py",
        "pinned": False,
        "tags": ["evaluate", "metric"],
    }
    (folder / "README.md").write_text(
        front_matter(card) + f"\n# {name}\n\n{doc}\n\n"
        f'Load it with `evaluate.load("{owner}/{name}")`; it needs only the packages of '
        f"`requirements.txt`. The formula is culture_probe's, copied into `{FORMULAS}.py` from culture_probe "
        f"{__version__} when this Space was published.\n",
        encoding="utf-8",
    )
    (folder / "app.py").write_text(
        "import evaluate\nfrom evaluate.utils import launch_gradio_widget\n\n"
        f"launch_gradio_widget(evaluate.load({owner + '/' + name!r}))\n",
        encoding="utf-8",
    )
    packages = sorted({*module.packages, *formulas.packages})
    (folder / "requirements.txt").write_text(
        "".join(f"{requirement(p)}\n" for p in packages), encoding="utf-8"
    )
    return folder


@dataclass(frozen=True)
class Source:
    """Generated module text, the library names it needs (module, name) and the third-party packages
    it imports.
    """

    text: str
    needed: tuple[tuple[str, str], ...] = ()
    packages: tuple[str, ...] = ()


def _space_module(text: str, repo_id: str) -> Source:
    """The metric module as a Space runs it: its culture_probe imports become one `from
    .culture_probe_formulas import ...` line (where the first was), and its docstring example loads
    the Space instead of the library.
    """
    tree = ast.parse(text)
    imports = [
        n
        for n in tree.body
        if isinstance(n, ast.ImportFrom) and not n.level and _in_library(n.module or "")
    ]
    for node in tree.body:
        if node not in imports:
            _no_library_inside(node, repo_id)
    needed = tuple((node.module or "", alias.name) for node in imports for alias in node.names)
    names = ", ".join(
        alias.name + (f" as {alias.asname}" if alias.asname else "")
        for n in imports
        for alias in n.names
    )
    lines = text.splitlines(keepends=True)
    drop = {i for node in imports for i in range(node.lineno - 1, node.end_lineno or node.lineno)}
    first = min(drop, default=len(lines))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    kept.insert(first, f"from .{FORMULAS} import {names}\n")
    body = "".join(kept).replace(">>> import culture_probe", ">>> import evaluate")
    body = re.sub(
        r"culture_probe\.load_metric\((['\"])\w+\1\)", f'evaluate.load("{repo_id}")', body
    )
    return Source(body, needed, _packages(tree))


def _in_library(module: str) -> bool:
    return module == "culture_probe" or module.startswith("culture_probe.")


def formulas_source(needed: Sequence[tuple[str, str]], *, used_by: str) -> Source:
    """One module holding the library definitions that `needed` (module, name) use, transitively,
    copied from the library's source (dependencies first), with only the standard-library and
    third-party imports they use.
    """
    from culture_probe.version import __version__

    formulas = _Formulas(used_by)
    for module, name in needed:
        formulas.visit(module, name)
    modules = ", ".join(dict.fromkeys(module for module, _ in formulas.order))
    doc = textwrap.fill(
        f"What {used_by} needs of culture_probe {__version__} (Apache-2.0): {len(formulas.order)} definitions "
        f"copied from {modules} by `culture-probe push-metrics`. Change the library and publish again rather "
        "than this file.",
        width=116,
    )
    body = "\n\n\n".join(_library_module(module).segment(name) for module, name in formulas.order)
    text = (
        f'"""{doc}\n"""\n\nfrom __future__ import annotations\n\n{formulas.imports()}\n\n\n{body}\n'
    )
    return Source(
        text, (), _third_party({module.split(".")[0] for module, _, _ in formulas.bound.values()})
    )


Binding = tuple[str, str, str]  # an import: (module, name imported from it or "", alias or "")


@dataclass
class _Formulas:
    """What one Space's formulas module binds: each definition's library module, each imported
    name's import, and the definitions in an order where each follows what it uses. Two different
    things of one name are refused (a definition repeated word for word in two modules, e.g. a type
    alias, is copied once), and so is a definition that imports the library inside its body.
    """

    used_by: str
    defined: dict[str, str] = field(default_factory=dict)
    bound: dict[str, Binding] = field(default_factory=dict)
    order: list[tuple[str, str]] = field(default_factory=list)

    def visit(self, module: str, name: str) -> None:
        """Copy `module.name` and, first, every library definition it uses."""
        source = _library_module(module)
        if name in source.library:  # imported there: the definition lives in another library module
            target = source.library[name]
            if target[1] != name:
                raise PublishError(
                    f"{module} imports {target[1]} as {name}: import it under its own name to publish."
                )
            self.visit(*target)
            return
        if name not in source.definitions:
            raise PublishError(
                f"{self.used_by} imports {name} from {module}, which does not define it at its top."
            )
        # copied already, being copied (recursion), or another thing of that name
        if name in self.defined:
            copied = self.defined[name]
            if copied != module and _library_module(copied).segment(name) != source.segment(name):
                raise self._clash(name, f"{copied}.{name}", f"{module}.{name}")
            return
        if name in self.bound:
            raise self._clash(name, f"the import of {name}", f"{module}.{name}")
        self.defined[name] = module
        node = source.definitions[name]
        _no_library_inside(node, f"{module}.{name}")
        for used in dict.fromkeys(n.id for n in ast.walk(node) if isinstance(n, ast.Name)):
            if used in source.definitions or used in source.library:
                self.visit(module, used)
            elif used in source.external:
                if (
                    self.bound.setdefault(used, source.external[used]) != source.external[used]
                    or used in self.defined
                ):
                    raise self._clash(used, f"what {module} imports as {used}", "another")
        self.order.append((module, name))

    def _clash(self, name: str, first: str, second: str) -> PublishError:
        return PublishError(
            f"{self.used_by} needs two things named {name!r} ({first} and {second}): rename one in the library, so "
            "that the Space's formulas fit in one module."
        )

    def imports(self) -> str:
        """The import statements of the bound names: plain imports, then one `from` line per
        module.
        """
        plain = sorted(
            f"import {m}" + (f" as {a}" if a else "") for m, n, a in self.bound.values() if not n
        )
        names: dict[str, list[str]] = {}
        for module, name, alias in sorted(self.bound.values()):
            if name:
                names.setdefault(module, []).append(name + (f" as {alias}" if alias else ""))
        return "\n".join(
            [*plain, *(f"from {m} import {', '.join(n)}" for m, n in sorted(names.items()))]
        )


@dataclass(frozen=True)
class _LibraryModule:
    """A library module's top level: the statement that binds each name, the names it imports from
    the library (name -> (module, name there)) and the import of each name it imports from
    elsewhere.
    """

    lines: tuple[str, ...]
    definitions: dict[str, ast.stmt]
    library: dict[str, tuple[str, str]]
    external: dict[str, Binding]

    def segment(self, name: str) -> str:
        """The source lines of `name`'s statement, decorators included."""
        node = self.definitions[name]
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", ()))])
        return "".join(self.lines[first - 1 : node.end_lineno]).rstrip()


@cache
def _library_module(module: str) -> _LibraryModule:
    """The top level of the installed library module `module` (e.g.
    culture_probe.benchmarks.camel.metrics), from its file.
    """
    path = LIBRARY.joinpath(*module.split(".")[1:])
    file = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
    text = file.read_text(encoding="utf-8")
    definitions: dict[str, ast.stmt] = {}
    library: dict[str, tuple[str, str]] = {}
    external: dict[str, Binding] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            for alias in node.names:
                local = alias.asname or alias.name
                if _in_library(node.module or ""):
                    library[local] = (node.module or "", alias.name)
                else:
                    external[local] = (node.module or "", alias.name, alias.asname or "")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                external[alias.asname or alias.name.split(".")[0]] = (
                    alias.name,
                    "",
                    alias.asname or "",
                )
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            definitions[node.name] = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            definitions.update(
                {n.id: node for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            )
    return _LibraryModule(tuple(text.splitlines(keepends=True)), definitions, library, external)


def _no_library_inside(node: ast.stmt, where: str) -> None:
    """Refuse code that imports the library other than by a top-level `from culture_probe.X import
    name` (the Space has no culture_probe). Other imports inside a body are deferred on purpose (an
    optional package).
    """
    for inner in ast.walk(node):
        if (isinstance(inner, ast.Import) and any(_in_library(a.name) for a in inner.names)) or (
            isinstance(inner, ast.ImportFrom) and (inner.level or _in_library(inner.module or ""))
        ):
            raise PublishError(
                f"{where}, line {inner.lineno}: a Space has no culture_probe, so only top-level `from "
                "culture_probe.X import name` lines can be published (their definitions are copied)."
            )


def _packages(tree: ast.Module) -> tuple[str, ...]:
    """The third-party packages a module imports at its top level (the library and relative imports
    aside).
    """
    modules = [
        alias.name if isinstance(node, ast.Import) else node.module or ""
        for node in tree.body
        if isinstance(node, ast.Import) or (isinstance(node, ast.ImportFrom) and not node.level)
        for alias in node.names
    ]
    return _third_party({m.split(".")[0] for m in modules if not _in_library(m)})


def _third_party(modules: set[str]) -> tuple[str, ...]:
    return tuple(sorted(modules - set(sys.stdlib_module_names) - {"__future__"}))


def requirement(package: str) -> str:
    """The requirements.txt line of an imported package: culture_probe's own requirement of it (its
    version range); a package culture_probe does not require (an extra) cannot be installed by a
    Space and is refused.
    """
    from importlib.metadata import packages_distributions, requires

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    distributions = {canonicalize_name(d) for d in packages_distributions().get(package, [package])}
    for line in requires("culture_probe") or []:
        parsed = Requirement(line)
        if parsed.marker is None and canonicalize_name(parsed.name) in distributions:
            return str(parsed)
    raise PublishError(
        f"The Space would import {package}, which culture_probe does not install (an optional extra): keep it out "
        "of the metric's top-level code, or import it inside the function that needs it."
    )
