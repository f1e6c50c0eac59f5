"""Models by name from the Hugging Face Hub (transdec.adapters.hub): the real ``huggingface_hub`` client against a
Hub served on 127.0.0.1 (tests/hub_server.py), with ``HF_ENDPOINT`` pointed at it and the cache in a temporary
``HF_HOME``. The client reads those variables when it is imported, as every Hub client does, so each run is a
fresh process, as a user's is.

The repositories: a NeMo fixture checkpoint (two revisions of different weights), an ONNX export of the bundled
``tiny-en-rnnt`` with int8 encoder and joiner beside the float ones (sherpa-onnx's layout), one holding only the int8
variant, private and gated copies, and one holding no model.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import transdec
from transdec.adapters.hub import HubSource, parse_hub_name
from transdec.adapters.hub_files import choose_files

from hub_server import READER, STRANGER, FakeHub, make_repo

ROOT = Path(__file__).resolve().parent.parent
NEMO = ROOT / "tests" / "fixtures" / "nemo"
EXAMPLES = [str(path) for path in sorted((ROOT / "examples").glob("*.flac"))]
NEMO_REPO, ONNX_REPO, INT8_REPO = "nvidia/parakeet-mini", "csukuangfj/sherpa-onnx-tiny-en-rnnt", \
    "k2-fsa/sherpa-onnx-tiny-en-rnnt-int8"
PRIVATE_REPO, GATED_REPO, MISSING_REPO, EMPTY_REPO = "org/private-parakeet", "nvidia/gated-parakeet", \
    "org/missing", "org/no-model"
#: The files of the export that the float and the int8 variant fetch.
FP32_FILES = ["decoder.onnx", "encoder.onnx", "joiner.onnx", "tokenizer.model", "tokens.txt"]
INT8_FILES = ["decoder.onnx", "encoder.int8.onnx", "joiner.int8.onnx", "tokenizer.model", "tokens.txt"]


@pytest.fixture(scope="module")
def export(tmp_path_factory) -> Path:
    """tiny-en-rnnt exported to ONNX, with the encoder and joiner also quantized to int8 beside the float files."""
    pytest.importorskip("onnxruntime")
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from transdec.export.onnx import export_onnx

    folder = tmp_path_factory.mktemp("export")
    export_onnx(transdec.load_model("tiny-en-rnnt"), folder)
    for part in ("encoder", "joiner"):
        quantize_dynamic(folder / f"{part}.onnx", folder / f"{part}.int8.onnx", weight_type=QuantType.QUInt8)
    return folder


@pytest.fixture(scope="module")
def repos(export) -> dict:
    """The repositories the Hub serves, by name."""
    nemo_main = (NEMO / "fc_stateless.nemo").read_bytes()
    nemo_v1 = (NEMO / "conformer4x.nemo").read_bytes()
    readme = {"README.md": b"# a model\n", ".gitattributes": b"*.nemo filter=lfs\n"}
    nemo = {**readme, "parakeet-mini.nemo": nemo_main}
    onnx = {path.name: path.read_bytes() for path in export.iterdir()}
    return {repo.repo_id: repo for repo in [
        make_repo(NEMO_REPO, {"main": nemo, "v1": {**readme, "parakeet-mini.nemo": nemo_v1}}),
        make_repo(ONNX_REPO, {"main": {**onnx, "README.md": b"sherpa-onnx\n",
                                       "test_wavs/0.flac": Path(EXAMPLES[0]).read_bytes()}}),
        make_repo(INT8_REPO, {"main": {name: data for name, data in onnx.items()
                                       if name not in ("encoder.onnx", "joiner.onnx")}}),
        make_repo(PRIVATE_REPO, {"main": nemo}, access="private"),
        make_repo(GATED_REPO, {"main": nemo}, access="gated"),
        make_repo(EMPTY_REPO, {"main": {**readme, "config.json": b"{}", "model.safetensors": b"\0" * 64}}),
    ]}


@pytest.fixture
def hub(repos):
    with FakeHub(list(repos.values())) as server:
        yield server


_EXPECTED: dict[tuple[str, str], list[list[int]]] = {}


def expected(path: Path, variant: str = "fp32") -> list[list[int]]:
    """The tokens of the examples from the local files, loaded by path."""
    key = (str(path), variant)
    if key not in _EXPECTED:
        model = transdec.load_model(path, onnx_variant=variant)
        _EXPECTED[key] = [t.tokens for t in model.transcribe(EXAMPLES)]
    return _EXPECTED[key]


#: Loads each ``[name, variant]`` of argv[2] (or only fetches it, without PyTorch, when argv[1] is "fetch") and
#: prints what came of each as JSON: the source and the examples' tokens, or the error (its message and classes).
CLIENT = r"""
import json, sys
from transdec.adapters.hub import HubError, fetch_model

