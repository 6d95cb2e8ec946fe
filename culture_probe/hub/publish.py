"""Publishing on the Hugging Face Hub: the benchmarks as one dataset repository (`culture-probe
push`), and the metric modules as Spaces that `evaluate.load("<owner>/<metric>")` reads
(`culture-probe push-metrics`).

Both build the folder first (the export, or one folder per metric), then upload it with
`huggingface_hub` in one commit per repository, private unless asked otherwise. Data released only
on request (MAPS) is never published unless the user passes their own copy and states they have the
authors' permission. `--dry-run --out DIR` writes the folder and prints what would be uploaded,
without token or network.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from culture_probe.data.export import EXPORT_MARKER, check_export_folder, export, parse_data_dirs
from culture_probe.data.registry import benchmark_modules, list_benchmarks
from culture_probe.errors import PublishError, UnknownNameError
from culture_probe.hub.metric_spaces import write_metric_space
from culture_probe.metrics import list_metrics
from culture_probe.sharing import check_publication_flags, check_upload
from culture_probe.util.typecheck import checked

# Remote files an upload replaces: rows and shipped files of configs no longer in the export go with
# it.
STALE_PATTERNS = ("*.parquet", "*/curation.json")


@dataclass(frozen=True)
class Upload:
    """One repository's upload: where to, how visible, the local folder and its files (path,
    bytes).
    """

    repo_id: str
    repo_type: str
    private: bool
    folder: Path
    files: tuple[tuple[str, int], ...]
    url: str | None = None  # the commit, once uploaded
    # files of the user's in a dry run's folder: left there, never uploaded
    kept: tuple[str, ...] = ()

    def check(self, token: str | None = None) -> None:
        """Refuse, naming the file, an upload holding a secret, a key or the home folder's path
        (`check_upload`).
        """
        names = [path for path, _ in self.files]
        check_upload(self.folder, names, to=f"the {self.repo_type} {self.repo_id}", tokens=[token])

    def describe(self) -> list[str]:
        """What `--dry-run` prints (and a real push, after the commit)."""
        visibility = "private" if self.private else "public"
        head = f"{self.repo_type} {self.repo_id} ({visibility}), {len(self.files)} files from {self.folder}"
        kept = (f"  {path}  kept: no export wrote it; not uploaded" for path in self.kept)
        return [head, *(f"  {path}  {size:,} bytes" for path, size in self.files), *kept]


def push(
    repo_id: str,
    *,
    configs: Sequence[str] | None = None,
    data_dirs: Mapping[str, str | os.PathLike] | None = None,
    public: bool = False,
    i_have_permission: bool = False,
    token: str | None = None,
    dry_run_dir: str | os.PathLike | None = None,
) -> Upload:
    """Export `configs` (default: every config that loads and may be redistributed) and upload them
    as the dataset repository `repo_id`, private unless `public`; `load_dataset(repo_id, config)`
    then reads each one.

    With `dry_run_dir` the export is written there and nothing is uploaded. Configs released only on
    request (MAPS) need `data_dirs` to name the user's own copy and `i_have_permission=True`.
    """
    check_repo_id(repo_id)
    data_dirs = dict(data_dirs or {})
    names = allowed_configs(configs, data_dirs, i_have_permission)
    api = None if dry_run_dir is not None else hub_api(token)
    with _folder(dry_run_dir) as folder:
        result = export(folder, configs=names, data_dirs=data_dirs, permission=i_have_permission)
        if not result.configs:
            raise PublishError(
                "Nothing to push: no config loaded ("
                + "; ".join(r for _, r in result.skipped)
                + ")."
            )
        upload = Upload(
            repo_id, "dataset", not public, folder, _files(folder, result.files), kept=result.kept
        )
        upload.check(token)  # a dry run too: it shows what a push would send
        if api is None:
            return upload
        message = f"culture_probe export: {', '.join(c.name for c in result.configs)}"
        on_request = [c.name for c in result.configs if on_request_info(c.benchmark) is not None]
        guard = (
            f"{repo_id} exists and is public, so pushing {', '.join(on_request)} (released only on request) "
            "would publish it: push to a private repository, or pass --public if the authors allow that"
            if on_request and not public
            else None
        )
        return _upload(api, upload, message, guard=guard, delete_patterns=list(STALE_PATTERNS))


def push_metrics(
    owner: str,
    *,
    metrics: Sequence[str] | None = None,
    public: bool = False,
    token: str | None = None,
    dry_run_dir: str | os.PathLike | None = None,
) -> list[Upload]:
    """Publish each metric module as the Space `owner/<metric>`, so that
    `evaluate.load("owner/<metric>")` loads it anywhere, without culture_probe
    (`write_metric_space`). With `dry_run_dir`: one folder per metric there, nothing uploaded.
    """
    names = list(dict.fromkeys(metrics or list_metrics()))
    for name in names:
        if name not in list_metrics():
            raise UnknownNameError("metric", name, list_metrics())
    check_repo_id(f"{owner}/{names[0]}")
    api = None if dry_run_dir is not None else hub_api(token)
    uploads = []
    with _folder(dry_run_dir) as root:
        for name in names:
            folder = write_metric_space(Path(root) / name, owner, name)
            upload = Upload(f"{owner}/{name}", "space", not public, folder, _files(folder))
            upload.check(token)
            uploads.append(
                upload if api is None else _upload(api, upload, f"culture_probe metric {name}")
            )
    return uploads


def allowed_configs(
    configs: Sequence[str] | None, data_dirs: Mapping[str, Any], permission: bool
) -> list[str]:
    """The configs to export: those named (refused when their data is on request and not permitted),
    or every config whose data may be redistributed (on-request benchmarks only when permitted).
    """
    entries = {e.name: e for e in list_benchmarks()}
    names = list(dict.fromkeys(configs)) if configs else list(entries)
    for name in names:
        if name not in entries:
            raise UnknownNameError(
                "benchmark config", name, entries, fix="See `culture-probe list`."
            )
    refused = [
        n
        for n in names
        if on_request_info(entries[n].benchmark) is not None
        and not (permission and data_dirs.get(entries[n].benchmark))
    ]
    if refused and configs:
        info = on_request_info(entries[refused[0]].benchmark)
        raise PublishError(
            f"{', '.join(refused)}: {info.title} is released only on request ({info.license}) and may not be "
            f"redistributed: ask at {info.on_request}. With the authors' permission, pass your copy with "
            f"--data-dir {info.name}=DIR and --i-have-permission (data_dirs=, i_have_permission=True)."
        )
    return [n for n in names if n not in refused]


def on_request_info(benchmark: str) -> Any:
    """The card of a benchmark whose data is released only on request, else None."""
    info = next(
        module.INFO for module in benchmark_modules().values() if module.INFO.name == benchmark
    )
    return info if info.on_request else None


def check_repo_id(repo_id: str) -> None:
    """`owner/name`, as the Hub requires, before anything is built."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError as error:
        raise PublishError(f"{repo_id!r} is not a Hub repository id: {error}") from None
    if repo_id.count("/") != 1:
        raise PublishError(
            f"{repo_id!r} is not a Hub repository id: write it as OWNER/NAME, e.g. my-org/culture_probe."
        )


