"""Length policies of the encoder (``TransducerModel.length_policy``): padding to length buckets and running
without cuDNN change no encoder frame, no output length and no transcript. They matter on a GPU (cuDNN plans
every new shape, see ``LengthPolicy``), but the padding arithmetic is the same on a CPU, so it is checked here
on the bundled model, at lengths on both sides of a bucket edge."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import transdec
from transdec.audio import load_audio
from transdec.cli import main
from transdec.long_audio import ChunkingConfig, encode_long
from transdec.model.checkpoint import bundled_model_path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
MODEL = "tiny-en-rnnt"
SHIFT, WINDOW = 160, 400  # samples per feature frame shift and window: frames(n) = 1 + (n - 400) // 160


def samples_for(frames: int, extra: int = 0) -> int:
    """The fewest samples that give ``frames`` feature frames, plus ``extra`` (under one shift keeps the count)."""
    return (frames - 1) * SHIFT + WINDOW + extra


def speech_like(num_samples: int, seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """Voiced harmonics under a syllable-rate envelope plus a little noise: features with some structure."""
    generator = torch.Generator().manual_seed(seed)
    t = torch.arange(num_samples, dtype=torch.float64) / 16000
    phase = 2 * torch.pi * torch.cumsum(110 + 25 * torch.sin(2 * torch.pi * (0.5 + seed / 7) * t), 0) / 16000
    voice = sum(torch.sin(k * phase) / k for k in range(1, 9)) * torch.sin(2 * torch.pi * 3 * t) ** 2
    noise = torch.randn(num_samples, generator=generator, dtype=torch.float64)
    return (0.1 * voice + 0.003 * noise).to(dtype)


def batch_of(lengths: list[int], dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    waveforms = torch.zeros(len(lengths), max(lengths), dtype=dtype)
    for row, n in enumerate(lengths):
        waveforms[row, :n] = speech_like(n, seed=row, dtype=dtype)
    return waveforms, torch.tensor(lengths)


def load(dtype: torch.dtype = torch.float32):
    try:
        bundled_model_path(MODEL)
    except FileNotFoundError:
        pytest.skip(f"{MODEL} is not in this installation")
    return transdec.load_model(MODEL, dtype=dtype)


@pytest.fixture(scope="module")
def model64():
    return load(torch.float64)


@pytest.fixture(scope="module")
def model32():
    return load()


# Batches of feature-frame counts around the 1 s bucket edges (100 frames per bucket): one utterance just
# below, at and above an edge, and mixed batches whose longest row sets the bucket, with rows in every bucket.
FRAME_BATCHES = [[99], [100], [101], [199], [200], [201], [301, 300, 299, 101, 100, 99, 57, 1],
                 [250, 250, 13, 180]]


@pytest.mark.parametrize("frames", FRAME_BATCHES, ids=lambda f: "-".join(map(str, f)))
@pytest.mark.parametrize("policy", ["pad", "pad_no_cudnn"])
def test_padding_to_buckets_leaves_the_encoder_output_unchanged_float64(model64, frames, policy) -> None:
    lengths = [samples_for(f, extra=row * 37 % SHIFT) for row, f in enumerate(frames)]
    waveforms, lengths = batch_of(lengths, torch.float64)
    with torch.inference_mode():
        plain, plain_lengths = model64.encode(waveforms, lengths, length_policy="none")
        padded, padded_lengths = model64.encode(waveforms, lengths, length_policy=policy)
    assert padded.shape == plain.shape and plain.shape[1] == -(-max(frames) // 8)
    assert torch.equal(padded_lengths, plain_lengths)
    assert plain_lengths.tolist() == [-(-f // 8) for f in frames]
    torch.testing.assert_close(padded, plain, rtol=0, atol=1e-10)


def test_padding_features_directly_leaves_the_encoder_output_unchanged(model64) -> None:
    """``encode_features`` (the long-audio windows' way in) pads by itself, whatever the frame count."""
    features = torch.randn(3, 203, 80, dtype=torch.float64)
    lengths = torch.tensor([203, 100, 9])
    with torch.inference_mode():
        plain, plain_lengths = model64.encode_features(features, lengths, length_policy="none")
        for pad_seconds in (1.0, 0.5, 0.08):
            model64.pad_seconds = pad_seconds
            padded, padded_lengths = model64.encode_features(features, lengths, length_policy="pad")
            assert torch.equal(padded_lengths, plain_lengths) and padded.shape == plain.shape
            torch.testing.assert_close(padded, plain, rtol=0, atol=1e-10)
    model64.pad_seconds = 1.0


def test_padding_in_float32_is_within_rounding_and_waveform_default_lengths_work(model32) -> None:
    waveforms, lengths = batch_of([samples_for(101), samples_for(99, 5), 8000], torch.float32)
    with torch.inference_mode():
        plain, plain_lengths = model32.encode(waveforms, lengths)
        padded, padded_lengths = model32.encode(waveforms, lengths, length_policy="pad")
        whole, _ = model32.encode(waveforms[:1], length_policy="pad")  # lengths=None: every sample is real
    assert torch.equal(padded_lengths, plain_lengths)
    torch.testing.assert_close(padded, plain, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(whole, plain[:1], rtol=1e-5, atol=1e-5)


def test_transcripts_and_long_audio_windows_are_unchanged_under_every_policy(model32) -> None:
    clips = [load_audio(path, 16000) for path in sorted(EXAMPLES.glob("*.flac"))]
    recording = np.concatenate([clips[0], np.zeros(3000, np.float32), clips[1]])  # ~6.5 s, in 2 s windows below
    chunking = ChunkingConfig(chunk_seconds=2.0, context_seconds=1.0)
    results = {}
    with torch.inference_mode():
        for policy in ("none", "pad", "no_cudnn", "pad_no_cudnn"):
            model32.length_policy = policy
            transcripts = model32.transcribe(clips + [recording], chunking=chunking)
            windows, _ = encode_long(model32, torch.from_numpy(recording), chunking)
            results[policy] = [(t.text, t.tokens, [(w.start, w.end) for w in t.words]) for t in transcripts], windows
    model32.length_policy = None
    texts, windows = results["none"]
    for policy, (other_texts, other_windows) in results.items():
        assert other_texts == texts, policy
        torch.testing.assert_close(other_windows, windows, rtol=1e-5, atol=1e-5)


def test_default_policy_by_device_and_mode(model32) -> None:
    assert model32.default_length_policy("cpu") == "none"  # a CPU pays nothing for a new shape
    assert model32.default_length_policy("cuda") == transdec.model.transducer_model.DEFAULT_CUDA_LENGTH_POLICY
    model32.length_policy = "pad"
    try:
        assert model32.default_length_policy("cpu") == model32.default_length_policy("cuda:0") == "pad"
        model32.train()  # training pads its own batches: the model's setting is not applied there
        assert model32._length_policy(torch.zeros(1), None) == "none"
    finally:
        model32.eval()
        model32.length_policy = None
    with pytest.raises(ValueError, match="unknown length policy"):
        model32.encode(torch.zeros(1, 800), length_policy="bucket")


@pytest.mark.parametrize("policy,frames,cudnn", [("none", 101, True), ("pad", 200, True), ("no_cudnn", 101, False),
                                                 ("pad_no_cudnn", 200, False)])
def test_what_the_encoder_sees_under_each_policy(model32, policy, frames, cudnn) -> None:
    """The policies do what they say: the padded ones hand the encoder a whole bucket of frames, the others the
    batch's own; the no_cudnn ones run it with cuDNN switched off, and switch it back on afterwards."""
    seen = []
    hook = model32.encoder.register_forward_pre_hook(
        lambda module, inputs: seen.append((inputs[0].shape[1], torch.backends.cudnn.enabled)))
    try:
        with torch.inference_mode():
            model32.encode(torch.zeros(2, samples_for(101)), torch.tensor([samples_for(101), 900]),
                           length_policy=policy)
    finally:
        hook.remove()
    assert seen == [(frames, cudnn)]
    assert torch.backends.cudnn.enabled


def test_command_line_takes_a_length_policy(capsys) -> None:
    load()
    path = EXAMPLES / "piper_are_you_making_this_up.flac"
    assert main(["transcribe", str(path), "--length-policy", "pad"]) == 0
    padded = capsys.readouterr().out
    assert main(["transcribe", str(path)]) == 0
    assert capsys.readouterr().out == padded