results = []
for name, variant in json.loads(sys.argv[2]):
    try:
        if sys.argv[1] == "fetch":
            source = fetch_model(name, variant)
        else:
            import transdec

            model = transdec.load_model(name, onnx_variant=variant)
            source = model.hub_source
    except HubError as error:
        results.append({"error": str(error), "kinds": [kind.__name__ for kind in type(error).__mro__]})
        continue
    results.append({**source.as_dict(), "path": str(source.path)})
    if sys.argv[1] == "load":
        files = getattr(model.config, "files", None)
        results[-1]["loaded"] = sorted(path.name for path in files.values()) if files else None
        results[-1]["tokens"] = [t.tokens for t in model.transcribe(sys.argv[3:])]
print(json.dumps(results))
"""


def hub_env(url: str, home: Path, **variables: str) -> dict[str, str]:
    """This process's environment without the Hub settings it may have, pointed at ``url`` with its cache in
    ``home``, plus ``variables``."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGINGFACE_")) and k != "TRANSFORMERS_OFFLINE"}
    return {**env, "HF_ENDPOINT": url, "HF_HOME": str(home), "HF_HUB_DISABLE_TELEMETRY": "1", **variables}


def load(url: str, home: Path, *names: str | tuple[str, str], fetch_only: bool = False,
         **variables: str) -> list[dict]:
    """Each model ``name`` (or ``(name, variant)``) loaded by name in a fresh process, or only fetched, as
    :data:`CLIENT` reports."""
    pairs = [[name, "fp32"] if isinstance(name, str) else list(name) for name in names]
    result = subprocess.run([sys.executable, "-c", CLIENT, "fetch" if fetch_only else "load", json.dumps(pairs),
                             *EXAMPLES], capture_output=True, text=True, env=hub_env(url, home, **variables),
                            timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def transdec_cli(url: str, home: Path, *args: str, **variables: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "transdec", *args], capture_output=True, text=True,
                          env=hub_env(url, home, **variables), timeout=300)


def model_requests(hub: FakeHub) -> list[tuple[str, str, str | None]]:
    """The requests about repositories (the client also asks for a registry of its own, best-effort)."""
    return [r for r in hub.requests if r[1].startswith("/api/models/") or "/resolve/" in r[1]]


def assert_one_line(message: str, *parts: str) -> None:
    assert "\n" not in message.strip(), message
    for part in parts:
        assert part in message, (part, message)


# --- fetching and decoding ---------------------------------------------------------------------------------------


def test_a_nemo_checkpoint_by_name_decodes_as_the_local_file(hub, repos, tmp_path):
    [result] = load(hub.url, tmp_path, NEMO_REPO)
    main = repos[NEMO_REPO].revisions["main"]
    assert result["tokens"] == expected(NEMO / "fc_stateless.nemo")
    assert (result["repo"], result["revision"], result["commit"]) == (NEMO_REPO, "main", main.sha)
    assert result["files"] == ["parakeet-mini.nemo"]
    assert result["size"] == len(main.files["parakeet-mini.nemo"])
    snapshot = Path(result["path"]).parent
    assert snapshot.name == main.sha and str(snapshot).startswith(str(tmp_path / "hub"))
    assert sorted(p.name for p in snapshot.iterdir()) == ["parakeet-mini.nemo"]  # README and the rest stay behind


def test_a_cached_model_loads_with_the_server_stopped(repos, tmp_path):
    with FakeHub(list(repos.values())) as hub:
        [first] = load(hub.url, tmp_path, ONNX_REPO)
    again, never_fetched = load(hub.url, tmp_path, ONNX_REPO, NEMO_REPO)  # connection refused
    assert again == first
    assert_one_line(never_fetched["error"], NEMO_REPO, f"cannot reach the Hugging Face Hub at {hub.url}",
                    "HF_HUB_OFFLINE=1", "local path")
    assert {"HubUnreachable", "ValueError", "ConnectionError"} <= set(never_fetched["kinds"])


