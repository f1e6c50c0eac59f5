"""Phrase boosting from the command line: phrase files and compiled trees, each manifest item's own phrases, bad
input, and the model kinds (bundled, a NeMo checkpoint, an ONNX export)."""

import json
from pathlib import Path

import pytest

import transdec
from helpers import cli
from onnx_helpers import exported
from transdec.biasing import Boost
from transdec.decoding import DecodingConfig

AXIOM = "examples/piper_allens_axiom.flac"
AXIOM_TEXT = "allen's axiom when all else fails read the instructions"
LOGIC = "examples/espeak_logic.flac"
LOGIC_TEXT = "logic is a systematic method of coming to the wrong conclusion with confidence"
NEMO = Path(__file__).parent / "fixtures" / "nemo" / "fc_rnnt.nemo"
BEAM = ("--decoding", "beam_alsd_pp", "--beam-size", "4")


@pytest.fixture
def phrases(tmp_path: Path) -> Path:
    path = tmp_path / "phrases.txt"
    path.write_text("# names\nallen's axiom\t1.0\nzorblax quintrel\n\n", encoding="utf-8")
    return path


def test_boosting_a_name_corrects_it_and_leaves_the_rest(capsys, phrases: Path) -> None:
    code, out, _ = cli(capsys, "transcribe", AXIOM, LOGIC, *BEAM)
    assert code == 0 and AXIOM_TEXT not in out  # the model alone misses the name
    code, out, _ = cli(capsys, "transcribe", AXIOM, LOGIC, *BEAM, "--boost-phrases", phrases, "--boost-weight", "3")
    assert code == 0
    assert out.splitlines() == [f"{AXIOM}\t{AXIOM_TEXT}", f"{LOGIC}\t{LOGIC_TEXT}"]


def test_a_compiled_tree_decodes_as_its_phrase_list(capsys, phrases: Path, tmp_path: Path) -> None:
    tree = tmp_path / "phrases.pt"
    code, out, _ = cli(capsys, "boost", "build", phrases, "--model", "tiny-en-rnnt", "-o", tree)
    assert code == 0 and "2 phrases" in out and tree.is_file()
    outputs = []
    for source in (phrases, tree):
        code, out, _ = cli(capsys, "transcribe", AXIOM, *BEAM, "--boost-phrases", source, "--boost-weight", "3",
                           "--format", "jsonl")
        assert code == 0
        outputs.append(out)
    assert outputs[0] == outputs[1]
    code, _, err = cli(capsys, "transcribe", AXIOM, "--boost-phrases", tree, "--boost-depth-scaling", "1")
    assert code == 2 and "transdec boost build" in err
    code, _, err = cli(capsys, "transcribe", AXIOM, "--model", NEMO, "--boost-phrases", tree)
    assert code == 2 and "tokens" in err and err.count("\n") == 1


def test_each_manifest_item_is_boosted_by_its_own_phrases(capsys, tmp_path: Path) -> None:
    root = Path.cwd()
    entries = [{"audio_filepath": str(root / AXIOM), "boost_phrases": ["allen's axiom"]},
               {"audio_filepath": str(root / LOGIC), "boost_phrases": [["systematic method", 2.0]]},
               {"audio_filepath": str(root / AXIOM), "boost_phrases": "not a list"},
               {"audio_filepath": str(root / AXIOM)}]
    manifest = tmp_path / "items.jsonl"
    manifest.write_text("".join(json.dumps(e) + "\n" for e in entries))
    code, out, err = cli(capsys, "transcribe", manifest, *BEAM, "--item-phrases", "--boost-weight", "3",
                         "--format", "manifest")
    assert code == 1 and "boost_phrases must be a list" in err and "items.jsonl:3" in err
    texts = [json.loads(line)["pred_text"] for line in out.splitlines()]
    assert texts[0] == AXIOM_TEXT and texts[1] == LOGIC_TEXT
    assert texts[2] != AXIOM_TEXT  # the item without phrases is not boosted by the others'
    # Without --item-phrases the field is kept in the output but not used.
    code, out, _ = cli(capsys, "transcribe", manifest, *BEAM, "--format", "manifest")
    assert code == 0 and json.loads(out.splitlines()[0])["pred_text"] != AXIOM_TEXT


def test_evaluate_labels_boosted_runs(capsys, phrases: Path, tmp_path: Path) -> None:
    manifest = tmp_path / "eval.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(Path.cwd() / AXIOM), "text": AXIOM_TEXT}) + "\n")
    code, out, _ = cli(capsys, "evaluate", manifest, "--decoding", "beam_alsd_pp", "--beam-size", "4",
                       "--boost-phrases", phrases, "--boost-weight", "3", "--normalizer", "none")
    assert code == 0 and "beam_alsd_pp+boost3" in out


def test_bad_boosting_input_is_one_line(capsys, tmp_path: Path) -> None:
    code, _, err = cli(capsys, "transcribe", AXIOM, "--boost-weight", "2")
    assert code == 2 and "without --boost-phrases" in err
    code, _, err = cli(capsys, "transcribe", AXIOM, "--boost-phrases", tmp_path / "missing.txt")
    assert code == 2 and "missing.txt: no such file" in err
    bad = tmp_path / "bad.txt"
    bad.write_text("fine phrase\nanother\tnot-a-number\n", encoding="utf-8")
    code, _, err = cli(capsys, "transcribe", AXIOM, "--boost-phrases", bad)
    assert code == 2 and "bad.txt:2" in err and err.count("\n") == 1
    code, _, err = cli(capsys, "boost", "build", bad, "--model", "tiny-en-rnnt", "-o", tmp_path / "tree.bin")
    assert code == 2 and ".pt" in err


@pytest.mark.parametrize("kind", ["nemo", "onnx"])
def test_other_model_kinds_boost_as_the_python_api_does(capsys, kind: str, phrases: Path, tmp_path_factory) -> None:
    if kind == "onnx":
        pytest.importorskip("onnxruntime")
        model_path = exported("tiny-en-rnnt", tmp_path_factory.mktemp("onnx"))
    else:
        model_path = NEMO
    code, out, _ = cli(capsys, "transcribe", AXIOM, "--model", model_path, *BEAM, "--boost-phrases", phrases,
                       "--boost-weight", "3")
    assert code == 0
    model = transdec.load_model(str(model_path))
    config = DecodingConfig("beam_alsd_pp", beam_size=4,
                            fusions=[Boost(["allen's axiom", "zorblax quintrel"], 3.0, tokenizer=model.tokenizer)])
    assert out.strip() == model.transcribe([AXIOM], config)[0].text
    if kind == "onnx":
        assert out.strip() == AXIOM_TEXT


def test_streams_are_boosted_too(capsys, phrases: Path) -> None:
    code, out, _ = cli(capsys, "stream", AXIOM, "--beam-size", "4", "--boost-phrases", phrases, "--boost-weight", "3",
                       "--no-endpoint", "--format", "jsonl")
    assert code == 0 and json.loads(out)["text"].startswith("allen's axiom when all else fails")