def hub_api(token: str | None) -> Any:
    """The Hub client, after the checks that would otherwise fail deep in an upload: offline mode
    and no token.
    """
    from huggingface_hub import HfApi, constants, get_token

    if constants.HF_HUB_OFFLINE:
        raise PublishError(
            "Pushing needs the network, but HF_HUB_OFFLINE is set (the Makefile sets it): run with "
            "HF_HUB_OFFLINE=0, or pass --dry-run --out DIR to write the folder only."
        )
    token = token or get_token()
    if not token:
        raise PublishError(
            "No Hugging Face token: run `hf auth login`, or set HF_TOKEN to a token with write access "
            "(or pass --dry-run --out DIR to write the folder only)."
        )
    api = HfApi(token=token)
    with hub_errors(api, "The token check"):
        api.whoami()  # a refused token or an unreachable Hub fails here, before the export is built
    return api


@contextmanager
def hub_errors(api: Any, what: str) -> Iterator[None]:
    """The Hub's refusals and network failures as one line that says what to do."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    # the client's own HTTP library: its network failures are no OSError
    from huggingface_hub.utils import httpx

    try:
        yield
    except HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        hint = {
            401: "the token was refused: run `hf auth login` again, or set HF_TOKEN",
            403: "the token may not write there: use a write token, or an owner you belong to",
        }.get(status, "the Hub refused it")
        raise PublishError(f"{what} failed ({status}): {hint}.") from None
    except OfflineModeIsEnabled:
        raise PublishError(
            "Pushing needs the network, but HF_HUB_OFFLINE is set: run with HF_HUB_OFFLINE=0."
        ) from None
    except (httpx.TransportError, OSError) as error:  # connection refused, DNS, timeouts
        raise PublishError(
            f"Cannot reach the Hub at {api.endpoint} ({type(error).__name__}: {error}); check the "
            "network, or pass --dry-run --out DIR."
        ) from None


def _upload(
    api: Any, upload: Upload, message: str, *, guard: str | None = None, **options: Any
) -> Upload:
    """Create the repository if needed and upload the folder in one commit. An existing repository
    keeps its visibility, so the result says the one it has; `guard` (why a public repository must
    not get this upload) refuses before anything is sent to a public one.
    """
    with hub_errors(api, f"Push to {upload.repo_id}"):
        api.create_repo(
            upload.repo_id,
            repo_type=upload.repo_type,
            private=upload.private,
            exist_ok=True,
            **({"space_sdk": "gradio"} if upload.repo_type == "space" else {}),
        )
        private = bool(api.repo_info(upload.repo_id, repo_type=upload.repo_type).private)
        if guard and not private:
            raise PublishError(guard + "; nothing was uploaded.")
        commit = api.upload_folder(
            repo_id=upload.repo_id,
            repo_type=upload.repo_type,
            folder_path=upload.folder,
            commit_message=message,
            ignore_patterns=[EXPORT_MARKER],
            **options,
        )
    return replace(upload, private=private, url=str(getattr(commit, "commit_url", commit)))


def _files(folder: Path, names: Sequence[str] | None = None) -> tuple[tuple[str, int], ...]:
    """(path, bytes) of `names` in `folder` (default: every file there but the export marker)."""
    if names is None:
        names = [p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file()]
    return tuple(
        (name, (Path(folder) / name).stat().st_size)
        for name in sorted(names)
        if name != EXPORT_MARKER
    )


@contextmanager
def _folder(dry_run_dir: str | os.PathLike | None) -> Iterator[Path]:
    """The dry run's folder (kept), or a temporary one (removed after the upload)."""
    if dry_run_dir is not None:
        yield Path(dry_run_dir)
        return
    with tempfile.TemporaryDirectory(prefix="culture_probe_push_") as folder:
        yield Path(folder)