def test_offline_mode_reads_only_the_cache(hub, tmp_path):
    [missing] = load(hub.url, tmp_path, ONNX_REPO, fetch_only=True, HF_HUB_OFFLINE="1")
    assert_one_line(missing["error"], ONNX_REPO, "HF_HUB_OFFLINE=1", "local path")
    assert "HubUnreachable" in missing["kinds"]
    assert model_requests(hub) == []
    [online] = load(hub.url, tmp_path, ONNX_REPO)
    asked = len(model_requests(hub))
    [offline] = load(hub.url, tmp_path, ONNX_REPO, HF_HUB_OFFLINE="1")
    assert offline == online
    assert len(model_requests(hub)) == asked


def test_a_file_another_client_fetched_is_used_and_then_loads_offline(hub, repos, tmp_path):
    """A checkpoint fetched alone (``hf download REPO FILE``) is not downloaded again, and the first online load
    keeps the commit's listing, which loading offline needs."""
    fetch = f"import huggingface_hub; huggingface_hub.hf_hub_download({NEMO_REPO!r}, 'parakeet-mini.nemo')"
    subprocess.run([sys.executable, "-c", fetch], check=True, capture_output=True, env=hub_env(hub.url, tmp_path))
    [online] = load(hub.url, tmp_path, NEMO_REPO, fetch_only=True)
    [offline] = load(hub.url, tmp_path, NEMO_REPO, fetch_only=True, HF_HUB_OFFLINE="1")
    assert offline == online and online["commit"] == repos[NEMO_REPO].revisions["main"].sha
    assert len(hub.downloads()) == 1


def test_revisions_are_pinned(hub, repos, tmp_path):
    revisions = repos[NEMO_REPO].revisions
    old, main, by_commit, nowhere = load(hub.url, tmp_path, f"{NEMO_REPO}@v1", NEMO_REPO,
                                         f"{NEMO_REPO}@{revisions['v1'].sha}", f"{NEMO_REPO}@v9")
    assert (old["revision"], old["commit"]) == ("v1", revisions["v1"].sha)
    assert old["tokens"] == expected(NEMO / "conformer4x.nemo")
    assert (main["revision"], main["commit"]) == ("main", revisions["main"].sha)
    assert main["tokens"] == expected(NEMO / "fc_stateless.nemo") != old["tokens"]
    assert by_commit["commit"] == revisions["v1"].sha and by_commit["tokens"] == old["tokens"]
    assert_one_line(nowhere["error"], f"{NEMO_REPO}@v9", "has no revision 'v9'")


def test_onnx_exports_fetch_the_variant_asked_for(hub, export, tmp_path):
    fp32, int8, only_int8 = load(hub.url, tmp_path, (ONNX_REPO, "fp32"), (ONNX_REPO, "int8"), (INT8_REPO, "fp32"))
    assert fp32["files"] == FP32_FILES and fp32["loaded"] == FP32_FILES[:3]  # no README, no test_wavs
    assert fp32["tokens"] == expected(export, "fp32")
    assert int8["files"] == INT8_FILES and int8["loaded"] == INT8_FILES[:3]
    assert int8["tokens"] == expected(export, "int8")
    assert int8["path"] == fp32["path"]  # one snapshot of the commit holds both; each load took its own files
    assert only_int8["files"] == INT8_FILES and only_int8["tokens"] == int8["tokens"]  # int8 where that is all


# --- failures: one line naming the model ---------------------------------------------------------------------------


@pytest.mark.parametrize("token", [None, STRANGER, READER, "hf_typo"])
def test_private_gated_and_missing_repositories(hub, tmp_path, token):
    """As the Hub answers them: without a token 401 for a missing or private repository and for a gated one's
    files; with a token 404 for those it may not see and 403 for a gated one it has no access to; an unknown token
    401."""
    variables = {"HF_TOKEN": token} if token else {}
    private, gated, missing = load(hub.url, tmp_path, PRIVATE_REPO, GATED_REPO, MISSING_REPO, fetch_only=True,
                                   **variables)
    if token == READER:
        assert private["files"] == gated["files"] == ["parakeet-mini.nemo"]
        assert_one_line(missing["error"], MISSING_REPO, "has no model repository", "(404)")
    elif token == STRANGER:
        for result, repo in [(private, PRIVATE_REPO), (missing, MISSING_REPO)]:
            assert_one_line(result["error"], repo, "not a local path", "has no model repository", "(404)")
            assert "HubNotFound" in result["kinds"]
        assert_one_line(gated["error"], GATED_REPO, "gated", "(403)", f"{hub.url}/{GATED_REPO}", "HF_TOKEN")
        assert "HubAccessDenied" in gated["kinds"]
    elif token is None:
        for result, repo in [(private, PRIVATE_REPO), (missing, MISSING_REPO)]:
            assert_one_line(result["error"], repo, "(401)", "HF_TOKEN", "hf auth login")
        assert_one_line(gated["error"], GATED_REPO, "gated (401)", f"{hub.url}/{GATED_REPO}", "HF_TOKEN",
                        "hf auth login")
    else:
        for result, repo in [(private, PRIVATE_REPO), (gated, GATED_REPO), (missing, MISSING_REPO)]:
            assert_one_line(result["error"], repo, "refused the token (401", "HF_TOKEN")


