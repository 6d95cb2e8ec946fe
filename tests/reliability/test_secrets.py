"""Secrets never leave the machine: each is planted where a hostile or careless user would put it (a
password and a key in `--base-url`, a credential under any query key, the Hub token, an environment
secret, text shaped like a key, the home folder's path, a link in `plots/` to a file outside the
run, a `--title` that would add YAML keys), written as is or encoded (a compressed Parquet page, a
PNG's compressed text chunk, percent-encoding, base64, split over two lines), and nothing of it
reaches config.json, report.md, a board, or what `push`, `push-board` and `push-metrics` upload to
the local fake Hub.

The finished runs are the board tests' session fixture (tests/board/conftest.py); each test plants
into a copy.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import huggingface_hub
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from board_runs import Runs
from fake_hub import FakeHub, serve
from PIL import Image, PngImagePlugin

from culture_probe import rundir
from culture_probe.board.command import push_board
from culture_probe.board.site import build_board
from culture_probe.cli import main
from culture_probe.engine.served import ServedScorer
from culture_probe.errors import CultureProbeError, EndpointError, PublishError
from culture_probe.hub import publish
from culture_probe.hub.metric_spaces import write_metric_space
from culture_probe.record import RunRecord
from culture_probe.report import rerender_run
from culture_probe.runner import run
from culture_probe.sharing import check_upload, redact_url, redacted

TESTS = Path(__file__).resolve().parents[1]


def _board_fixtures():
    """tests/board/conftest.py under a name of its own (every test folder has a `conftest`)."""
    spec = importlib.util.spec_from_file_location("board_fixtures", TESTS / "board" / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


BOARD = _board_fixtures()
runs = BOARD.runs  # the board tests' finished runs, made once per session

PASSWORD, KEY = "hunter2pass", "k3yk3yk3y99"
BASE_URL = f"http://alice:{PASSWORD}@127.0.0.1:9/v1?api_key={KEY}&model=tiny"
SHOWN_URL = "http://***@127.0.0.1:9/v1?api_key=***&model=tiny"
HUB_TOKEN = "hf_" + "Q7xk" * 9  # the fake Hub's write token, shaped as a real one
# credentials under query keys that name no key, token or password (the red-team's four)
QUERY_SECRETS = {
    "passphrase": "open-sesame-77",
    "pass": "p4ss-x91",
    "pw": "pw-zz42",
    "jwt": "eyJ0.eyJ4.c2ln",
}
# a token shaped like the Hub's that is no secret of this machine
STRANGER_TOKEN = "hf_" + "Zm9v" * 9
ENV_SECRET = "s3cr3t/p@ss+word!"  # $MY_SERVICE_PASSWORD where the scan's encodings are planted
FRONT_KEYS = {"title", "emoji", "colorFrom", "colorTo", "sdk", "app_file", "pinned"}


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The fake Hub as the client's endpoint, online, its write token the user's (HF_TOKEN)."""
    fake = FakeHub(tmp_path / "hub_server", token=HUB_TOKEN)
    server = serve(fake)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", HUB_TOKEN)
    yield fake
    server.shutdown()


def received(runs: Runs, tmp_path: Path) -> Path:
    """A copy of a finished run, as a run folder received from someone else (links kept as
    links).
    """
    return Path(shutil.copytree(runs.knows, tmp_path / "received" / "knows", symlinks=True))


def edit_config(folder: Path, change) -> None:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    change(config)
    (folder / "config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8"
    )


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def served_run(runs: Runs, tmp_path: Path, base_url: str) -> Path:
    """A run of a served model at `base_url` (a stand-in that names itself so): its folder."""

    class Served(BOARD.Knowing):
        # what a served model names itself by
        identity = {"name_or_path": "openai:tiny", "base_url": base_url}

    out = tmp_path / "run"
    scorer = Served(BOARD.knowing().table)
    run(
        "dlama_arab_west",
        scorer,
        data_dir=str(runs.data),
        out=out,
        progress=False,
        limit=8,
        base_url=base_url,
    )
    return out


