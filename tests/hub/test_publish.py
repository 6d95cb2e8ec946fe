"""`culture-probe push` and `push-metrics`: the real `huggingface_hub` client against a local fake
of the Hub's HTTP API (tests/hub/fake_hub.py); what lands there loads with `datasets.load_dataset`
and `evaluate.load`, and every refusal (licence, offline, no token, a refused token, an unreachable
Hub) is one line before anything is sent.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import evaluate
import huggingface_hub
import pytest
import yaml
from fake_hub import FakeHub, serve

import culture_probe
from culture_probe import cli
from culture_probe.data.registry import list_benchmarks, load_benchmark
from culture_probe.hub.publish import PublishError, allowed_configs, push, push_metrics

CURATION_FIXTURE = (
    Path(__file__).resolve().parents[1] / "curation" / "fixtures" / "wikidata_mini.ttl"
)
SMALL = ["camel_co_prompts", "fmlama_he_corrected"]


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHub:
    """The fake Hub as the client's endpoint, online, with its write token in the environment."""
    fake = FakeHub(tmp_path / "hub_server")
    server = serve(fake)
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", fake.url)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_TOKEN", fake.token)
    yield fake
    server.shutdown()


def front_matter(readme: Path) -> dict:
    return yaml.safe_load(readme.read_text(encoding="utf-8").split("---\n")[1])


def run_cli(capsys: pytest.CaptureFixture, *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_push_uploads_one_private_commit_that_loads_as_the_benchmark(
    mirror: Path, hub: FakeHub
) -> None:
    url = culture_probe.push_to_hub("org/culture_probe", configs=SMALL)
    assert url.startswith(f"{hub.url}/datasets/org/culture_probe/commit/")
    assert hub.repos["org/culture_probe"]["private"] is True  # private unless asked
    assert len(hub.commits) == 1
    folder = hub.folder("dataset", "org/culture_probe")
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
        "README.md",
        "camel_co_prompts/test-00000-of-00001.parquet",
        "fmlama_he_corrected/test-00000-of-00001.parquet",
    ]  # the export marker stays local
    for name in SMALL:  # what the Hub holds reads back as the benchmark itself
        pushed = datasets.load_dataset(str(folder), name)["test"]
        assert pushed.to_list() == load_benchmark(name)["test"].to_list()


def test_a_second_push_replaces_the_configs_it_no_longer_holds(mirror: Path, hub: FakeHub) -> None:
    push("org/culture_probe", configs=SMALL)
    push("org/culture_probe", configs=["camel_ag_prompts"], public=True)
    folder = hub.folder("dataset", "org/culture_probe")
    assert sorted(p.parent.name for p in folder.rglob("*.parquet")) == ["camel_ag_prompts"]
    assert ("deletedFile", "camel_co_prompts/test-00000-of-00001.parquet") in hub.commits[1][
        "operations"
    ]
    assert [c["config_name"] for c in front_matter(folder / "README.md")["configs"]] == [
        "camel_ag_prompts"
    ]
    # an existing repository keeps its visibility
    assert hub.repos["org/culture_probe"]["private"] is True


def test_the_visibility_reported_is_the_repositorys_and_on_request_data_never_goes_public(
    mirror: Path, hub: FakeHub, capsys
) -> None:
    push("org/open", configs=["camel_ag_prompts"], public=True)
    # asked private, is public
    code, out, _ = run_cli(capsys, "push", "org/open", "--configs", "camel_ag_prompts")
    assert code == 0 and out.startswith("uploaded dataset org/open (public)")
    maps = mirror / "manual" / "maps"
    if not maps.is_dir():
        pytest.skip("the mirror has no manual/maps copy")
    code, _, err = run_cli(
        capsys,
        "push",
        "org/open",
        "--configs",
        "maps_en",
        "--data-dir",
        f"maps={maps}",
        "--i-have-permission",
    )
    assert code == 2 and "org/open exists and is public" in err and "nothing was uploaded" in err
    assert len(hub.commits) == 2 and not list(hub.folder("dataset", "org/open").glob("maps_en/*"))


