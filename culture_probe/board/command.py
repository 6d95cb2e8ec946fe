"""`culture-probe board RUN_OR_SUITE... --out DIR` and `culture-probe push-board OWNER/NAME
RUN_OR_SUITE...`: the command-line glue of the board, and its publication as a static Hugging Face
Space.

A Space is private unless `--public`, with `push`'s checks (a Hub repository id, offline mode, a
token) from `culture_probe.hub.publish`. Records of data released only on request (MAPS) are left
out of a published board, its numbers kept, unless `--i-have-permission` says the authors allow
publishing them; a board built on disk keeps them.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from culture_probe.sharing import add_publication_flags, check_publication_flags

# the parsers are built at every start of the command line: the site's modules load on use
if TYPE_CHECKING:
    from culture_probe.board.site import Site

EXAMPLES = """examples:
  culture-probe board runs/mbert runs/xlmr runs/suite --out board
  culture-probe push-board my-org/culture-results runs/suite --dry-run --out space
"""
# the Space's front matter but its title, which a YAML library writes with them (a colon or newline
# adds no key)
SPACE_CARD = {
    "emoji": "🌍",
    "colorFrom": "indigo",
    "colorTo": "green",
    "sdk": "static",
    "app_file": "index.html",
    "pinned": False,
}
SPACE_README = """
# {title}

Results of culture_probe runs: a leaderboard across models, a page per run with its item records, and paired
comparisons of runs of one config. Built with `culture-probe board` from the run directories alone.
{withheld}"""


def add_board_parsers(subparsers: Any) -> None:
    """The `board` and `push-board` subcommands (for `culture_probe.cli.build_parser`)."""
    board = subparsers.add_parser(
        "board",
        help="a static results board of runs and suites (leaderboard, run pages, item browser, comparisons) that "
        "opens from disk with no server",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    board.add_argument(
        "paths", nargs="+", metavar="RUN_OR_SUITE_DIR", help="run directories and suite folders"
    )
    board.add_argument(
        "--out", required=True, help="the site's folder (new, empty, or an earlier board)"
    )
    board.add_argument("--title", default="culture_probe results", help="the board's title")

    push = subparsers.add_parser(
        "push-board",
        help="publish a results board as a static Hub Space (private unless --public); data released only on "
        "request (MAPS records) is left out unless --i-have-permission",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    push.add_argument("repo_id", metavar="OWNER/NAME", help="the Space to create or update")
    push.add_argument(
        "paths", nargs="+", metavar="RUN_OR_SUITE_DIR", help="run directories and suite folders"
    )
    push.add_argument("--title", default="culture_probe results", help="the board's title")
    push.add_argument(
        "--i-have-permission",
        action="store_true",
        help="publish the records of data released only on request (MAPS): you hold the authors' permission",
    )
    add_publication_flags(push, "a new Space", "the Space's folder")


def board_main(args: Any) -> int:
    """`culture-probe board`: write the site, say where and how large."""
    from culture_probe.board.site import build_board

    site = build_board(args.paths, args.out, title=args.title)
    print(site.describe())
    for file in site.kept:
        print(f"kept    {file}: no board wrote it, so it was left as it was")
    return 0


def push_board_main(args: Any) -> int:
    """`culture-probe push-board`: build the Space's folder and upload it (or only write it,
    `--dry-run`).
    """
    check_publication_flags(args.dry_run, args.out)
    upload = push_board(
        args.repo_id,
        args.paths,
        title=args.title,
        public=args.public,
        i_have_permission=args.i_have_permission,
        dry_run_dir=args.out,
    )
    print(("would upload " if upload.url is None else "uploaded ") + "\n".join(upload.describe()))
    if upload.url:
        print(f"commit: {upload.url}")
    return 0


def push_board(
    repo_id: str,
    paths: Sequence[str | os.PathLike],
    *,
    title: str = "culture_probe results",
    public: bool = False,
    i_have_permission: bool = False,
    token: str | None = None,
    dry_run_dir: str | os.PathLike | None = None,
) -> Any:
    """Build the board of `paths` with a Space README and upload it as the static Space `repo_id`
    (private unless `public`); with `dry_run_dir`, write it there and upload nothing. Returns the
    `publish.Upload`.
    """
    from culture_probe.board.site import build_board
    from culture_probe.hub.publish import Upload, check_repo_id, hub_api

    check_repo_id(repo_id)
    # offline or tokenless: refused before building
    api = None if dry_run_dir is not None else hub_api(token)
    withhold = {} if i_have_permission else on_request_benchmarks()
    with _folder(dry_run_dir) as folder:
        site = build_board(
            paths,
            folder,
            title=title,
            withhold=withhold,
            readme=lambda s: space_readme(title, s, withhold),
        )
        upload = Upload(repo_id, "space", not public, folder, files_of(folder, site.files))
        upload.check(token)  # a dry run too: it shows what a push would send
        if api is None:
            return upload
        return upload_space(api, upload, f"culture_probe board: {len(site.runs)} run(s)")


def on_request_benchmarks() -> dict[str, str]:
    """{benchmark: why its records are left out} for every benchmark whose data is released only on
    request.
    """
    from culture_probe.data.registry import benchmark_modules

    infos = {
        module.INFO.name: module.INFO
        for module in benchmark_modules().values()
        if module.INFO.on_request
    }
    return {
        name: (
            f"The records of {info.title} are left out: its data is released only on request ({info.license}; "
            f"{info.on_request}). With the authors' permission, push with --i-have-permission."
        )
        for name, info in infos.items()
    }


def space_readme(title: str, site: Site, withhold: dict[str, str]) -> str:
    """The Space's README: the front matter that makes it a static Space, and what it holds."""
    from culture_probe.sharing import front_matter

    note = "".join(f"\n{withhold[name]}\n" for name in site.withheld)
    heading = " ".join(title.split())  # one line, whatever the title holds
    return front_matter({"title": title, **SPACE_CARD}) + SPACE_README.format(
        title=heading, withheld=note
    )


