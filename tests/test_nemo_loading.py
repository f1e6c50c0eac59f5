"""Loading ``.nemo`` archives: config interpolations, the command line, and clear errors for what is not supported
or not a NeMo model. Archives are derived from the fixtures of ``tests/fixtures/nemo/`` (see
``tests/test_nemo_fixtures.py``)."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

import transdec
from float32 import assert_float32_close
from helpers import NEMO_FIXTURES, repack
from transdec.adapters.nemo_features import slaney_mel_filterbank
from transdec.cli import main


@pytest.fixture(scope="module")
def clip() -> torch.Tensor:
    return torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"][0].float() / 32768.0


def encode(model, audio: torch.Tensor) -> torch.Tensor:
    with torch.inference_mode():
        return model.encode(audio[None], torch.tensor([len(audio)]))[0]


def test_interpolations_resolve_from_the_model_section_and_from_a_training_root(tmp_path: Path, clip) -> None:
    """NeMo configs written by hand or by older versions keep ``${...}`` references; both styles resolve."""
    def interpolate(config: dict) -> None:
        config["model_defaults"]["pred_hidden"] = config["decoder"]["prednet"]["pred_hidden"]
        config["decoder"]["prednet"]["pred_hidden"] = "${model_defaults.pred_hidden}"
        config["joint"]["jointnet"]["pred_hidden"] = "${model.model_defaults.pred_hidden}"
        config["encoder"]["feat_in"] = "${preprocessor.features}"
        config["train_ds"] = {"manifest_filepath": "${oc.env:SOME_UNSET_VARIABLE_FOR_TRANSDEC}"}

    path = repack("fc_tdt", tmp_path / "interpolated.nemo", interpolate)
    original = transdec.load_model(str(NEMO_FIXTURES / "fc_tdt.nemo"))
    loaded = transdec.load_model(str(path))
    assert torch.equal(encode(loaded, clip), encode(original, clip))


def test_mel_filterbank_matches_the_one_nemo_stores(tmp_path: Path, clip) -> None:
    """The filterbank computed from the config equals librosa's, which NeMo keeps in its weights; a checkpoint
    without it gives the same features."""
    checkpoint = tarfile.open(NEMO_FIXTURES / "fc_tdt.nemo").extractfile("./model_weights.ckpt").read()
    state = torch.load(io.BytesIO(checkpoint), weights_only=True)
    stored = state["preprocessor.featurizer.fb"][0]
    computed = slaney_mel_filterbank(16000, 512, 128)
    torch.testing.assert_close(computed, stored, atol=1e-7, rtol=1e-5)

    def drop_front_end(weights: dict) -> None:
        del weights["preprocessor.featurizer.fb"], weights["preprocessor.featurizer.window"]

    path = repack("fc_tdt", tmp_path / "no_fb.nemo", edit_weights=drop_front_end)
    original = transdec.load_model(str(NEMO_FIXTURES / "fc_tdt.nemo"))
    torch.testing.assert_close(encode(transdec.load_model(str(path)), clip), encode(original, clip),
                               atol=1e-4, rtol=0)


def test_transcribe_and_evaluate_commands_take_a_nemo_model(tmp_path: Path, clip, capsys) -> None:
    audio = tmp_path / "clip.wav"
    sf.write(audio, clip.numpy(), 16000, subtype="FLOAT")
    expected = torch.load(NEMO_FIXTURES / "fc_rnnt.outputs.pt", weights_only=True)
    model_path = str(NEMO_FIXTURES / "fc_rnnt.nemo")
    assert main(["transcribe", str(audio), "--model", model_path, "--format", "jsonl"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["tokens"] == expected["tokens"][0]
    manifest = tmp_path / "test.jsonl"
    manifest.write_text(json.dumps({"audio_filepath": str(audio), "duration": len(clip) / 16000,
                                    "text": expected["text"][0]}) + "\n")
    assert main(["evaluate", str(manifest), "--model", model_path, "--output-dir", str(tmp_path / "eval"),
                 "--normalizer", "none"]) == 0
    assert "| greedy_label | 1 | 0.00% | 0.00% |" in capsys.readouterr().out  # the reference is NeMo's transcript
    predictions = (tmp_path / "eval" / "predictions_greedy_label.jsonl").read_text().splitlines()
    assert json.loads(predictions[0])["pred_text"] == expected["text"][0]


@pytest.mark.parametrize("content, message", [
    (b"this is not an archive at all", "not a .nemo archive"),
    (b"", "not a .nemo archive"),
])
def test_non_tar_files_are_refused(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "broken.nemo"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=message):
        transdec.load_model(str(path))


def test_truncated_archive_is_refused(tmp_path: Path) -> None:
    data = (NEMO_FIXTURES / "fc_rnnt.nemo").read_bytes()
    path = tmp_path / "truncated.nemo"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="truncated|corrupt|cannot be loaded|not a .nemo"):
        transdec.load_model(str(path))


def test_archive_without_a_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "empty.nemo"
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("readme.txt")
        archive.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match="no model_config.yaml"):
        transdec.load_model(str(path))


def test_missing_file() -> None:
    with pytest.raises(FileNotFoundError):
        transdec.load_model("/nonexistent/model.nemo")


@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(target="nemo.collections.asr.models.ctc_bpe_models.EncDecCTCModelBPE"),
     "EncDecCTCModelBPE.*CTC-only"),
    (lambda c: c.update(target="nemo.collections.asr.models.EncDecMultiTaskModel"), "EncDecMultiTaskModel.*AED"),
    (lambda c: c.update(target="my.own.FancyModel"), "FancyModel.*not supported"),
    (lambda c: c["encoder"].update(subsampling="vggnet"), "encoder.subsampling='vggnet'"),
    (lambda c: c["encoder"].update(self_attention_model="abs_pos"), "encoder.self_attention_model"),
    (lambda c: c["encoder"].update(_target_="nemo.collections.asr.modules.SqueezeformerEncoder"), "encoder._target_"),
    (lambda c: c["encoder"].update(conv_norm_type="group_norm2"), "encoder.conv_norm_type"),
    (lambda c: c["tokenizer"].update(type="wpe"), "tokenizer.type='wpe'"),
    (lambda c: c.pop("tokenizer"), "no tokenizer section"),
    (lambda c: c["decoder"].update(_target_="some.OtherDecoder"), "decoder._target_"),
    (lambda c: c["joint"]["jointnet"].update(activation="gelu"), "joint.jointnet.activation='gelu'"),
    (lambda c: c["preprocessor"].update(_target_="nemo.collections.asr.modules.AudioToMFCCPreprocessor"),
     "preprocessor._target_"),
    (lambda c: c["encoder"].update(d_model=64), "weight .* has shape|do not fit"),
    (lambda c: c["joint"].update(num_extra_outputs=3), "joint.num_extra_outputs=3"),
])
def test_unsupported_configs_name_the_class_or_key(tmp_path: Path, edit, message: str) -> None:
    path = repack("fc_rnnt", tmp_path / "edited.nemo", edit)
    with pytest.raises(ValueError, match=message):
        transdec.load_model(str(path))


def test_invalid_yaml_and_weights_are_refused(tmp_path: Path) -> None:
    path = repack("fc_rnnt", tmp_path / "yaml.nemo", config_text="encoder: [unclosed\n")
    with pytest.raises(ValueError, match="model_config.yaml cannot be read"):
        transdec.load_model(str(path))

    def drop(state: dict) -> None:
        del state["joint.enc.weight"]

    path = repack("fc_rnnt", tmp_path / "weights.nemo", edit_weights=drop)
    with pytest.raises(ValueError, match="missing.*joint.encoder_projection.weight"):
        transdec.load_model(str(path))


def large_vocabulary_config(vocab_size: int) -> str:
    """A parakeet-v3-style TDT config text: the vocabulary listed twice (decoder and joint), interpolations beside."""
    vocabulary = "".join(f"  - '\u2581tok{i}'\n" for i in range(vocab_size))
    return (f"model_defaults:\n  pred_hidden: 640\ndecoder:\n  vocab_size: {vocab_size}\n  prednet:\n"
            f"    pred_hidden: ${{model_defaults.pred_hidden}}\n  vocabulary:\n{vocabulary}"
            f"joint:\n  num_classes: ${{model.decoder.vocab_size}}\n  vocabulary:\n{vocabulary}"
            "loss:\n  loss_name: tdt\n  tdt_kwargs:\n    durations: [0, 1, 2, 3, 4]\n")


@pytest.mark.parametrize("vocab_size", [8192, 16384])
def test_configs_of_large_vocabularies_parse(vocab_size: int) -> None:
    # OmegaConf 2.4's YAML reader refuses documents of over 10,000 nodes, and OmegaConf takes seconds per 10,000
    # list entries: transdec reads the YAML itself and keeps the long lists out of OmegaConf.
    from transdec.adapters.nemo import head_spec
    from transdec.adapters.nemo_archive import parse_config

    config = parse_config(large_vocabulary_config(vocab_size))
    assert config["decoder"]["vocabulary"] == config["joint"]["vocabulary"] == [f"\u2581tok{i}" for i in range(vocab_size)]
    assert config["decoder"]["prednet"]["pred_hidden"] == 640 and config["joint"]["num_classes"] == vocab_size
    assert head_spec(config, vocab_size).durations == (0, 1, 2, 3, 4)


def test_a_checkpoint_with_a_large_vocabulary_list_loads(tmp_path: Path, clip) -> None:
    labels = [f"tok{i}" for i in range(8192)]

    def add_labels(config: dict) -> None:
        config["labels"] = labels
        config["decoder"]["vocabulary"] = labels
        config["joint"]["vocabulary"] = labels

    path = repack("fc_tdt", tmp_path / "labels.nemo", add_labels)
    model = transdec.load_model(str(path))
    torch.testing.assert_close(encode(model, clip),
                               encode(transdec.load_model(str(NEMO_FIXTURES / "fc_tdt.nemo")), clip), rtol=0, atol=0)


@pytest.mark.parametrize("text, message", [
    # "billion laughs": 9 levels of 10 aliases each, 10**9 nodes expanded from 100
    ("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)), "refused as an alias bomb"),
    ("a: &a [1, *a]\n", "contains itself"),
])
def test_yaml_alias_bombs_are_refused_quickly(tmp_path: Path, text: str, message: str) -> None:
    path = repack("fc_rnnt", tmp_path / "bomb.nemo", config_text=text)
    with pytest.raises(ValueError, match=f"model_config.yaml cannot be read: .*{message}"):
        transdec.load_model(str(path))


@pytest.fixture(scope="module")
def long_clip() -> torch.Tensor:
    """33 s: the four fixture clips four times over."""
    samples = torch.load(NEMO_FIXTURES / "clips.pt", weights_only=True)["samples"]
    return torch.cat([s.float() / 32768.0 for s in samples] * 4)


@pytest.mark.parametrize("name, normalize", [("fc_local_attn", "per_feature"), ("fc_local_attn_asym", "all_features"),
                                             ("fc_multiblank", "NA")])
def test_long_recordings_in_windows_equal_whole_with_a_bounded_receptive_field(name: str, normalize: str,
                                                                                tmp_path: Path, long_clip) -> None:
    # Local or limited-context attention: windows with the receptive field as context see all a kept frame depends
    # on, and features normalised per recording get the whole recording's statistics.
    from transdec.long_audio import ChunkingConfig, encode_long

    def normalised(config: dict) -> None:
        config["preprocessor"]["normalize"] = normalize

    model = transdec.load_model(str(repack(name, tmp_path / "normalised.nemo", normalised)))
    assert model.encoder.receptive_field is not None
    whole, frames = model.encode(long_clip[None], torch.tensor([len(long_clip)]))
    windowed, windowed_frames = encode_long(model, long_clip, ChunkingConfig(chunk_seconds=2.0))
    assert windowed_frames.tolist() == frames.tolist()
    assert_float32_close(windowed[0], whole[0, : int(frames)])


@pytest.mark.parametrize("name", ["fc_rnnt", "conformer4x"])
def test_long_recordings_through_full_attention_are_windowed_with_a_warning(name: str, long_clip) -> None:
    from transdec.long_audio import ChunkingConfig, WindowedEncodingWarning, encode_long

    model = transdec.load_model(str(NEMO_FIXTURES / f"{name}.nemo"))
    assert model.encoder.receptive_field is None
    whole, frames = model.encode(long_clip[None], torch.tensor([len(long_clip)]))
    with pytest.warns(WindowedEncodingWarning, match="attends over its whole input"):
        windowed, windowed_frames = encode_long(model, long_clip, ChunkingConfig(chunk_seconds=4.0))
    assert windowed_frames.tolist() == frames.tolist()  # as many frames, each from a window around it
    with pytest.warns(WindowedEncodingWarning):
        transcript = model.transcribe([long_clip.numpy()], chunking=ChunkingConfig(chunk_seconds=4.0))[0]
    assert transcript.duration == pytest.approx(len(long_clip) / 16000)


def test_importing_transdec_does_not_import_the_adapter_or_omegaconf() -> None:
    import subprocess
    import sys

    code = ("import sys, transdec; "
            "print(any(m.startswith(('omegaconf', 'transdec.adapters.nemo')) for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_float64_and_empty_audio(clip) -> None:
    model = transdec.load_model(str(NEMO_FIXTURES / "fc_rnnt.nemo"), dtype=torch.float64)
    encoded, lengths = model.encode(clip[None].double(), torch.tensor([len(clip)]))
    assert encoded.dtype == torch.float64
    empty, lengths = model.encode(torch.zeros(1, 0), torch.tensor([0]))
    assert lengths.tolist() == [0]
    float32_model = transdec.load_model(str(NEMO_FIXTURES / "fc_rnnt.nemo"))
    assert float32_model.transcribe([np.zeros(0, dtype=np.float32)])[0].text == ""


def test_local_attention_switch(clip) -> None:
    """``use_local_attention`` with a window covering the recording gives the full-attention frames."""
    model = transdec.load_model(str(NEMO_FIXTURES / "fc_rnnt.nemo"))
    full = encode(model, clip)
    model.use_local_attention(64, 64)
    torch.testing.assert_close(encode(model, clip), full, atol=1e-5, rtol=0)
    model.use_local_attention(4, 4)
    assert not torch.allclose(encode(model, clip), full, atol=1e-3)


def test_head_from_the_decoding_section_when_the_loss_section_is_missing(tmp_path: Path, clip) -> None:
    path = repack("fc_tdt", tmp_path / "no_loss.nemo", lambda c: c.pop("loss"))
    model = transdec.load_model(str(path))
    assert model.head.kind == "tdt" and model.head.durations == (0, 1, 2, 3, 4)
    path = repack("fc_multiblank", tmp_path / "no_loss_mb.nemo", lambda c: c.pop("loss"))
    assert transdec.load_model(str(path)).head.big_blank_durations == (2, 4)


def test_full_attention_one_recording_at_a_time_gives_the_batch_values(clip, monkeypatch) -> None:
    """Long recordings' full attention runs per recording (for the CPU's caches): the same frames, to float64
    rounding, for a padded batch, as all recordings at once."""
    from transdec.adapters import nemo_encoder

    model = transdec.load_model(str(NEMO_FIXTURES / "fc_rnnt.nemo"), dtype=torch.float64)
    lengths = torch.tensor([len(clip), len(clip) * 2 // 3, len(clip) // 3])
    audio = torch.stack([torch.nn.functional.pad(clip[:n], (0, len(clip) - n)) for n in lengths.tolist()]).double()
    with torch.inference_mode():
        monkeypatch.setattr(nemo_encoder, "_PER_RECORDING_FRAMES", 10**9)
        together, counts = model.encode(audio, lengths)
        monkeypatch.setattr(nemo_encoder, "_PER_RECORDING_FRAMES", 1)
        one_by_one, same_counts = model.encode(audio, lengths)
    assert torch.equal(counts, same_counts)
    torch.testing.assert_close(one_by_one, together, rtol=1e-12, atol=1e-12)
