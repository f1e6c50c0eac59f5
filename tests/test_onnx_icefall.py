"""sherpa-onnx's offline transducers in the icefall/k2 format (transdec.adapters.onnx_icefall), on random models
exported as icefall exports them (tests/icefall_exports.py): sherpa-onnx decodes them, transdec's greedy search
gives sherpa-onnx's tokens on real audio (float32 and int8 files), every kind of search and fusion runs on them,
streaming exports are refused and broken directories are named in one line."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("kaldi_native_fbank")

from float32 import assert_float32_close  # noqa: E402
from icefall_exports import (  # noqa: E402
    STEM, IcefallShape, export_icefall, export_streaming_encoder, icefall_tokens, set_metadata,
)
from onnx_helpers import EXAMPLES, example_audio, model  # noqa: E402
from transdec.adapters.onnx import load_onnx  # noqa: E402
from transdec.decoding import DecodingConfig, Fusion, decode  # noqa: E402
from transdec.protocol import HeadSpec  # noqa: E402

PARTS = ("encoder", "decoder", "joiner")
#: sherpa-onnx's greedy search for these models emits at most one token per frame.
SHERPA_GREEDY = DecodingConfig("greedy_label", max_symbols_per_frame=1)
#: The other searches' symbols-per-frame limit. At transdec's default of 10 the random model says a token or more at
#: nearly every step, and a stateless decoder with a context of 2 gives some different hypotheses exactly the same
#: score, whose order float32 rounding (ONNX Runtime's kernels at each batch size) then decides.
LIMIT = {"max_symbols_per_frame": 2}


@pytest.fixture(scope="module")
def pieces():
    tokenizer = model("tiny-en-rnnt").tokenizer
    return [tokenizer.id_to_piece(i) for i in range(tokenizer.vocab_size)]


@pytest.fixture(scope="module")
def zipformer(tmp_path_factory, pieces):
    """A random icefall-format export with float32 and int8 files side by side, as sherpa-onnx publishes them."""
    return export_icefall(tmp_path_factory.mktemp("icefall") / "zipformer", pieces, seed=0)


@pytest.fixture(scope="module")
def audio():
    waves = example_audio()
    batch = torch.nn.utils.rnn.pad_sequence([torch.from_numpy(w) for w in waves], batch_first=True)
    return waves, batch, torch.tensor([len(w) for w in waves])


def _sherpa(files):
    sherpa_onnx = pytest.importorskip("sherpa_onnx")
    # model_type="": sherpa-onnx picks its transducer implementation from the encoder's model_type metadata.
    return sherpa_onnx.OfflineRecognizer.from_transducer(
        *(str(files[part]) for part in PARTS), str(files["encoder"].parent / "tokens.txt"), num_threads=1,
        decoding_method="greedy_search", model_type="")


def _sherpa_results(files, waves, together=False):
    """sherpa-onnx's results, each recording decoded alone (``decode_stream``) or all in one batch
    (``decode_streams``)."""
    recognizer = _sherpa(files)
    streams = [recognizer.create_stream() for _ in waves]
    for stream, samples in zip(streams, waves):
        stream.accept_waveform(16000, samples)
    if together:
        recognizer.decode_streams(streams)
    else:
        for stream in streams:
            recognizer.decode_stream(stream)
    return [stream.result for stream in streams]


def _pieces(loaded, transcripts):
    return [[loaded.tokenizer.pieces[t].replace("▁", " ") for t in transcript.tokens] for transcript in transcripts]


def _copy(directory, target, names):
    target.mkdir()
    for name in names:
        shutil.copy(directory / name, target / name)
    return target


@pytest.mark.parametrize("variant", ["fp32", "int8"])
def test_transdec_greedy_gives_sherpa_onnx_tokens(variant, zipformer, audio, pieces):
    """The whole pipeline: audio -> sherpa-onnx's fbank -> ONNX encoder -> label-looping greedy search over ONNX
    sessions gives sherpa-onnx's tokens, text, times and log-probabilities, from the files of ``variant``, one
    recording at a time as sherpa-onnx's ``decode_stream``.

    In float32, a batch too, as sherpa-onnx's ``decode_streams``: the encoder's last frames read the padding (as a
    Zipformer's do), so this checks the padding value, log(1e-10). An int8 encoder quantizes its activations with
    one scale for the whole batch, padding included, and ONNX Runtime 1.28 (in sherpa-onnx's wheel) and 1.32
    round such batches differently, so a batch of int8 is not compared."""
    waves, batch, lengths = audio
    loaded = load_onnx(zipformer, variant=variant)
    suffix = ".int8.onnx" if variant == "int8" else f"{STEM}.onnx"
    assert all(loaded.config.files[part].name.endswith(suffix) for part in PARTS)
    assert loaded.config.layout == "icefall"
    assert loaded.head == HeadSpec("rnnt", len(icefall_tokens(pieces)) - 1)  # tokens.txt without the blank
    expected = _sherpa_results(loaded.config.files, waves)
    assert sum(len(r.tokens) for r in expected) > 20, "the random model should say something"

    transcripts = loaded.transcribe(waves, SHERPA_GREEDY, batch_size=1)
    assert _pieces(loaded, transcripts) == [list(r.tokens) for r in expected]
    assert [t.text for t in transcripts] == [r.text.strip() for r in expected]
    for samples, result in zip(waves, expected):
        encoded, frames = loaded.encode(torch.from_numpy(samples).unsqueeze(0))
        hypothesis = decode(loaded, encoded, frames, SHERPA_GREEDY).hypotheses()[0]
        seconds = [frame * loaded.frame_shift_seconds for frame in hypothesis.timestamps]
        assert_float32_close(torch.tensor(seconds), torch.tensor(list(result.timestamps)))
        assert_float32_close(torch.tensor(hypothesis.token_logprobs), torch.tensor(list(result.ys_log_probs)))

    if variant == "fp32":
        together = _sherpa_results(loaded.config.files, waves, together=True)
        encoded, frames = loaded.encode(batch, lengths)
        batched = decode(loaded, encoded, frames, SHERPA_GREEDY).hypotheses()
        assert [_pieces(loaded, [h])[0] for h in batched] == [list(r.tokens) for r in together]
        for hypothesis, result in zip(batched, together):
            assert_float32_close(torch.tensor(hypothesis.token_logprobs), torch.tensor(list(result.ys_log_probs)))
        assert [list(r.ys_log_probs) for r in together] != [list(r.ys_log_probs) for r in expected], (
            "the padding should change the batch's results")


def test_int32_inputs_export(tmp_path, pieces, zipformer, audio):
    """icefall's --use-int32-inputs: int32 lengths and decoder ids, the same model and tokens."""
    directory = export_icefall(tmp_path / "int32", pieces, seed=0, int8=False, int32_inputs=True)
    waves = audio[0]
    expected = [t.tokens for t in load_onnx(zipformer).transcribe(waves, SHERPA_GREEDY, batch_size=3)]
    loaded = load_onnx(directory)
    assert [t.tokens for t in loaded.transcribe(waves, SHERPA_GREEDY, batch_size=3)] == expected
    assert _pieces(loaded, loaded.transcribe(waves, SHERPA_GREEDY, batch_size=1)) == [
        list(r.tokens) for r in _sherpa_results(loaded.config.files, waves)]


def _close(got, want):
    """Same tokens and frames; log-probabilities equal within float32 rounding (the joiner runs on batches of
    other shapes)."""
    assert (got.tokens, got.timestamps) == (want.tokens, want.timestamps)
    assert_float32_close(torch.tensor(got.token_logprobs), torch.tensor(want.token_logprobs))


def test_beam_searches(zipformer, audio):
    """ALSD++ (batched) gives the per-utterance ALSD's n-best lists; ALSD++, AES++ and mAES (per utterance) with one
    hypothesis and one candidate are greedy decoding; AES++ decodes an utterance alone as in the batch; mAES gives
    its n-best lists."""
    loaded = load_onnx(zipformer)
    encoded, frames = loaded.encode(audio[1], audio[2])
    greedy = decode(loaded, encoded, frames, SHERPA_GREEDY).hypotheses()
    one_candidate = {"beam_size": 1, "expansion_beta": 0, "num_steps": 1, "max_symbols_per_frame": None}
    for config in (DecodingConfig("beam_alsd_pp", beam_size=1, max_symbols_per_frame=1),
                   DecodingConfig("beam_aes_pp", **one_candidate), DecodingConfig("beam_maes", **one_candidate)):
        for got, want in zip(decode(loaded, encoded, frames, config).hypotheses(), greedy):
            _close(got, want)

    batched = decode(loaded, encoded, frames, DecodingConfig("beam_alsd_pp", beam_size=4, nbest=4, **LIMIT))
    reference = decode(loaded, encoded, frames, DecodingConfig("beam_alsd", beam_size=4, nbest=4, **LIMIT))
    for got, want in zip(batched.nbest, reference.nbest):
        assert [h.tokens for h in got] == [h.tokens for h in want]
        assert_float32_close(torch.tensor([h.score for h in got]), torch.tensor([h.score for h in want]))

    aes = DecodingConfig("beam_aes_pp", beam_size=4, **LIMIT)
    together = decode(loaded, encoded, frames, aes).hypotheses()
    alone = [decode(loaded, encoded[i:i + 1, :n], frames[i:i + 1], aes).hypotheses()[0]
             for i, n in enumerate(frames.tolist())]
    assert [h.tokens for h in together] == [h.tokens for h in alone]
    maes = decode(loaded, encoded, frames, DecodingConfig("beam_maes", beam_size=4, nbest=4)).nbest
    assert all(len(nbest) == 4 and nbest[0].tokens for nbest in maes)


def test_lm_fusion(zipformer, audio, tmp_path):
    """An n-gram LM fused into greedy and ALSD++ decoding of the export: batched equals the reference searches, and
    the LM changes what is decoded."""
    from arpa_fixtures import random_arpa
    from transdec.lm import NGramLM

    loaded = load_onnx(zipformer)
    encoded, frames = loaded.encode(audio[1], audio[2])
    (tmp_path / "lm.arpa").write_text(random_arpa(loaded.head.num_tokens, order=3, seed=5))
    lm = NGramLM.load(tmp_path / "lm.arpa", loaded.head.num_tokens)
    fusions = [Fusion(lm, 0.8)]
    greedy = decode(loaded, encoded, frames, DecodingConfig("greedy_label", fusions=fusions, **LIMIT)).hypotheses()
    reference = decode(loaded, encoded, frames, DecodingConfig("greedy_reference", fusions=fusions, **LIMIT))
    for got, want in zip(greedy, reference.hypotheses()):
        _close(got, want)
    plain = decode(loaded, encoded, frames, DecodingConfig("greedy_label", **LIMIT)).hypotheses()
    assert [h.tokens for h in greedy] != [h.tokens for h in plain], "the LM should change some decision"
    batched = decode(loaded, encoded, frames, DecodingConfig("beam_alsd_pp", beam_size=3, fusions=fusions, **LIMIT))
    reference = decode(loaded, encoded, frames, DecodingConfig("beam_alsd", beam_size=3, fusions=fusions, **LIMIT))
    assert [h.tokens for h in batched.hypotheses()] == [h.tokens for h in reference.hypotheses()]


def test_phrase_boosting(zipformer, audio):
    """A phrase given as text (tokenized with tokens.txt's pieces) that the model does not say unboosted is said
    once boosted, in greedy and ALSD++ decoding, and the batched searches equal their references."""
    from transdec.biasing import Boost

    loaded = load_onnx(zipformer)
    encoded, frames = loaded.encode(audio[1], audio[2])
    plain = decode(loaded, encoded, frames, DecodingConfig("greedy_label", **LIMIT)).hypotheses()
    said = {t for h in plain for t in h.tokens}
    word = next(w for w in ("the", "and", "of", "to", "is", "it", "in") if loaded.tokenizer.encode(w)[0] not in said)
    phrase = loaded.tokenizer.encode(word)
    boost = Boost([word], 6.0, tokenizer=loaded.tokenizer)
    for strategy, reference, options in (("greedy_label", "greedy_reference", {}),
                                         ("beam_alsd_pp", "beam_alsd", {"beam_size": 3})):
        got = decode(loaded, encoded, frames, DecodingConfig(strategy, fusions=[boost], **options, **LIMIT))
        want = decode(loaded, encoded, frames, DecodingConfig(reference, fusions=[boost], **options, **LIMIT))
        assert [h.tokens for h in got.hypotheses()] == [h.tokens for h in want.hypotheses()], strategy
        assert any(phrase[0] in h.tokens for h in got.hypotheses()), f"{strategy}: the boosted {word!r} is never said"


def test_variants(zipformer, tmp_path, audio):
    """fp32 by default where both are there, int8 when asked; a directory with only int8 files, or int8 encoder
    and joiner with a float32 decoder, loads what it has."""
    int8_names = [f"{part}-{STEM}.int8.onnx" for part in PARTS]
    only_int8 = _copy(zipformer, tmp_path / "int8", int8_names + ["tokens.txt"])
    for variant in ("fp32", "int8"):
        assert [p.name for p in load_onnx(only_int8, variant=variant).config.files.values()] == int8_names
    mixed = _copy(zipformer, tmp_path / "mixed", [int8_names[0], f"decoder-{STEM}.onnx", int8_names[2], "tokens.txt"])
    assert [p.name for p in load_onnx(mixed, variant="int8").config.files.values()] == [
        int8_names[0], f"decoder-{STEM}.onnx", int8_names[2]]
    waves = audio[0][:1]
    assert load_onnx(only_int8).transcribe(waves)[0].tokens == load_onnx(zipformer, variant="int8").transcribe(
        waves)[0].tokens
    with pytest.raises(ValueError, match="variant must be one of fp32, int8, got 'fp16'"):
        load_onnx(zipformer, variant="fp16")


def test_transcribe_command(zipformer, capsys):
    from transdec.cli import main

    assert main(["transcribe", "--model", str(zipformer), str(EXAMPLES[0])]) == 0
    expected = load_onnx(zipformer).transcribe([str(EXAMPLES[0])])[0].text
    assert expected in capsys.readouterr().out


# --- what does not load ----------------------------------------------------------------------------------------------


def test_without_kaldi_native_fbank(zipformer, monkeypatch, capsys):
    """The front end of an icefall-format export is kaldi-native-fbank's: without it, loading says so (the command
    line names the extra to install)."""
    from transdec.cli import main

    monkeypatch.setitem(sys.modules, "kaldi_native_fbank", None)  # `import kaldi_native_fbank` fails
    with pytest.raises(ImportError, match="need kaldi-native-fbank, which is not installed"):
        load_onnx(zipformer)
    assert main(["transcribe", "--model", str(zipformer), str(EXAMPLES[0])]) == 2
    assert "pip install 'transdec[sherpa]'" in capsys.readouterr().err


def _broken(zipformer, tmp_path):
    return _copy(zipformer, tmp_path / "broken", [f"{part}-{STEM}.onnx" for part in PARTS] + ["tokens.txt"])


def test_streaming_export_is_refused(zipformer, tmp_path, capsys):
    from transdec.cli import main

    directory = _broken(zipformer, tmp_path)
    export_streaming_encoder(directory / f"encoder-{STEM}.onnx")
    with pytest.raises(ValueError, match=r"broken: encoder-epoch-99-avg-1.onnx is a streaming encoder \(metadata "
                                         r"decode_chunk_len=32, T=45; state inputs cached_len_0, processed_lens\); "
                                         r"only offline \(non-streaming\) transducers load"):
        load_onnx(directory)
    assert main(["transcribe", "--model", str(directory), str(EXAMPLES[0])]) == 2
    error = capsys.readouterr().err.strip()
    assert len(error.splitlines()) == 1 and "only offline (non-streaming) transducers load" in error
    # As published: one set of files per chunk size, named by icefall's export-onnx-streaming.py.
    for left in (64, 128):
        shutil.copy(directory / f"encoder-{STEM}.onnx", directory / f"encoder-{STEM}-chunk-16-left-{left}.onnx")
    (directory / f"encoder-{STEM}.onnx").unlink()
    with pytest.raises(ValueError, match=r"broken: encoder-epoch-99-avg-1-chunk-16-left-128.onnx, "
                                         r"encoder-epoch-99-avg-1-chunk-16-left-64.onnx are streaming exports"):
        load_onnx(directory)


@pytest.mark.parametrize("key", ["context_size", "vocab_size"])
def test_decoder_metadata_missing(key, zipformer, tmp_path):
    directory = _broken(zipformer, tmp_path)
    kept = {k: v for k, v in {"context_size": "2", "vocab_size": "258"}.items() if k != key}
    set_metadata(directory / f"decoder-{STEM}.onnx", kept)
    with pytest.raises(ValueError, match=rf"broken/decoder-epoch-99-avg-1.onnx: metadata '{key}' is missing"):
        load_onnx(directory)


def test_missing_part(zipformer, tmp_path):
    directory = _broken(zipformer, tmp_path)
    (directory / f"joiner-{STEM}.onnx").unlink()
    with pytest.raises(FileNotFoundError, match=r"broken: .* missing joiner\*\.onnx"):
        load_onnx(directory)


def test_two_encoders_of_one_variant(zipformer, tmp_path):
    directory = _broken(zipformer, tmp_path)
    shutil.copy(directory / f"encoder-{STEM}.onnx", directory / "encoder-epoch-30-avg-2.onnx")
    with pytest.raises(ValueError, match=r"more than one fp32 encoder file \(encoder-epoch-30-avg-2.onnx, "
                                         r"encoder-epoch-99-avg-1.onnx\); keep one"):
        load_onnx(directory)


def test_parts_of_two_models(zipformer, tmp_path, pieces):
    other = export_icefall(tmp_path / "other", pieces, seed=1, int8=False,
                           shape=IcefallShape(vocab_size=len(icefall_tokens(pieces)), joiner_dim=16))
    directory = _broken(zipformer, tmp_path)
    shutil.copy(other / f"joiner-{STEM}.onnx", directory / f"joiner-{STEM}.onnx")
    with pytest.raises(ValueError, match=r"joiner-epoch-99-avg-1.onnx: takes encoder outputs of width 16, but "
                                         r"encoder-epoch-99-avg-1.onnx gives 24"):
        load_onnx(directory)


def test_tokens_that_do_not_fit(zipformer, tmp_path):
    directory = _broken(zipformer, tmp_path)
    lines = (directory / "tokens.txt").read_text().splitlines()
    (directory / "tokens.txt").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(ValueError, match="tokens.txt has 257 entries but the model has 257 tokens and a blank"):
        load_onnx(directory)
    (directory / "tokens.txt").write_text("\n".join(lines + ["#0 258", "#1 259"]) + "\n")
    assert load_onnx(directory).tokenizer.vocab_size == 257  # disambiguation symbols at the end are not tokens