def test_dry_run_writes_the_folder_and_sends_nothing(
    mirror: Path, tmp_path: Path, capsys, monkeypatch
) -> None:
    # no token and offline (the test session's HF_HUB_OFFLINE=1)
    monkeypatch.delenv("HF_TOKEN", raising=False)
    code, out, _ = run_cli(
        capsys,
        "push",
        "org/culture_probe",
        "--configs",
        *SMALL,
        "--dry-run",
        "--out",
        str(tmp_path / "plan"),
    )
    assert code == 0
    assert out.startswith("would upload dataset org/culture_probe (private), 3 files")
    assert "camel_co_prompts/test-00000-of-00001.parquet" in out
    assert datasets.load_dataset(str(tmp_path / "plan"), "camel_co_prompts")["test"].num_rows == 250


@pytest.mark.parametrize(
    ("setup", "expected"),
    [
        ("offline", "HF_HUB_OFFLINE is set"),
        ("no token", "No Hugging Face token: run `hf auth login`"),
        ("refused token", "The token check failed (401): the token was refused"),
        ("unreachable", "Cannot reach the Hub at http://127.0.0.1:9"),
    ],
)
def test_push_failures_are_one_line(
    setup: str, expected: str, mirror: Path, hub: FakeHub, capsys, monkeypatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))  # no stored token either
    if setup == "offline":
        monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    elif setup == "no token":
        monkeypatch.delenv("HF_TOKEN")
    elif setup == "refused token":
        monkeypatch.setenv("HF_TOKEN", "hf_wrong")
    else:
        # the discard port
        monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    code, _, err = run_cli(capsys, "push", "org/culture_probe", "--configs", "camel_ag_prompts")
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("culture-probe: error: ") and expected in err, (
        err
    )
    assert not hub.commits


def test_on_request_data_is_refused_without_the_users_copy_and_permission(
    mirror: Path, tmp_path: Path, capsys
) -> None:
    maps = mirror / "manual" / "maps"
    for extra in ([], ["--data-dir", f"maps={maps}"], ["--i-have-permission"]):
        code, _, err = run_cli(
            capsys,
            "push",
            "org/x",
            "--configs",
            "maps_en",
            *extra,
            "--dry-run",
            "--out",
            str(tmp_path / "plan"),
        )
        assert (
            code == 2
            and "maps_en: MAPS: MulticultrAl Proverbs and Sayings is released only on request"
            in err
        )
        assert "https://github.com/UKPLab/maps" in err and "--i-have-permission" in err
        assert not (tmp_path / "plan").exists()
    every = {e.name for e in list_benchmarks()}
    on_request = {e.name for e in list_benchmarks() if e.benchmark == "maps"}
    assert set(allowed_configs(None, {}, False)) == every - on_request  # "all" leaves it out
    assert set(allowed_configs(None, {"maps": maps}, True)) == every
    if not maps.is_dir():
        pytest.skip("the mirror has no manual/maps copy")
    code, out, _ = run_cli(
        capsys,
        "push",
        "org/x",
        "--configs",
        "maps_en",
        "--data-dir",
        f"maps={maps}",
        "--i-have-permission",
        "--dry-run",
        "--out",
        str(tmp_path / "plan"),
    )
    assert code == 0 and "maps_en/test-00000-of-00001.parquet" in out
    card = (tmp_path / "plan" / "README.md").read_text(encoding="utf-8")
    assert "Released on request only" in card and "states they have the authors' permission" in card


def test_the_card_is_true_of_what_was_written(mirror: Path, tmp_path: Path) -> None:
    push(
        "org/x",
        configs=["camel_co_prompts", "camel_co_prompts_corrected", "xfakt_factual_recall"],
        dry_run_dir=tmp_path / "plan",
    )
    readme = tmp_path / "plan" / "README.md"
    header, card = front_matter(readme), readme.read_text(encoding="utf-8")
    assert header["license"] == "mit" or set(header["license"]) >= {"mit"}
    assert header["language"] == sorted(
        {"ar", *next(e for e in list_benchmarks() if e.name == "xfakt_factual_recall").languages}
    )
    # each source's licence, named
    assert "MIT (the CAMeL repository (prompts and entities))" in card
    assert "X (Twitter) terms" in card
    assert "| `camel_co_prompts` | ar | test 250 |" in card  # rows per split
    assert "What the corrected configs (`camel_co_prompts_corrected`) fix" in card
    assert "camel-dedupe** (739 rows)" in card
    assert "@inproceedings{naous-etal-2024-beer" in card and "Aggarwal" in card  # citations


