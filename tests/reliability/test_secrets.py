"""Secrets never leave the machine: each is planted where a hostile or careless user would put it (a password and a
key in `--base-url`, the Hub token, an environment secret, text shaped like a key, the home folder's path, a link in
`plots/` to a file outside the run, a `--title` that would add YAML keys), and nothing of it reaches config.json,
report.md, a board, or what `push`, `push-board` and `push-metrics` upload to the local fake Hub.

The finished runs are the board tests' session fixture (tests/board/conftest.py); each test plants into a copy.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import sys
from pathlib import Path

import huggingface_hub
import pytest
import yaml

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS / "board"))
sys.path.insert(0, str(TESTS / "hub"))
from board_runs import Runs  # noqa: E402
from fake_hub import FakeHub, serve  # noqa: E402

from culture_probe import rundir  # noqa: E402
from culture_probe.board.command import push_board  # noqa: E402
from culture_probe.board.site import build_board  # noqa: E402
from culture_probe.cli import main  # noqa: E402
from culture_probe.engine.served import ServedScorer  # noqa: E402
from culture_probe.errors import CultureProbeError, EndpointError, PublishError  # noqa: E402
from culture_probe.hub import publish  # noqa: E402
from culture_probe.hub.metric_spaces import write_metric_space  # noqa: E402
from culture_probe.record import RunRecord  # noqa: E402
from culture_probe.report import rerender_run  # noqa: E402
from culture_probe.runner import run  # noqa: E402
from culture_probe.sharing import check_upload, redact_url, redacted  # noqa: E402


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
    """A copy of a finished run, as a run folder received from someone else (links kept as links)."""
    return Path(shutil.copytree(runs.knows, tmp_path / "received" / "knows", symlinks=True))


def edit_config(folder: Path, change) -> None:
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    change(config)
    (folder / "config.json").write_text(
        json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8"
    )


def every_byte(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_a_password_and_a_key_in_the_base_url_are_recorded_and_shown_nowhere(
    runs: Runs, tmp_path: Path
) -> None:
    class Served(BOARD.Knowing):
        # what a served model names itself by
        identity = {"name_or_path": "openai:tiny", "base_url": BASE_URL}

    out = tmp_path / "run"
    scorer = Served(BOARD.knowing().table)
    run(
        "dlama_arab_west",
        scorer,
        data_dir=str(runs.data),
        out=out,
        progress=False,
        limit=8,
        base_url=BASE_URL,
    )
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
        ("https://host/cb#access_token=a&state=s", "https://host/cb#access_token=***&state=s"),
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
    """Put one secret of `kind` where the board shows it: the file that then holds it, how a refusal names it."""
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
    "kind", ["hub-token", "env-secret", "openai-key", "aws-key", "private-key", "home-path"]
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


def test_a_run_recorded_with_its_credentials_resumes_and_a_refusal_shows_none(
    runs, tmp_path: Path
) -> None:
    """Runs made before credentials were blanked hold them as given: the resume compares the settings blanked, so
    the same server is the same setting, and a refusal shows the credential blanked."""
    record = json.loads((runs.knows / rundir.CONFIG_FILE).read_text(encoding="utf-8"))

    def served(url: str) -> RunRecord:
        return RunRecord.of({**record, "model": {**record["model"], "identity": {"base_url": url}}})

    old = served(f"http://user:{PASSWORD}@127.0.0.1:8000/v1")
    assert rundir.check_resumable(old, served("http://***@127.0.0.1:8000/v1"), tmp_path) == ()
    with pytest.raises(CultureProbeError, match=r"http://\*\*\*@127\.0\.0\.1:8000/v1") as refused:
        rundir.check_resumable(old, served("http://***@127.0.0.1:9000/v1"), tmp_path)
    assert PASSWORD not in str(refused.value)


def test_a_suite_entry_linking_to_another_run_is_refused_by_name(
    runs: Runs, tmp_path: Path
) -> None:
    """A suite received from someone else cannot make the board publish a run of this machine through a link."""
    suite = Path(shutil.copytree(runs.suite, tmp_path / "received-suite", symlinks=True))
    entry = next(p for p in sorted(suite.iterdir()) if (p / rundir.CONFIG_FILE).is_file())
    shutil.rmtree(entry)
    entry.symlink_to(runs.knows)
    with pytest.raises(
        CultureProbeError, match=rf"{entry.name} is a link to .*, outside the folder"
    ):
        build_board([suite], tmp_path / "board")