def test_a_repository_without_a_model_lists_what_it_holds(hub, tmp_path):
    [result] = load(hub.url, tmp_path, EMPTY_REPO, fetch_only=True)
    assert_one_line(result["error"], EMPTY_REPO, "holds no model transdec loads",
                    ".gitattributes, README.md, config.json, model.safetensors")
    assert "HubNoModel" in result["kinds"]
    assert hub.downloads() == []


def test_a_dropped_connection_is_resumed(hub, export, tmp_path):
    """The library asks for the rest of the file (Range) from the last piece it wrote (it writes 10 MiB pieces of
    a download, so the connection drops after 15 MB of the 19 MB encoder) and goes on."""
    hub.faults["encoder.onnx"] = [("drop", 15_000_000)]
    [result] = load(hub.url, tmp_path, ONNX_REPO)
    assert result["tokens"] == expected(export)
    ranges = [byte_range for path, byte_range in hub.downloads() if path.endswith("/encoder.onnx")]
    assert len(ranges) == 2 and ranges[0] is None
    assert ranges[1].startswith("bytes=") and 0 < int(ranges[1][6:-1]) <= 15_000_000


def test_an_interrupted_download_is_one_line_and_the_next_try_succeeds(hub, repos, tmp_path):
    hub.faults["parakeet-mini.nemo"] = [("reset", None)]  # not retried by the library: the try fails
    [failed] = load(hub.url, tmp_path, NEMO_REPO, fetch_only=True)
    assert_one_line(failed["error"], NEMO_REPO, "interrupted", "try again")
    assert {"HubDownloadInterrupted", "ConnectionError"} <= set(failed["kinds"])
    [retried] = load(hub.url, tmp_path, NEMO_REPO, fetch_only=True)
    assert Path(retried["path"]).read_bytes() == repos[NEMO_REPO].revisions["main"].files["parakeet-mini.nemo"]


# --- the command line ----------------------------------------------------------------------------------------------


def test_transcribe_and_inspect_by_name(hub, repos, export, tmp_path):
    commit = repos[ONNX_REPO].revisions["main"].sha
    run = transdec_cli(hub.url, tmp_path, "transcribe", EXAMPLES[0], "--model", f"{ONNX_REPO}@main",
                       "--onnx-variant", "int8", "--format", "jsonl")
    assert run.returncode == 0, run.stderr
    [record] = [json.loads(line) for line in run.stdout.splitlines()]
    assert record["hub"] == {"repo": ONNX_REPO, "revision": "main", "commit": commit, "files": INT8_FILES,
                             "size": sum(len(repos[ONNX_REPO].revisions["main"].files[f]) for f in INT8_FILES)}
    assert record["tokens"] == expected(export, "int8")[0]
    assert {"audio_filepath", "offset", "duration", "text", "tokens", "words"} <= set(record)

    inspected = transdec_cli(hub.url, tmp_path, "inspect", ONNX_REPO, "--onnx-variant", "int8", "--format", "json")
    assert inspected.returncode == 0, inspected.stderr
    report = json.loads(inspected.stdout)
    assert report["hub"] == record["hub"] and report["format"].startswith("ONNX export")
    assert sorted(Path(f).name for f in report["encoder"]["files"].values()) == INT8_FILES[:3]

    described = transdec_cli(hub.url, tmp_path, "inspect", NEMO_REPO)
    assert described.returncode == 0, described.stderr
    assert "format: NeMo checkpoint (.nemo)" in described.stdout
    for line in ["hub:", f"  repo: {NEMO_REPO}", "  revision: main",
                 f"  commit: {repos[NEMO_REPO].revisions['main'].sha}", "  files:", "    - parakeet-mini.nemo"]:
        assert line in described.stdout.splitlines()

    refused = transdec_cli(hub.url, tmp_path, "transcribe", EXAMPLES[0], "--model", MISSING_REPO)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"transdec transcribe: error: {MISSING_REPO}: ")
    assert_one_line(refused.stderr, "hf auth login")