def test_a_password_and_a_key_in_the_base_url_are_recorded_and_shown_nowhere(
    runs: Runs, tmp_path: Path
) -> None:
    out = served_run(runs, tmp_path, BASE_URL)
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert (
        config["run"]["base_url"] == SHOWN_URL
        and config["model"]["identity"]["base_url"] == SHOWN_URL
    )
    report = (out / "report.md").read_text(encoding="utf-8")
    # Reproduce, identity
    assert f"--base-url '{SHOWN_URL}'" in report and f'"base_url": "{SHOWN_URL}"' in report
    board = build_board([out], tmp_path / "board")
    for folder in (out, board.folder):
        assert PASSWORD.encode() not in every_byte(folder) and KEY.encode() not in every_byte(
            folder
        )


def test_a_credential_under_any_query_key_is_recorded_and_shown_nowhere(
    runs: Runs, tmp_path: Path
) -> None:
    """A query value is blanked whatever its key is named (`?pw=`, `?jwt=`); only a harmless one is
    kept, and a run recorded with the values as given (before they were blanked) still resumes with
    the same server.
    """
    query = "&".join(f"{key}={value}" for key, value in QUERY_SECRETS.items())
    out = served_run(runs, tmp_path, f"http://127.0.0.1:9/v1?{query}&api-version=2024-02-01")
    shown = "http://127.0.0.1:9/v1?passphrase=***&pass=***&pw=***&jwt=***&api-version=2024-02-01"
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["run"]["base_url"] == config["model"]["identity"]["base_url"] == shown
    assert f"--base-url '{shown}'" in (out / "report.md").read_text(encoding="utf-8")
    board = build_board([out], tmp_path / "board")
    push_board("org/results", [out], dry_run_dir=tmp_path / "space")
    for folder in (out, board.folder, tmp_path / "space"):
        written = every_byte(folder)
        assert not [key for key, value in QUERY_SECRETS.items() if value.encode() in written]
    as_given = json.loads(json.dumps(config).replace(shown, shown.replace("***", "old")))
    assert (
        rundir.check_resumable(RunRecord.from_json(as_given), RunRecord.from_json(config), out)
        == ()
    )


def test_a_run_recorded_with_a_password_in_its_url_shows_it_nowhere(
    runs: Runs, tmp_path: Path
) -> None:
    older = received(runs, tmp_path)  # as a version before the redaction wrote it

    def plant(config: dict) -> None:
        config["run"]["base_url"] = config["model"]["identity"]["base_url"] = BASE_URL

    edit_config(older, plant)
    rerender_run(older)
    assert PASSWORD not in (older / "report.md").read_text(encoding="utf-8")
    upload = push_board("org/results", [older], dry_run_dir=tmp_path / "space")
    assert upload.files and PASSWORD.encode() not in every_byte(tmp_path / "space")


def test_a_served_model_sends_its_credentials_but_names_its_server_without_them(
    monkeypatch,
) -> None:
    api_key = "sk-" + "Zq9" * 10
    monkeypatch.setenv("OPENAI_API_KEY", api_key)
    served = ServedScorer("tiny", base_url=BASE_URL, retries=0, timeout=2)
    # used for the requests
    assert PASSWORD in str(served.client.base_url) and served.client.api_key == api_key
    assert served.identity["base_url"] == SHOWN_URL and api_key not in json.dumps(served.identity)
    with pytest.raises(EndpointError) as refused:  # nothing listens on the discard port
        served.generate(["x"], max_new_tokens=1)
    assert "http://***@127.0.0.1:9/v1" in str(refused.value)
    assert PASSWORD not in str(refused.value) and api_key not in str(refused.value)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),  # nothing to hide: as given
        ("https://tok@host/v1", "https://***@host/v1"),
        (
            "https://host/v1?token=a&X-Amz-Signature=b&Sig=c&model=m",
            "https://host/v1?token=***&X-Amz-Signature=***&Sig=***&model=m",
        ),
        (
            "https://host/v1?access_token=a&secret=b&password=c&apikey=d",
            "https://host/v1?access_token=***&secret=***&password=***&apikey=***",
        ),
        ("https://host/cb#access_token=a&state=s", "https://host/cb#access_token=***&state=***"),
        # any key's value, a bare piece and `;` pieces; the harmless keys kept, an anchor kept
        (
            "https://h/v1?passphrase=a&pass=b&pw=c&jwt=d&API_Version=1&model=m",
            "https://h/v1?passphrase=***&pass=***&pw=***&jwt=***&API_Version=1&model=m",
        ),
        ("https://h/v1?s3cr3t", "https://h/v1?***"),
        ("https://h/v1?model=m;pw=x&&limit=5", "https://h/v1?model=m;pw=***&&limit=5"),
        ("https://h/docs#readme", "https://h/docs#readme"),
    ],
)
def test_credentials_in_a_url_are_blanked_and_nothing_else(url: str, shown: str) -> None:
    assert redact_url(url) == shown and redact_url(shown) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("http://u:p'x@h/v1", "http://***@h/v1"),  # a quote, where a URL inside text stops
        ("http://u:p x@h/v1", "http://***@h/v1"),  # a space
        (
            "run --base-url 'http://u:p'\\''x@h/v1' --out x",
            "run --base-url 'http://***@h/v1' --out x",
        ),  # shell-quoted
        # no user in the URL
        ("see http://h/v1 and write to me@x.org", "see http://h/v1 and write to me@x.org"),
    ],
)
def test_a_password_with_a_quote_or_a_space_is_blanked_too(value: str, shown: str) -> None:
    assert redacted(value) == shown