def upload_space(api: Any, upload: Any, message: str) -> Any:
    """Create the static Space if needed (private unless asked otherwise; an existing one keeps its
    visibility) and upload the folder in one commit, replacing the files of an earlier board.
    """
    from dataclasses import replace

    from culture_probe.board.site import MARKER
    from culture_probe.hub.publish import hub_errors
    from culture_probe.util.outfolder import LOCK_FILE

    with hub_errors(api, f"Push to {upload.repo_id}"):
        api.create_repo(
            upload.repo_id,
            repo_type="space",
            space_sdk="static",
            private=upload.private,
            exist_ok=True,
        )
        private = bool(api.repo_info(upload.repo_id, repo_type="space").private)
        commit = api.upload_folder(
            repo_id=upload.repo_id,
            repo_type="space",
            folder_path=upload.folder,
            commit_message=message,
            ignore_patterns=[MARKER, LOCK_FILE],
            delete_patterns=["data/*", "figures/**"],
        )
    return replace(upload, private=private, url=str(getattr(commit, "commit_url", commit)))


def files_of(folder: Path, names: Sequence[str]) -> tuple[tuple[str, int], ...]:
    """(path, bytes) of the files the upload sends: `names`, what the board wrote (never a user's
    file beside it).
    """
    return tuple((name, (folder / name).stat().st_size) for name in names)


@contextmanager
def _folder(dry_run_dir: str | os.PathLike | None) -> Iterator[Path]:
    """The dry run's folder (kept; `build_board` rebuilds it), or a temporary one (removed after the
    upload).
    """
    if dry_run_dir is not None:
        yield Path(dry_run_dir)
        return
    with tempfile.TemporaryDirectory(prefix="culture_probe_board_") as folder:
        yield Path(folder) / "space"
