"""The full model, self-describing checkpoints, the registry, and the training loop (resume, averaging)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile
import torch

import transdec
from helpers import TEXTS, TRAINING_HEADS, tiny_config, write_corpus
from transdec.decoding import DecodingConfig, decode
from transdec.model.checkpoint import BUNDLED_MODELS, read_checkpoint, save_model
from transdec.model.joint import SimpleJoint
from transdec.protocol import DecodingModel, HeadSpec
from transdec.model.tokenizer import Tokenizer
from transdec.model.transducer_model import TransducerModel
from transdec.training.data import (bucketed_batches, collate, long_form_rows, padding_multiples,
                                   read_training_manifest, row_seconds)
from transdec.training.specaugment import SpecAugmentConfig, spec_augment
from transdec.training.trainer import (TrainConfig, Trainer, average_checkpoints, learning_rate,
                                      pruned_loss_weights, training_loss)


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    return Tokenizer.train(TEXTS * 3, 24)


@pytest.mark.parametrize("head", TRAINING_HEADS, ids=lambda h: h.kind)
def test_model_is_a_decoding_model_and_decodes_audio(head: HeadSpec, tokenizer: Tokenizer) -> None:
    torch.manual_seed(0)
    model = TransducerModel(tiny_config(head, "stateless" if head.kind == "multiblank" else "lstm"), tokenizer)
    assert isinstance(model, DecodingModel)
    model.eval()
    audio = torch.randn(2, 16000) * 0.1
    encoded, lengths = model.encode(audio, torch.tensor([16000, 9000]))
    assert lengths.tolist() == [13, 7]  # 98 and 54 feature frames, 8x subsampling, rounded up
    hyps = decode(model, encoded, lengths, DecodingConfig()).hypotheses()
    assert len(hyps) == 2
    assert model.frame_shift_seconds == pytest.approx(0.08)


def test_model_rejects_mismatched_tokenizer_and_sigma(tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match="tokenizer has 24 tokens"):
        TransducerModel(tiny_config(HeadSpec("rnnt", 30)), tokenizer)
    config = tiny_config(HeadSpec("rnnt", 24))
    config.sigma = 0.05
    with pytest.raises(ValueError, match="sigma"):
        TransducerModel(config, tokenizer)


@pytest.mark.parametrize("half", [False, True])
def test_checkpoint_round_trip(tmp_path: Path, tokenizer: Tokenizer, half: bool) -> None:
    torch.manual_seed(3)
    model = TransducerModel(tiny_config(TRAINING_HEADS[1]), tokenizer).eval()
    path = tmp_path / "model.pt"
    save_model(model, path, half=half, metadata={"note": "test"})
    loaded = transdec.load_model(path)
    assert loaded.config == model.config
    assert loaded.tokenizer.to_bytes() == tokenizer.to_bytes()
    assert loaded.metadata == {"note": "test"}
    assert not loaded.training
    for name, tensor in model.state_dict().items():
        expected = tensor.half().float() if half and tensor.is_floating_point() else tensor
        assert torch.equal(loaded.state_dict()[name], expected), name
    assert json.loads(json.dumps(read_checkpoint(path)["config"])) == model.config.to_dict()


def test_load_model_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no model file 'tiny-en-nothing'"):
        transdec.load_model("tiny-en-nothing")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt: not a transdec model file"):
        transdec.load_model(junk)
    other = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, other)
    with pytest.raises(ValueError, match="not a transdec model file"):
        transdec.load_model(other)


@pytest.mark.parametrize("name", BUNDLED_MODELS)
def test_bundled_models_load_and_fit_the_size_budget(name: str) -> None:
    from transdec.model.checkpoint import bundled_model_path

    try:
        path = bundled_model_path(name)
    except FileNotFoundError:
        pytest.skip(f"{name} is not trained yet")
    assert path.stat().st_size <= 15 * 1024 * 1024
    model = transdec.load_model(name)
    assert 2_000_000 <= model.num_parameters() <= 6_500_000


def test_bucketed_batches_cover_every_utterance_once_within_budget() -> None:
    rng = np.random.default_rng(0)
    durations = rng.uniform(0.5, 12.0, size=500).tolist()
    batches = bucketed_batches(durations, batch_seconds=60.0, seed=1, epoch=0)
    assert sorted(i for b in batches for i in b) == list(range(500))
    assert all(max(durations[i] for i in b) * len(b) <= 60.0 or len(b) == 1 for b in batches)
    assert batches == bucketed_batches(durations, 60.0, seed=1, epoch=0)
    assert batches != bucketed_batches(durations, 60.0, seed=1, epoch=1)


def test_padded_bucketing_gives_one_batch_size_per_padded_length() -> None:
    durations = np.random.default_rng(0).uniform(0.5, 12.0, size=2000).tolist()
    batches = bucketed_batches(durations, batch_seconds=60.0, seed=1, epoch=0, pad_seconds=1.0)
    assert sorted(i for b in batches for i in b) == list(range(2000))
    shapes = {(math.ceil(max(durations[i] for i in b)), len(b)) for b in batches}
    assert all(length * size <= 60.0 for length, size in shapes)
    # One size per padded length (60 // length), but for the epoch's last batch and batches of leftovers only.
    assert len([1 for length, size in shapes if size != 60 // length]) <= 3
    assert batches != bucketed_batches(durations, 60.0, seed=1, epoch=1, pad_seconds=1.0)


@pytest.mark.parametrize("prune_range", [0, 2])
def test_padding_a_batch_changes_neither_loss_nor_gradients(tmp_path: Path, prune_range: int) -> None:
    entries = read_training_manifest(write_corpus(tmp_path, 3))
    tokenizer = Tokenizer.train(TEXTS * 3, 24)
    token_ids = [tokenizer.encode(e.text) for e in entries]
    torch.manual_seed(0)
    model = TransducerModel(tiny_config(TRAINING_HEADS[0]), tokenizer)  # training_loss computes in float32
    simple_joint = SimpleJoint(16, 16, 24) if prune_range else None
    config = TrainConfig("", "", "", prune_range=prune_range, specaugment=SpecAugmentConfig(freq_masks=0, time_masks=0))
    results = []
    for pad_samples, pad_tokens in (padding_multiples(0.0, 16000), padding_multiples(1.0, 16000)):
        batch = collate(entries, [[0], [1, 2]], token_ids, 16000, 0.1, pad_samples, pad_tokens)
        assert batch.waveforms.shape[1] % pad_samples == 0 and batch.targets.shape[1] % pad_tokens == 0
        model.zero_grad()
        loss, _ = training_loss(model, batch, config, torch.Generator().manual_seed(0), simple_joint, step=10**6)
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    assert results[1][0].item() == pytest.approx(results[0][0].item(), rel=1e-5)
    for name, grad in results[0][1].items():
        # Float32 sums over more (zero) positions: equal up to rounding, relative to the tensor's scale.
        torch.testing.assert_close(results[1][1][name], grad, rtol=0, atol=1e-4 * grad.abs().max().item(), msg=name)


def test_long_form_rows_join_the_asked_share_within_the_limit() -> None:
    durations = np.random.default_rng(0).uniform(0.5, 12.0, size=400).tolist()
    assert long_form_rows(durations, 0.0, 40.0, 0.3, seed=1, epoch=0) == [[i] for i in range(400)]
    rows = long_form_rows(durations, 0.5, 40.0, 0.3, seed=1, epoch=0)
    assert sorted(i for row in rows for i in row) == list(range(400))
    assert sum(len(row) for row in rows if len(row) > 1) >= 195  # all but a last row of one are joined
    assert all(seconds <= 40.0 for seconds in row_seconds(rows, durations, 0.3))
    assert rows == long_form_rows(durations, 0.5, 40.0, 0.3, seed=1, epoch=0)
    assert rows != long_form_rows(durations, 0.5, 40.0, 0.3, seed=1, epoch=1)
    with pytest.raises(ValueError, match="between 0 and 1"):
        long_form_rows(durations, 1.5, 40.0, 0.3, seed=1, epoch=0)


def test_a_long_form_row_is_its_utterances_with_pauses_and_their_tokens(tmp_path: Path) -> None:
    entries = read_training_manifest(write_corpus(tmp_path, 3))
    tokenizer = Tokenizer.train(TEXTS * 3, 24)
    token_ids = [tokenizer.encode(e.text) for e in entries]
    batch = collate(entries, [[2], [0, 1]], token_ids, 16000, pause_seconds=0.25)
    audio = [soundfile.read(e.audio_filepath, dtype="float32")[0] for e in entries]
    joined = np.concatenate([audio[0], np.zeros(4000, np.float32), audio[1]])
    assert batch.waveform_lengths.tolist() == [len(audio[2]), len(joined)]
    np.testing.assert_array_equal(batch.waveforms[1].numpy(), joined)
    assert batch.targets[1, : batch.target_lengths[1]].tolist() == tokenizer.encode(
        f"{entries[0].text} {entries[1].text}")
    assert batch.indices == [[2], [0, 1]]


def test_spec_augment_masks_only_inside_valid_frames() -> None:
    features = torch.randn(3, 50, 80) + 10.0
    lengths = torch.tensor([50, 20, 5])
    out = spec_augment(features, lengths, SpecAugmentConfig(freq_masks=0, time_masks=4, time_width=0.2),
                       torch.Generator().manual_seed(0))
    masked_frames = (out == 0).all(dim=2)
    for i, length in enumerate(lengths.tolist()):
        assert not masked_frames[i, length:].any()
    assert masked_frames.any()
    freq = spec_augment(features, lengths, SpecAugmentConfig(freq_masks=2, freq_width=10, time_masks=0),
                        torch.Generator().manual_seed(0))
    assert ((freq == 0).all(dim=1).sum(dim=1) <= 20).all()


def test_learning_rate_schedule() -> None:
    config = TrainConfig("", "", "", max_steps=1000, warmup_steps=100, peak_lr=1e-3, final_lr_ratio=0.1)
    assert learning_rate(0, config) == pytest.approx(1e-5)
    assert learning_rate(99, config) == pytest.approx(1e-3)
    assert learning_rate(1000, config) == pytest.approx(1e-4)
    assert learning_rate(550, config) == pytest.approx(0.55e-3)
    # With a time budget the decay follows elapsed training time: half the budget is half the cosine.
    budget = TrainConfig("", "", "", max_steps=10**6, warmup_steps=100, peak_lr=1e-3, final_lr_ratio=0.1,
                         budget_minutes=10)
    assert learning_rate(50, budget, 0.0) == pytest.approx(0.51e-3)
    assert learning_rate(5000, budget, 300.0) == pytest.approx(0.55e-3)
    assert learning_rate(5000, budget, 900.0) == pytest.approx(1e-4)


def test_manifest_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"audio_filepath": "a.wav", "duration": 1.0, "text": "hi"}\n{"duration": 2}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2"):
        read_training_manifest(bad)


@pytest.mark.parametrize("head", TRAINING_HEADS, ids=lambda h: h.kind)
def test_training_runs_resumes_and_averages(tmp_path: Path, head: HeadSpec) -> None:
    manifest = write_corpus(tmp_path / "data", 12)
    exp = tmp_path / "exp"
    config = TrainConfig(str(manifest), str(manifest), str(exp), max_steps=3, warmup_steps=2, batch_seconds=4.0,
                         eval_every=3, save_every=1, threads=1)
    Trainer(config, tiny_config(head)).train()
    assert sorted(p.name for p in (exp / "checkpoints").glob("*.pt"))[-1] == "step-000003.pt"
    log = [json.loads(line) for line in (exp / "log.jsonl").read_text().splitlines()]
    assert any("dev_wer" in record for record in log)

    # Rerunning with more steps resumes from step 3 and continues the same schedule.
    config.max_steps = 5
    resumed = Trainer(config, None)
    assert resumed.step == 3
    resumed.train()
    assert resumed.step == 5

    model = average_checkpoints(exp, 3, tmp_path / "avg.pt", half=True)
    loaded = transdec.load_model(tmp_path / "avg.pt")
    assert loaded.metadata["averaged_steps"] == [3, 4, 5]
    assert loaded.config == model.config

    # Several runs: the newest checkpoints of each, weighted alike (here a run holding step 3 alone, and step 5).
    earlier = tmp_path / "earlier" / "checkpoints"
    earlier.mkdir(parents=True)
    shutil.copy(exp / "checkpoints" / "step-000003.pt", earlier)
    soup = average_checkpoints([earlier.parent, exp], 1, tmp_path / "soup.pt")
    assert transdec.load_model(tmp_path / "soup.pt").metadata["averaged_steps"] == [3, 5]
    states = [torch.load(exp / "checkpoints" / f"step-{step:06d}.pt", weights_only=True)["model"] for step in (3, 5)]
    for name, tensor in soup.state_dict().items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, (states[0][name].double() + states[1][name].double()).div(2).float())


def test_a_run_with_a_time_budget_stops_when_it_is_spent(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path / "data", 6)
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "exp"), max_steps=50, warmup_steps=1,
                         batch_seconds=3.0, eval_every=100, save_every=100, threads=1, budget_minutes=1e-6)
    trainer = Trainer(config, tiny_config(TRAINING_HEADS[0]))
    trainer.train()
    assert trainer.step == 1 and trainer.train_seconds >= 60 * config.budget_minutes


@pytest.mark.parametrize("long_form_share, pad_to_seconds", [(0.0, 0.0), (0.5, 0.0), (0.5, 1.0)])
def test_training_state_replays_the_same_batches(tmp_path: Path, long_form_share: float,
                                                 pad_to_seconds: float) -> None:
    manifest = write_corpus(tmp_path / "data", 10)
    straight = TrainConfig(str(manifest), str(manifest), str(tmp_path / "a"), max_steps=4, warmup_steps=1,
                           batch_seconds=3.0, eval_every=100, save_every=100, threads=1, seed=5,
                           long_form_share=long_form_share, long_form_seconds=2.5, pad_to_seconds=pad_to_seconds)
    Trainer(straight, tiny_config(TRAINING_HEADS[0])).train()
    stopped = TrainConfig(**{**straight.__dict__, "exp_dir": str(tmp_path / "b"), "max_steps": 2})
    Trainer(stopped, tiny_config(TRAINING_HEADS[0])).train()
    stopped.max_steps = 4
    Trainer(stopped, None).train()
    a = torch.load(tmp_path / "a/checkpoints/step-000004.pt", weights_only=True)
    b = torch.load(tmp_path / "b/checkpoints/step-000004.pt", weights_only=True)
    assert (a["epoch"], a["batch_in_epoch"]) == (b["epoch"], b["batch_in_epoch"])
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=0, atol=1e-6, msg=name)


def test_reload_manifest_takes_new_utterances_at_the_next_epoch(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path / "data", 8)
    lines = manifest.read_text().splitlines()
    manifest.write_text("\n".join(lines[:4]) + "\n")
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "exp"), max_steps=1, warmup_steps=1,
                         batch_seconds=100.0, eval_every=100, save_every=100, threads=1, reload_manifest=True)
    trainer = Trainer(config, tiny_config(TRAINING_HEADS[0]))
    positions = trainer.batch_positions()
    first_epoch = next(positions)
    manifest.write_text("\n".join(lines) + "\n")  # the corpus grew while epoch 0 trained
    second_epoch = next(positions)
    assert (first_epoch[0], second_epoch[0]) == (0, 1)
    assert sorted(i for row in first_epoch[2] for i in row) == [0, 1, 2, 3]
    assert sorted(i for row in second_epoch[2] for i in row) == list(range(8))
    assert len(trainer.train_entries) == len(trainer.token_ids) == 8


def test_a_tdt_run_starts_from_an_rnnt_model(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path / "data", 8)
    rnnt_head, tdt_head = TRAINING_HEADS[0], next(h for h in TRAINING_HEADS if h.kind == "tdt")
    rnnt = TransducerModel(tiny_config(rnnt_head), Tokenizer.train(TEXTS * 3, rnnt_head.num_tokens))
    save_model(rnnt, tmp_path / "rnnt.pt")
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "tdt"), max_steps=1, warmup_steps=1,
                         batch_seconds=4.0, eval_every=100, save_every=100, threads=1,
                         init_from=str(tmp_path / "rnnt.pt"))
    trainer = Trainer(config, tiny_config(tdt_head))
    assert trainer.model.tokenizer.to_bytes() == rnnt.tokenizer.to_bytes()
    source, started = rnnt.state_dict(), trainer.model.state_dict()
    labels = rnnt_head.num_labels
    for name, tensor in source.items():
        if name.startswith("joint.output"):
            torch.testing.assert_close(started[name][:labels], tensor, rtol=0, atol=0)
            assert started[name].shape[0] == labels + len(tdt_head.durations)
        else:
            torch.testing.assert_close(started[name], tensor, rtol=0, atol=0, msg=name)
    trainer.train()
    assert trainer.step == 1


def test_a_run_with_another_vocabulary_takes_only_the_encoder(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path / "data", 8)
    small, large = HeadSpec("rnnt", 24), HeadSpec("rnnt", 32)
    source = TransducerModel(tiny_config(small), Tokenizer.train(TEXTS * 3, small.num_tokens))
    save_model(source, tmp_path / "small.pt")
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "large"), max_steps=1, warmup_steps=1,
                         batch_seconds=4.0, eval_every=100, save_every=100, threads=1,
                         init_from=str(tmp_path / "small.pt"))
    with pytest.raises(ValueError, match="same tokenizer"):
        Trainer(config, tiny_config(large))
    config.exp_dir, config.init_encoder_only = str(tmp_path / "large2"), True
    trainer = Trainer(config, tiny_config(large))
    assert trainer.model.tokenizer.vocab_size == large.num_tokens
    started = trainer.model.state_dict()
    for name, tensor in source.state_dict().items():
        if name.startswith("encoder."):
            torch.testing.assert_close(started[name], tensor, rtol=0, atol=0, msg=name)


@pytest.mark.parametrize("head", TRAINING_HEADS, ids=lambda h: h.kind)
def test_a_pruned_loss_run_trains_and_resumes_only_as_such(tmp_path: Path, head: HeadSpec) -> None:
    manifest = write_corpus(tmp_path / "data", 8)
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "exp"), max_steps=2, warmup_steps=1,
                         batch_seconds=4.0, eval_every=100, save_every=100, threads=1, prune_range=2,
                         prune_warmup_steps=2, log_every=1)
    trainer = Trainer(config, tiny_config(head))
    before = {name: p.detach().clone() for name, p in trainer.simple_joint.named_parameters()}
    trainer.train()
    log = [json.loads(line) for line in (tmp_path / "exp" / "log.jsonl").read_text().splitlines()]
    assert len([r for r in log if "simple" in r]) == 2
    assert all(math.isfinite(r["simple"]) and math.isfinite(r["transducer"]) for r in log if "simple" in r)
    assert any(not torch.equal(p, before[name]) for name, p in trainer.simple_joint.named_parameters())
    saved = torch.load(trainer.latest_checkpoint(), weights_only=True)
    assert set(saved["simple_joint"]) == set(before)

    config.max_steps = 3
    resumed = Trainer(config, None)
    for name, p in resumed.simple_joint.named_parameters():
        torch.testing.assert_close(p, trainer.simple_joint.get_parameter(name), rtol=0, atol=0)
    with pytest.raises(ValueError, match="same --prune-range"):
        Trainer(dataclasses.replace(config, prune_range=0), None)


def test_pruned_loss_weights_warm_up() -> None:
    config = TrainConfig("", "", "", prune_range=5, prune_warmup_steps=100, simple_loss_scale=0.5)
    assert pruned_loss_weights(0, config) == pytest.approx((0.1, 1.0))
    assert pruned_loss_weights(50, config) == pytest.approx((0.55, 0.75))
    assert pruned_loss_weights(100, config) == pruned_loss_weights(10**6, config) == pytest.approx((1.0, 0.5))


def test_a_pruned_loss_run_places_its_first_bands_with_the_ctc_head(tmp_path: Path) -> None:
    manifest = write_corpus(tmp_path / "data", 4)
    config = TrainConfig(str(manifest), str(manifest), str(tmp_path / "exp"), max_steps=1, threads=1,
                         prune_range=2)
    trainer = Trainer(config, tiny_config(TRAINING_HEADS[0]))
    torch.testing.assert_close(trainer.simple_joint.encoder_output.weight, trainer.model.ctc.weight)
    torch.testing.assert_close(trainer.simple_joint.encoder_output.bias, trainer.model.ctc.bias)
    assert not trainer.simple_joint.predictor_output.weight.any()


def test_load_model_names_a_directory_as_such(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"{tmp_path}: a directory without .onnx files; expected a transdec model "
                                         r"file, .* or a bundled model name \(tiny-en-rnnt, tiny-en-tdt, "
                                         r"tiny-en-multiblank\)"):
        transdec.load_model(tmp_path)
    with pytest.raises(ValueError, match=f"{tmp_path}: is a directory, not a model file"):
        read_checkpoint(tmp_path)


def test_encode_takes_any_floating_dtype_and_refuses_integers(tokenizer: Tokenizer) -> None:
    torch.manual_seed(0)
    model = TransducerModel(tiny_config(TRAINING_HEADS[0]), tokenizer).eval()
    audio = torch.randn(2, 16000) * 0.1
    expected, lengths = model.encode(audio)
    for dtype in (torch.float64, torch.float16, torch.bfloat16):
        encoded, same_lengths = model.encode(audio.to(dtype))
        assert encoded.dtype == torch.float32 and torch.equal(same_lengths, lengths)
        if dtype == torch.float64:
            torch.testing.assert_close(encoded, expected, rtol=1e-4, atol=1e-4)
    double = TransducerModel(tiny_config(TRAINING_HEADS[0]), tokenizer).double().eval()
    assert double.encode(audio)[0].dtype == torch.float64
    with pytest.raises(ValueError, match=r"waveforms must be floating point .* got torch.int16; scale integer PCM"):
        model.encode((audio * 32768).to(torch.int16))


def test_encode_of_audio_shorter_than_one_frame_is_empty(tokenizer: Tokenizer) -> None:
    model = TransducerModel(tiny_config(TRAINING_HEADS[0]), tokenizer).eval()
    for samples in (0, 399):
        encoded, lengths = model.encode(torch.zeros(2, samples))
        assert encoded.shape == (2, 0, model.encoder.output_dim) and lengths.tolist() == [0, 0]
        assert decode(model, encoded, lengths).hypotheses()[0].tokens == []