def plant_secret(
    kind: str, folder: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, str]:
    """Put one secret of `kind` where the board shows it: the file that then holds it, how a refusal
    names it.
    """
    texts = {
        "hub-token": (HUB_TOKEN, "your Hugging Face token"),
        "env-secret": ("correct-horse-battery", "the value of $MY_SERVICE_PASSWORD"),
        "openai-key": ("sk-proj-" + "Ab3" * 10, "text shaped like an API key (sk-...)"),
        "aws-key": ("AKIAIOSFODNN7EXAMPLE", "text shaped like an AWS access key (AKIA...)"),
        "private-key": (
            "-----BEGIN OPENSSH PRIVATE KEY-----",
            "text shaped like a private key (-----BEGIN",
        ),
    }
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "correct-horse-battery")
    if kind == "png-text-chunk":  # a compressed caption: the board copies a figure as it is
        planted_png(folder / rundir.PLOTS_DIR / "zz_notes.png", STRANGER_TOKEN, "zTXt")
        return (
            "figures/received-knows/zz_notes.png",
            "text shaped like a Hugging Face token (hf_...) (in a PNG text chunk)",
        )
    if kind == "home-path":  # in an item's record (a run's paths on its page are shown from ~)
        items = folder / rundir.ITEMS_FILE
        first, rest = items.read_text(encoding="utf-8").split("\n", 1)
        record = {**json.loads(first), "note": f"see {home}/notes/secret.txt"}
        items.write_text(json.dumps(record, ensure_ascii=False) + "\n" + rest, encoding="utf-8")
        return "data/items-received-knows-0.js", f"the path of your home folder ({home})"

    def plant(config: dict) -> None:
        config["benchmark"]["title"] += " " + texts[kind][0]

    edit_config(folder, plant)
    return "data/run-received-knows.js", texts[kind][1]