def test_a_curated_pair_is_published_under_its_regions_with_its_curation(
    tmp_path: Path, capsys
) -> None:
    assert (
        cli.main(
            [
                "curate",
                "dlama",
                "--region",
                "maghreb=Q1028,Q262,Q948",
                "--sites",
                "ar,fr,en",
                "--languages",
                "ar,en",
                "--predicates",
                "P36",
                "--endpoint",
                str(CURATION_FIXTURE),
                "--out",
                str(tmp_path / "pair"),
            ]
        )
        == 0
    )
    capsys.readouterr()
    code, out, _ = run_cli(
        capsys,
        "push",
        "org/x",
        "--configs",
        "dlama_custom",
        "--data-dir",
        f"dlama={tmp_path / 'pair'}",
        "--dry-run",
        "--out",
        str(tmp_path / "plan"),
    )
    assert code == 0, out
    plan = tmp_path / "plan"
    assert sorted(p.name for p in (plan / "dlama_maghreb_west").iterdir()) == [
        "curation.json",
        "test-00000-of-00001.parquet",
    ]
    shipped = json.loads(
        (plan / "dlama_maghreb_west" / "curation.json").read_text(encoding="utf-8")
    )
    assert shipped == json.loads(
        (tmp_path / "pair" / "maghreb-west" / "curation.json").read_text(encoding="utf-8")
    )
    header, card = (
        front_matter(plan / "README.md"),
        (plan / "README.md").read_text(encoding="utf-8"),
    )
    assert header["language"] == ["ar", "en"]
    assert header["configs"][0]["config_name"] == "dlama_maghreb_west"
    assert "maghreb (MAGHREB) vs west (WESTERN_COUNTRIES)" in card
    assert "countries Q1028, Q262, Q948" in card and "wikidata_mini.ttl" in card
    rows = datasets.load_dataset(str(plan), "dlama_maghreb_west")["test"]
    assert (
        rows.to_list()
        == load_benchmark("dlama_custom", data_dir=tmp_path / "pair")["test"].to_list()
    )


def test_metric_spaces_load_with_evaluate(hub: FakeHub, tmp_path: Path, capsys) -> None:
    code, out, _ = run_cli(
        capsys,
        "push-metrics",
        "org",
        "--metrics",
        "cbs",
        "--dry-run",
        "--out",
        str(tmp_path / "spaces"),
    )
    assert code == 0 and out.startswith("would upload space org/cbs (private), 5 files")
    inputs = {
        "prompt_id": ["t1"] * 4,
        "culture": ["arab", "arab", "western", "western"],
        "score": [-1.0, -3.0, -2.0, -0.5],
        "entity_type": ["food"] * 4,
    }
    # what evaluate downloads
    from_space = evaluate.load(str(tmp_path / "spaces" / "cbs")).compute(**inputs)
    assert from_space == culture_probe.load_metric("cbs").compute(**inputs)
    uploads = push_metrics("org", metrics=["cbs", "xfakt"])
    assert [u.repo_id for u in uploads] == ["org/cbs", "org/xfakt"] and len(hub.commits) == 2
    assert hub.repos["org/cbs"]["request"]["sdk"] == "gradio" and hub.repos["org/cbs"]["private"]
    assert (hub.folder("space", "org/cbs") / "cbs.py").read_text() == (
        tmp_path / "spaces" / "cbs" / "cbs.py"
    ).read_text()
    with pytest.raises(PublishError, match="not a Hub repository id"):
        push_metrics("org/sub", metrics=["cbs"], dry_run_dir=tmp_path / "x")