# --- without a server ----------------------------------------------------------------------------------------------


def test_hub_names():
    assert parse_hub_name("nvidia/parakeet-tdt-0.6b-v3").repo_id == "nvidia/parakeet-tdt-0.6b-v3"
    assert parse_hub_name("org/name@v1.2").revision == "v1.2"
    assert parse_hub_name("org/name@refs/pr/3").revision == "refs/pr/3"
    for name in ["tiny-en-rnnt", "models/a.nemo", "out/model.pt", "./x", "../x", "/abs/dir", "a/b/c", "a/..b",
                 "org/name@", "org/name@a@b", "C:\\models\\x"]:
        assert parse_hub_name(name) is None, name


def test_a_local_path_wins_over_a_hub_name(tmp_path, monkeypatch, export):
    monkeypatch.chdir(tmp_path)
    shutil.copytree(export, tmp_path / "org" / "name")
    model = transdec.load_model("org/name")  # no Hub involved: the folder exists
    assert not hasattr(model, "hub_source")


def test_choosing_files_from_a_listing():
    onnx = {"README.md": 1, "encoder.onnx": 9, "encoder.int8.onnx": 3, "encoder.weights": 99, "decoder.onnx": 2,
            "joiner.onnx": 2, "joiner.int8.onnx": 1, "joiner_encoder_proj.onnx": 1, "tokens.txt": 1,
            "bpe.model": 1, "test_wavs/0.wav": 5}
    fp32 = choose_files(onnx, "x", "fp32")
    assert fp32.kind == "onnx" and fp32.load == ""
    assert fp32.files == ("bpe.model", "decoder.onnx", "encoder.onnx", "encoder.weights", "joiner.onnx",
                          "tokens.txt")
    assert choose_files(onnx, "x", "int8").files == ("bpe.model", "decoder.onnx", "encoder.int8.onnx",
                                                     "joiner.int8.onnx", "tokens.txt")
    nested = choose_files({f"exp/{k}": v for k, v in onnx.items()} | {"other/encoder.onnx": 1}, "x", "fp32")
    assert nested.load == "exp" and nested.files[0] == "exp/bpe.model"
    assert choose_files({"a/encoder.onnx": 1, "a/decoder.onnx": 1, "tokens.txt": 1}, "x") is None
    assert choose_files({"m.nemo": 5, **onnx}, "x").files == ("m.nemo",)  # a checkpoint wins
    assert choose_files({"x.nemo": 5, "x-small.nemo": 2}, "x").load == "x.nemo"  # the one named after the repo
    with pytest.raises(ValueError, match=r"several \.nemo checkpoints \(a\.nemo, b\.nemo\)"):
        choose_files({"a.nemo": 1, "b.nemo": 1}, "x")
    assert choose_files({"README.md": 1}, "x") is None
    streaming = {f"encoder-chunk-{n}.onnx": 1 for n in (16, 32)} | {"decoder.onnx": 1, "joiner.onnx": 1,
                                                                     "tokens.txt": 1}
    with pytest.raises(ValueError, match="encoder-chunk-16.onnx, encoder-chunk-32.onnx are streaming exports"):
        choose_files(streaming, "x")


def test_a_local_export_loads_the_variant_asked_for(export):
    loaded = transdec.load_model(export, onnx_variant="int8").config.files
    assert sorted(p.name for p in loaded.values()) == INT8_FILES[:3]
    assert sorted(p.name for p in transdec.load_model(export).config.files.values()) == FP32_FILES[:3]
    with pytest.raises(ValueError, match="onnx_variant must be one of fp32, int8"):
        transdec.load_model(export, onnx_variant="fp16")


def test_hub_source_describes_what_was_fetched():
    source = HubSource("org/name", "main", "a" * 40, ("m.nemo",), 12, Path("/cache/m.nemo"))
    assert source.as_dict() == {"repo": "org/name", "revision": "main", "commit": "a" * 40, "files": ["m.nemo"],
                                "size": 12}


def test_loading_a_bundled_model_does_without_huggingface_hub():
    code = "import sys, transdec; transdec.load_model('tiny-en-rnnt'); print('huggingface_hub' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"