@pytest.mark.parametrize(
    "kind",
    [
        "hub-token",
        "env-secret",
        "openai-key",
        "aws-key",
        "private-key",
        "home-path",
        "png-text-chunk",
    ],
)
def test_push_board_refuses_a_board_holding_a_secret_and_uploads_nothing(
    kind: str, runs: Runs, hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    folder = received(runs, tmp_path)
    name, what = plant_secret(kind, folder, home, monkeypatch)
    says = re.escape(f"{name} (to be uploaded to the space org/results) holds {what}")
    with pytest.raises(PublishError, match=says + ".*; nothing was uploaded"):
        push_board("org/results", [folder])
    assert not hub.commits and not hub.repos  # refused before the Space was created
    with pytest.raises(PublishError, match=says):  # a dry run shows what a push would do
        push_board("org/results", [folder], dry_run_dir=tmp_path / "space")


def test_the_refusal_is_one_line_and_never_shows_the_secret(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = received(runs, tmp_path)
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "correct-horse-battery")
    edit_config(folder, lambda config: config["benchmark"].update(title="correct-horse-battery"))
    argv = ["push-board", "org/results", str(folder), "--dry-run", "--out", str(tmp_path / "space")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "data/run-received-knows.js" in err
        and "$MY_SERVICE_PASSWORD" in err
    )
    assert "correct-horse-battery" not in err


def test_a_board_under_the_home_folder_names_no_path_of_it_and_can_be_pushed(
    runs: Runs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home" / "alice"
    monkeypatch.setenv("HOME", str(home))
    folder = Path(shutil.copytree(runs.knows, home / "runs" / "knows"))
    upload = push_board("org/results", [folder], dry_run_dir=tmp_path / "space")
    page = next((tmp_path / "space" / "data").glob("run-*.js")).read_text(encoding="utf-8")
    assert '"run":"knows"' in page and str(home) not in page and upload.files  # the run by its name


def test_a_link_out_of_a_run_folder_is_refused_by_name_and_nothing_leaves(
    runs: Runs, hub: FakeHub, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere" / "token"
    outside.parent.mkdir()
    outside.write_text(HUB_TOKEN, encoding="utf-8")  # as ~/.cache/huggingface/token holds it
    folder = received(runs, tmp_path)
    plots = folder / rundir.PLOTS_DIR
    # a link inside the run: the file
    (plots / "zz_inside.png").symlink_to(next(plots.glob("*.png")).name)
    board = build_board([folder], tmp_path / "board")
    copied = board.folder / "figures" / "received-knows" / "zz_inside.png"
    assert copied.is_file() and not copied.is_symlink()
    (plots / "zz_leak.png").symlink_to(Path("..", "..", "..", "elsewhere", "token"))
    says = r"plots/zz_leak\.png is a link to .*elsewhere/token, outside the folder"
    with pytest.raises(CultureProbeError, match=says):
        build_board([folder], tmp_path / "board2")
    with pytest.raises(CultureProbeError, match=says):
        push_board("org/results", [folder])
    assert not hub.commits and not hub.repos


def test_records_linked_from_outside_the_run_are_refused_by_name(
    runs: Runs, tmp_path: Path
) -> None:
    folder = received(runs, tmp_path)
    elsewhere = tmp_path / "elsewhere.jsonl"
    shutil.move(folder / rundir.ITEMS_FILE, elsewhere)
    (folder / rundir.ITEMS_FILE).symlink_to(elsewhere)
    with pytest.raises(
        CultureProbeError, match=r"items\.jsonl is a link to .*elsewhere\.jsonl, outside the folder"
    ):
        build_board([folder], tmp_path / "board")


@pytest.mark.parametrize(
    "title", ["Results: v2", "Results\nsdk: docker\napp_port: 7860", "---\nsdk: docker"]
)
def test_a_hostile_title_is_the_spaces_title_and_adds_no_key(
    runs: Runs, tmp_path: Path, title: str
) -> None:
    push_board("org/results", [runs.knows], title=title, dry_run_dir=tmp_path / "space")
    readme = (tmp_path / "space" / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(readme.split("\n---\n")[0].removeprefix("---\n"))
    assert set(front) == FRONT_KEYS and front["title"] == title and front["sdk"] == "static"
    assert "\n# " + " ".join(title.split()) + "\n" in readme  # the heading is one line


def test_a_metric_space_front_matter_is_written_by_yaml(tmp_path: Path) -> None:
    readme = (write_metric_space(tmp_path / "cbs", "org", "cbs") / "README.md").read_text(
        encoding="utf-8"
    )
    front = yaml.safe_load(readme.split("\n---\n")[0].removeprefix("---\n"))
    card = {
        "title": "cbs",
        "sdk": "gradio",
        "app_file": "app.py",
        "pinned": False,
        "tags": ["evaluate", "metric"],
    }
    assert front == card


def test_push_metrics_refuses_a_space_holding_a_secret_and_uploads_nothing(
    hub: FakeHub, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", "correct-horse-battery")

    def planted(folder: Path, owner: str, name: str) -> Path:
        written = write_metric_space(folder, owner, name)
        (written / "notes.txt").write_text("correct-horse-battery", encoding="utf-8")
        return written

    monkeypatch.setattr(publish, "write_metric_space", planted)
    says = r"notes\.txt \(to be uploaded to the space org/cbs\) holds the value of \$MY_SERVICE_PASSWORD"
    with pytest.raises(PublishError, match=says):
        publish.push_metrics("org", metrics=["cbs"])
    assert not hub.commits and not hub.repos


def test_push_refuses_an_export_holding_a_secret_and_uploads_nothing(
    mirror: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = publish.export

    def planted(folder, **options):
        result = real(folder, **options)
        with (Path(folder) / "README.md").open("a", encoding="utf-8") as card:
            card.write(f"\nContact: token {HUB_TOKEN}\n")
        return result

    monkeypatch.setattr(publish, "export", planted)
    says = r"README\.md \(to be uploaded to the dataset org/bench\) holds your Hugging Face token"
    with pytest.raises(PublishError, match=says):
        publish.push("org/bench", configs=["camel_co_prompts"])
    assert not hub.commits and not hub.repos


def test_binary_files_are_read_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home" / "alice"))
    png = (
        b"\x89PNG\r\n\x1a\n\x00\x00tEXtComment\x00"
        + str(tmp_path).encode()
        + b"/home/alice/plots\x00\xff"
    )
    (tmp_path / "figure.png").write_bytes(png)
    with pytest.raises(PublishError, match="figure.png .* holds the path of your home folder"):
        check_upload(tmp_path, ["figure.png"], to="the space org/x")
    (tmp_path / "figure.png").write_bytes(
        b"\x89PNG\x00" + str(tmp_path).encode() + b"/home/alicea\x00"
    )
    # another user's folder is no home path
    check_upload(tmp_path, ["figure.png"], to="the space org/x")


def planted_png(path: Path, text: str, chunk: str) -> None:
    """A figure whose compressed text chunk (`zTXt`, or an `iTXt` with its compression flag) holds
    `text`.
    """
    info = PngImagePlugin.PngInfo()
    if chunk == "zTXt":
        info.add_text("Comment", text, zip=True)
    else:
        info.add_itxt("Comment", text, lang="en", zip=True)
    Image.new("RGB", (4, 4)).save(path, pnginfo=info)


def planted_parquet(path: Path, text: str) -> None:
    """A Parquet file whose pages (gzip, no statistics) hold `text` in one of many rows."""
    rows = [f"the capital of country {i} is city {i}" for i in range(200)] + [text]
    pq.write_table(pa.table({"text": rows}), path, compression="gzip", write_statistics=False)


def plant_encoded(kind: str, folder: Path) -> tuple[str, str]:
    """Write a file that holds $MY_SERVICE_PASSWORD (ENV_SECRET) or a token, encoded as `kind`: its
    name, and how a refusal names what it holds.
    """
    secret, shaped = (
        "the value of $MY_SERVICE_PASSWORD",
        "text shaped like a Hugging Face token (hf_...)",
    )
    if kind == "parquet-page":
        planted_parquet(folder / "data.parquet", f"contact: {ENV_SECRET}")
        return "data.parquet", f"{secret} (in its Parquet data)"
    if kind == "parquet-unreadable":
        (folder / "data.parquet").write_bytes(b"PAR1" + b"\0" * 40 + b"PAR1")
        return "data.parquet", "data that cannot be read to check it"
    if kind in ("png-zTXt", "png-iTXt"):
        planted_png(folder / "figure.png", f"made with {STRANGER_TOKEN}", kind[4:])
        return "figure.png", f"{shaped} (in a PNG text chunk)"
    half = len(STRANGER_TOKEN) // 2  # neither half is shaped like a token
    texts = {
        "url-encoded": (
            f"https://example.org/?q={quote(ENV_SECRET, safe='')}",
            f"{secret} (URL-encoded)",
        ),
        "split-line": (
            f"token: {STRANGER_TOKEN[:half]}\n{STRANGER_TOKEN[half:]}\n",
            f"{shaped} (split across lines)",
        ),
        "split-quoted": (
            f'token = "{STRANGER_TOKEN[:half]}" \\\n    "{STRANGER_TOKEN[half:]}"\n',
            f"{shaped} (split across lines)",
        ),
        "base64-token": (
            base64.b64encode(f"Authorization: Bearer {STRANGER_TOKEN}".encode()).decode(),
            f"{shaped} (base64-encoded)",
        ),
        # the secret at each of the 3 alignments of base64's groups of 3 bytes
        **{
            f"base64-secret-{pad}": (
                "v=" + base64.urlsafe_b64encode(("x" * pad + ENV_SECRET).encode()).decode(),
                f"{secret} (base64-encoded)",
            )
            for pad in range(3)
        },
    }
    text, what = texts[kind]
    (folder / "notes.txt").write_text(text, encoding="utf-8")
    return "notes.txt", what


@pytest.mark.parametrize(
    "kind",
    [
        "parquet-page",
        "parquet-unreadable",
        "png-zTXt",
        "png-iTXt",
        "url-encoded",
        "split-line",
        "split-quoted",
        "base64-token",
        "base64-secret-0",
        "base64-secret-1",
        "base64-secret-2",
    ],
)
def test_the_scan_reads_a_secret_however_it_is_encoded(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a file holds once decoded is read: a compressed Parquet page or PNG text chunk,
    percent-encoding, base64, a token split over two lines; none holds its secret as plain bytes.
    """
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    name, what = plant_encoded(kind, tmp_path)
    written = (tmp_path / name).read_bytes()
    assert ENV_SECRET.encode() not in written and STRANGER_TOKEN.encode() not in written
    says = (
        re.escape(f"{name} (to be uploaded to the space org/x) holds {what}")
        + ".*nothing was uploaded"
    )
    with pytest.raises(PublishError, match=says):
        check_upload(tmp_path, [name], to="the space org/x")


def test_ordinary_encoded_files_pass_the_scan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Decoding finds no secret where there is none: data, figures, digests, base64 of binary data,
    URLs.
    """
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    planted_parquet(tmp_path / "data.parquet", "a row like the others")
    planted_png(tmp_path / "figure.png", "Matplotlib version 3.9, https://matplotlib.org/", "zTXt")
    notes = [
        "see https://example.org/?q=caf%C3%A9&model=x",
        "sha256:" + "0123456789abcdef" * 4,
        base64.b64encode(bytes(range(256))).decode(),
        "a sentence that goes on\n  over two lines",
    ]
    (tmp_path / "notes.txt").write_text("\n".join(notes), encoding="utf-8")
    check_upload(tmp_path, ["data.parquet", "figure.png", "notes.txt"], to="the space org/x")


def test_push_refuses_an_export_with_a_secret_in_a_compressed_parquet_page(
    mirror: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_PASSWORD", ENV_SECRET)
    real = publish.export
    shard = "camel_co_prompts/test-00000-of-00001.parquet"

    def planted(folder, **options):
        result = real(folder, **options)
        table = pq.read_table(Path(folder) / shard)
        column = next(i for i, kind in enumerate(table.schema.types) if pa.types.is_string(kind))
        values = table.column(column).to_pylist()
        values[0] = f"{values[0]} {ENV_SECRET}"
        table = table.set_column(column, table.schema.field(column), pa.array(values))
        pq.write_table(table, Path(folder) / shard, compression="gzip", write_statistics=False)
        assert ENV_SECRET.encode() not in (Path(folder) / shard).read_bytes()
        return result

    monkeypatch.setattr(publish, "export", planted)
    says = re.escape(
        f"{shard} (to be uploaded to the dataset org/bench) holds the value of $MY_SERVICE_PASSWORD "
        "(in its Parquet data)"
    )
    with pytest.raises(PublishError, match=says):
        publish.push("org/bench", configs=["camel_co_prompts"])
    assert not hub.commits and not hub.repos


def test_a_run_recorded_with_its_credentials_resumes_and_a_refusal_shows_none(
    runs, tmp_path: Path
) -> None:
    """Runs made before credentials were blanked hold them as given: the resume compares the
    settings blanked, so the same server is the same setting, and a refusal shows the credential
    blanked.
    """
    record = json.loads((runs.knows / rundir.CONFIG_FILE).read_text(encoding="utf-8"))

    def served(url: str) -> RunRecord:
        return RunRecord.from_json(
            {**record, "model": {**record["model"], "identity": {"base_url": url}}}
        )

    old = served(f"http://user:{PASSWORD}@127.0.0.1:8000/v1")
    assert rundir.check_resumable(old, served("http://***@127.0.0.1:8000/v1"), tmp_path) == ()
    with pytest.raises(CultureProbeError, match=r"http://\*\*\*@127\.0\.0\.1:8000/v1") as refused:
        rundir.check_resumable(old, served("http://***@127.0.0.1:9000/v1"), tmp_path)
    assert PASSWORD not in str(refused.value)


def test_a_suite_entry_linking_to_another_run_is_refused_by_name(
    runs: Runs, tmp_path: Path
) -> None:
    """A suite received from someone else cannot make the board publish a run of this machine
    through a link.
    """
    suite = Path(shutil.copytree(runs.suite, tmp_path / "received-suite", symlinks=True))
    entry = next(p for p in sorted(suite.iterdir()) if (p / rundir.CONFIG_FILE).is_file())
    shutil.rmtree(entry)
    entry.symlink_to(runs.knows)
    with pytest.raises(
        CultureProbeError, match=rf"{entry.name} is a link to .*, outside the folder"
    ):
        build_board([suite], tmp_path / "board")