@checked()
def push_to_hub(
    repo_id: str,
    configs: Sequence[str] | None = None,
    token: str | None = None,
    *,
    public: bool = False,
    **options: Any,
) -> str:
    """Python form of `culture-probe push`: the commit URL (private repository unless
    `public=True`), or the folder written when `dry_run_dir=` is given.
    """
    upload = push(repo_id, configs=configs, token=token, public=public, **options)
    return upload.url if upload.url is not None else str(upload.folder)


def main(args: Any) -> int:
    """`culture-probe push REPO_ID` and `culture-probe push-metrics OWNER`: build, upload (or
    dry-run), print.
    """
    check_publication_flags(args.dry_run, args.out)
    if args.out and args.command == "push-metrics":
        folder = Path(args.out)
        if folder.exists() and any(folder.iterdir()):
            raise PublishError(f"--out {folder} is not empty; pass a new or empty folder.")
    elif args.out:
        check_export_folder(Path(args.out))
    if args.command == "push-metrics":
        uploads = push_metrics(
            args.owner, metrics=args.metrics, public=args.public, dry_run_dir=args.out
        )
    else:
        uploads = [
            push(
                args.repo_id,
                configs=args.configs,
                data_dirs=parse_data_dirs(args.data_dir),
                public=args.public,
                i_have_permission=args.i_have_permission,
                dry_run_dir=args.out,
            )
        ]
    for upload in uploads:
        print(
            ("would upload " if upload.url is None else "uploaded ") + "\n".join(upload.describe())
        )
        if upload.url:
            print(f"commit: {upload.url}")
    return 0
