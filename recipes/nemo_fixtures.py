"""Build small random-weight NeMo Transducer models and NeMo's own outputs on a few clips: the fixtures that
``tests/test_nemo_*.py`` check transdec's ``.nemo`` loader against, without NeMo.

Runs in a virtualenv with ``nemo-toolkit[asr]==3.0.0`` (torch pinned as in ``constraints.txt``), from the
repository root::

    OMP_NUM_THREADS=1 /work/nemo-venv/bin/python recipes/nemo_fixtures.py            # tests/fixtures/nemo/
    OMP_NUM_THREADS=1 /work/nemo-venv/bin/python recipes/nemo_fixtures.py --full-size DIR  # parakeet-sized

Writes, per model ``NAME``: ``NAME.nemo`` (NeMo's own ``save_to``) and ``NAME.outputs.pt``: for each clip, NeMo's
features ``[T, F]`` (``AudioToMelSpectrogramPreprocessor`` in eval mode), encoder output ``[T', D]`` and the
greedy hypothesis of NeMo's per-utterance decoder (``strategy="greedy"``: each utterance alone, since NeMo's
batched TDT and multi-blank greedy are wrong at B > 1), its tokens, frame indices, TDT durations and text.
The clips (``clips.pt``, int16 samples at 16 kHz) are cut from ``examples/``. Every model uses a sentencepiece tokenizer
trained here on the standard library's docstrings (64 tokens; 1024 for ``--full-size``).

Weights are NeMo's random initialisation, with the parameters NeMo starts at zero or one (batch-norm
statistics, the u/v attention biases, layer-norm affines) perturbed so that the loader is tested on them. The
predictor's share of the joint is shrunk and the blank outputs' biases raised until NeMo emits about 0.35 tokens
per frame; a seed whose clips come out with almost no tokens (or the maximum) is replaced by the next one.
``--full-size`` models keep one clip, and their outputs file holds the clip's samples too.

The cache-aware streaming models (``STREAMING_MODELS``) keep, under ``"streaming"``, per look-ahead of their
``att_context_size`` list: NeMo's offline encoder output with that look-ahead, the encoder output of each
``cache_aware_stream_step`` as ``CacheAwareStreamingAudioBuffer`` feeds the clip, and the tokens of NeMo's
cache-aware streaming greedy transcription (:func:`nemo_streaming_outputs`). New models alone, without touching
the others' files::

    OMP_NUM_THREADS=1 /work/nemo-venv/bin/python recipes/nemo_fixtures.py --only fc_streaming_rnnt,fc_streaming_hybrid --output /tmp/nemo
    cp /tmp/nemo/fc_streaming_* tests/fixtures/nemo/
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import pydoc
import sys
import tempfile
import time
import zlib
from pathlib import Path

import torch

CLIPS = (("espeak_logic", 0.0, 3.0), ("piper_allens_axiom", 0.5, 3.2), ("piper_are_you_making_this_up", 0.0, 2.1),
         ("espeak_logic", 1.0, 1.45))
VOCAB = 64
#: Models whose outputs keep NeMo's features (the others share these front ends; their encoder outputs, which
#: depend on the features, are kept for all).
FEATURE_MODELS = ("fc_rnnt", "fc_tdt", "fc_hybrid", "fc_streaming_rnnt")
#: Cache-aware streaming models: their outputs also hold NeMo's streaming outputs (:func:`nemo_streaming_outputs`).
STREAMING_MODELS = ("fc_streaming_rnnt", "fc_streaming_hybrid")
MAX_SYMBOLS = 10


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", default="tests/fixtures/nemo")
    parser.add_argument("--only", default="", help="comma-separated model names (default: all)")
    parser.add_argument("--full-size", metavar="DIR", default="",
                        help="instead: parakeet-tdt-0.6b-v2, parakeet-rnnt-1.1b, parakeet-tdt-0.6b-v3 and "
                             "parakeet-tdt_ctc-110m shaped models in DIR (--only to choose)")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


# --------------------------------------------------------------------------------------------------- configs

def preprocessor(features: int = 80, pad_to: int = 0, n_fft: int = 512, window: str = "hann",
                 normalize: str = "per_feature") -> dict:
    return {"_target_": "nemo.collections.asr.modules.AudioToMelSpectrogramPreprocessor", "sample_rate": 16000,
            "normalize": normalize, "window_size": 0.025, "window_stride": 0.01, "window": window,
            "features": features, "n_fft": n_fft, "log": True, "frame_splicing": 1, "dither": 1e-5,
            "pad_to": pad_to, "pad_value": 0.0}


def encoder(**overrides) -> dict:
    config = {"_target_": "nemo.collections.asr.modules.ConformerEncoder", "feat_in": "${preprocessor.features}",
              "feat_out": -1, "n_layers": 1, "d_model": 48, "subsampling": "dw_striding", "subsampling_factor": 8,
              "subsampling_conv_channels": 24, "causal_downsampling": False, "ff_expansion_factor": 4,
              "self_attention_model": "rel_pos", "n_heads": 4, "att_context_size": [-1, -1],
              "att_context_style": "regular", "xscaling": True, "untie_biases": True, "pos_emb_max_len": 5000,
              "conv_kernel_size": 9, "conv_norm_type": "batch_norm", "conv_context_size": None, "dropout": 0.1,
              "dropout_pre_encoder": 0.1, "dropout_emb": 0.0, "dropout_att": 0.1}
    config.update(overrides)
    return config


def lstm_decoder(hidden: int = 64, layers: int = 1) -> dict:
    return {"_target_": "nemo.collections.asr.modules.RNNTDecoder", "normalization_mode": None,
            "random_state_sampling": False, "blank_as_pad": True,
            "prednet": {"pred_hidden": "${model_defaults.pred_hidden}", "pred_rnn_layers": layers, "t_max": None,
                        "dropout": 0.2}}


def joint(activation: str = "relu", extra: int = 0) -> dict:
    return {"_target_": "nemo.collections.asr.modules.RNNTJoint", "log_softmax": None, "preserve_memory": False,
            "fuse_loss_wer": False, "fused_batch_size": 4, "num_extra_outputs": extra,
            "jointnet": {"joint_hidden": "${model_defaults.joint_hidden}", "activation": activation, "dropout": 0.2}}


def model_config(tokenizer_dir: str, *, enc: dict, dec: dict, head: str = "rnnt", durations=(0, 1, 2, 3, 4),
                 big_blanks=(2, 4), features: int = 80, pad_to: int = 0, activation: str = "relu",
                 pred_hidden: int = 48, joint_hidden: int = 48, hybrid: bool = False,
                 normalize: str = "per_feature") -> dict:
    extra = len(durations) if head == "tdt" else len(big_blanks) if head == "multiblank" else 0
    config = {
        "sample_rate": 16000,
        "model_defaults": {"enc_hidden": "${encoder.d_model}", "pred_hidden": pred_hidden, "joint_hidden": joint_hidden},
        "tokenizer": {"dir": tokenizer_dir, "type": "bpe"},
        "preprocessor": preprocessor(features, pad_to, normalize=normalize),
        "encoder": enc,
        "decoder": dec,
        "joint": joint(activation, extra),
        "decoding": {"strategy": "greedy", "greedy": {"max_symbols": MAX_SYMBOLS}},
        "loss": {"loss_name": "default"},
        "optim": {"name": "adamw", "lr": 1e-3},
    }
    if head == "tdt":
        config["model_defaults"]["tdt_durations"] = list(durations)
        config["loss"] = {"loss_name": "tdt", "tdt_kwargs": {"durations": "${model_defaults.tdt_durations}",
                                                             "sigma": 0.02, "omega": 0.1}}
        config["decoding"]["model_type"] = "tdt"
        config["decoding"]["durations"] = "${model_defaults.tdt_durations}"
    elif head == "multiblank":
        config["loss"] = {"loss_name": "multiblank_rnnt",
                          "multiblank_rnnt_kwargs": {"big_blank_durations": list(big_blanks), "sigma": 0.05}}
        config["decoding"]["big_blank_durations"] = list(big_blanks)
    if hybrid:
        config["aux_ctc"] = {"ctc_loss_weight": 0.3, "use_cer": False, "ctc_reduction": "mean_batch",
                             "decoder": {"_target_": "nemo.collections.asr.modules.ConvASRDecoder",
                                         "feat_in": None, "num_classes": -1, "vocabulary": []},
                             "decoding": {"strategy": "greedy"}}
    return config


def model_specs(tokenizer_dir: str) -> dict[str, tuple[str, dict]]:
    """name -> (NeMo model class, config)."""
    rnnt = "EncDecRNNTBPEModel"
    return {
        # FastConformer (dw_striding 8x), LSTM predictor, 80 mel bins.
        "fc_rnnt": (rnnt, model_config(tokenizer_dir, enc=encoder(n_layers=2), dec=lstm_decoder())),
        # TDT with a two-layer predictor and 128 mel bins (parakeet-tdt's front end).
        "fc_tdt": (rnnt, model_config(tokenizer_dir, enc=encoder(feat_in=128, n_layers=2),
                                      dec=lstm_decoder(layers=2),
                                      head="tdt", features=128)),
        # Multi-blank, tanh joint, attention limited to 10 frames left and 3 right.
        "fc_multiblank": (rnnt, model_config(tokenizer_dir, enc=encoder(att_context_size=[10, 3], n_layers=2),
                                             dec=lstm_decoder(), head="multiblank", activation="tanh")),
        # Hybrid RNN-T/CTC: the Transducer head is decoded, the CTC head checked as a bonus. Encoder layers
        # without biases (use_bias: false), features not normalised (normalize: NA).
        "fc_hybrid": ("EncDecHybridRNNTCTCBPEModel",
                      model_config(tokenizer_dir, enc=encoder(use_bias=False), dec=lstm_decoder(), hybrid=True,
                                   normalize="NA")),
        # Stateless predictor (context 2, NeMo's uneven embedding split, layer norm), feature padding to 16.
        "fc_stateless": (rnnt, model_config(
            tokenizer_dir, enc=encoder(), pad_to=16,
            dec={"_target_": "nemo.collections.asr.modules.StatelessTransducerDecoder", "context_size": 2,
                 "normalization_mode": "layer", "prednet": {"pred_hidden": "${model_defaults.pred_hidden}",
                                                            "dropout": 0.0}}, pred_hidden=50)),
        # Classic Conformer: striding 4x, no x-scaling, u/v biases shared by the layers, layer-norm conv module.
        "conformer4x": (rnnt, model_config(
            tokenizer_dir, enc=encoder(subsampling="striding", subsampling_factor=4, subsampling_conv_channels=-1,
                                       d_model=32, xscaling=False, untie_biases=False, conv_norm_type="layer_norm",
                                       conv_kernel_size=7), dec=lstm_decoder(), activation="sigmoid")),
        # Local (sliding-window) attention, as used for long audio.
        "fc_local_attn": (rnnt, model_config(
            tokenizer_dir, enc=encoder(self_attention_model="rel_pos_local_attn", att_context_size=[6, 6]),
            dec=lstm_decoder(), head="tdt", durations=(0, 1, 2))),
        # Local attention with an asymmetric window, where NeMo places the positions its own way.
        "fc_local_attn_asym": (rnnt, model_config(
            tokenizer_dir, enc=encoder(self_attention_model="rel_pos_local_attn", att_context_size=[5, 2], d_model=32),
            dec=lstm_decoder(), pred_hidden=32, joint_hidden=32)),
        # Cache-aware streaming FastConformer Transducer (NeMo's fastconformer_transducer_bpe_streaming.yaml, made
        # small): causal subsampling and convolutions, chunked_limited attention with the example's four
        # look-aheads, unnormalised features. The left context is 14 frames instead of 70, so that the 3 s clips
        # (38 frames) overflow the attention cache; batch norm in the convolution module (the example: layer norm,
        # which the hybrid below has).
        "fc_streaming_rnnt": (rnnt, model_config(
            tokenizer_dir, enc=streaming_encoder([[14, 13], [14, 6], [14, 1], [14, 0]], conv_norm_type="batch_norm"),
            dec=lstm_decoder(), normalize="NA")),
        # The hybrid RNN-T/CTC cache-aware streaming model (fastconformer_hybrid_transducer_ctc_bpe_streaming.yaml,
        # made small), with the multi-look-ahead att_context_size of NeMo's example comment.
        "fc_streaming_hybrid": ("EncDecHybridRNNTCTCBPEModel", model_config(
            tokenizer_dir, enc=streaming_encoder([[70, 13], [70, 6], [70, 1], [70, 0]]), dec=lstm_decoder(),
            hybrid=True, normalize="NA")),
    }


def streaming_encoder(att_context_size: list, **overrides) -> dict:
    """The encoder section of NeMo's cache-aware streaming FastConformer configs, at the fixtures' size."""
    settings = dict(n_layers=2, causal_downsampling=True, att_context_size=att_context_size,
                    att_context_style="chunked_limited", conv_context_size="causal", conv_norm_type="layer_norm")
    return encoder(**dict(settings, **overrides))


def full_size_specs(tokenizer_dir: str) -> dict[str, tuple[str, dict]]:
    """The architectures of parakeet-tdt-0.6b-v2, parakeet-rnnt-1.1b, parakeet-tdt-0.6b-v3 and
    parakeet-tdt_ctc-110m (from NeMo's published configs). ``tokenizer_dir`` holds one tokenizer directory per
    vocabulary size (:data:`FULL_SIZE_VOCABULARIES`), named by the size."""
    def fast_conformer(layers: int, d_model: int, features: int) -> dict:
        return encoder(feat_in=features, n_layers=layers, d_model=d_model, subsampling_conv_channels=256,
                       n_heads=8, conv_kernel_size=9, xscaling=True, dropout_emb=0.0)

    def tokens(size: int) -> str:
        return str(Path(tokenizer_dir) / str(size))
    return {
        "parakeet_tdt_0.6b_shape": (
            "EncDecRNNTBPEModel",
            model_config(tokens(1024), enc=dict(fast_conformer(24, 1024, 128), xscaling=False),
                         dec=lstm_decoder(layers=2), head="tdt", features=128, pred_hidden=640, joint_hidden=640,
                         normalize="NA")),
        "parakeet_rnnt_1.1b_shape": (
            "EncDecRNNTBPEModel",
            model_config(tokens(1024), enc=fast_conformer(42, 1024, 80), dec=lstm_decoder(layers=1),
                         features=80, pred_hidden=640, joint_hidden=640)),
        # v3: the v2 architecture with the multilingual 8,192-token vocabulary (its joint's output layer is 8x
        # v2's).
        "parakeet_tdt_0.6b_v3_shape": (
            "EncDecRNNTBPEModel",
            model_config(tokens(8192), enc=dict(fast_conformer(24, 1024, 128), xscaling=False),
                         dec=lstm_decoder(layers=2), head="tdt", features=128, pred_hidden=640, joint_hidden=640,
                         normalize="NA")),
        # The 110m hybrid: FastConformer-Large (17 layers of 512, no x-scaling), TDT and CTC heads, 80 mel bins.
        "parakeet_tdt_ctc_110m_shape": (
            "EncDecHybridRNNTCTCBPEModel",
            model_config(tokens(1024), enc=dict(fast_conformer(17, 512, 80), xscaling=False),
                         dec=lstm_decoder(layers=1), head="tdt",
                         features=80, pred_hidden=640, joint_hidden=640, hybrid=True)),
    }


#: The vocabulary sizes of the full-size models' tokenizers.
FULL_SIZE_VOCABULARIES = (1024, 8192)


# ------------------------------------------------------------------------------------------------ building

def train_tokenizer(directory: Path, vocab_size: int) -> None:
    """A tiny BPE sentencepiece model (identity normalisation keeps the file small)."""
    import sentencepiece as spm
    import collections, json as json_module, textwrap, argparse as argparse_module  # noqa: E401
    modules = [collections, json_module, textwrap, argparse_module, pydoc]
    if vocab_size > VOCAB:  # a parakeet-sized vocabulary needs more text: the members' docstrings too
        import importlib
        names = ["typing", "subprocess", "logging", "tarfile", "zipfile", "decimal", "datetime", "pathlib",
                 "inspect", "email", "asyncio", "unittest", "http.client", "argparse"]
        if vocab_size > 1024:  # parakeet-tdt-0.6b-v3's 8,192 tokens: the rest of the standard library too
            names += sorted(set(sys.stdlib_module_names) - set(names) - {"antigravity", "this", "idlelib",
                                                                           "turtledemo", "tkinter", "turtle"})
        for name in names:
            try:
                modules.append(importlib.import_module(name))
            except Exception:  # a module this interpreter lacks (or that cannot be imported here)
                continue
        modules += [member for m in list(modules) for member in vars(m).values() if callable(member)]
    text = "\n".join(pydoc.getdoc(m) for m in modules)
    sentences = [line.strip().lower() for line in text.splitlines() if len(line.split()) > 3]
    if vocab_size > 1024:  # a piece with "${" would be read as an interpolation when NeMo resolves its labels
        sentences = [sentence.replace("$", " ") for sentence in sentences]
    directory.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_prefix=str(directory / "tokenizer"),
                                   vocab_size=vocab_size, model_type="bpe", character_coverage=1.0,
                                   normalization_rule_name="identity", bos_id=-1, eos_id=-1, minloglevel=2)
    # NeMo's "bpe" tokenizer directory: the model, and its vocabulary as text.
    processor = spm.SentencePieceProcessor(model_file=str(directory / "tokenizer.model"))
    (directory / "vocab.txt").write_text("".join(processor.id_to_piece(i) + "\n" for i in range(processor.get_piece_size())))


def perturb(model: torch.nn.Module, generator: torch.Generator) -> None:
    """Move the parameters NeMo initialises to constants (zeros, ones) away from them, so each one matters."""
    with torch.no_grad():
        for name, tensor in list(model.named_parameters()) + list(model.named_buffers()):
            if name.startswith("preprocessor") or not tensor.is_floating_point():
                continue
            if "running_var" in name:
                tensor.copy_(0.5 + torch.rand(tensor.shape, generator=generator))
            elif "running_mean" in name or "pos_bias" in name or tensor.dim() == 1:
                tensor.add_(0.2 * torch.randn(tensor.shape, generator=generator))


def raise_blank_bias(model, head: str, clips: list[torch.Tensor], blank_outputs: list[int],
                     tokens_per_frame: float = 0.35) -> None:
    """Raise the blank outputs' biases until NeMo's greedy decoder emits about ``tokens_per_frame`` tokens per
    encoder frame on the clips.

    With random weights a model either emits the maximum at every frame or nothing: each emitted token moves the
    predictor to where the next one wins again. Shrinking the predictor's projection in the joint first makes
    the rate depend mostly on the frames, so that a bias in between exists.
    """
    with torch.no_grad():
        model.joint.pred.weight.mul_(0.1)
        bias = model.joint.joint_net[-1].bias
        original = bias.detach().clone()
        low, high, best = 0.0, 40.0, (float("inf"), 0.0)
        cache: dict = {}
        for _ in range(14):  # bisection on the added bias
            shift = (low + high) / 2
            bias.copy_(original)
            bias[blank_outputs] += shift
            outputs = nemo_outputs(model, head, clips, cache)
            rate = sum(map(len, outputs["tokens"])) / sum(e.shape[0] for e in outputs["encoder"])
            best = min(best, (abs(rate - tokens_per_frame), shift))
            low, high = (low, shift) if rate < tokens_per_frame else (shift, high)
        bias.copy_(original)
        bias[blank_outputs] += best[1]


def encode(model, samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``samples [N]`` -> NeMo encoder output ``[1, D, T']`` and length."""
    features, lengths = model.preprocessor(input_signal=samples[None], length=torch.tensor([len(samples)]))
    return model.encoder(audio_signal=features, length=lengths)


def load_clips(examples: Path) -> tuple[list[str], list[torch.Tensor]]:
    import soundfile as sf
    names, clips = [], []
    for name, start, end in CLIPS:
        data, rate = sf.read(examples / f"{name}.flac", dtype="int16")
        assert rate == 16000
        clips.append(torch.from_numpy(data[int(start * rate): int(end * rate)].copy()))
        names.append(f"{name}[{start}:{end}]")
    return names, clips


def nemo_outputs(model, head: str, clips: list[torch.Tensor], cache: dict | None = None) -> dict:
    """NeMo's features, encoder output and per-utterance greedy hypothesis for each clip.

    ``cache`` keeps the front end's and encoder's outputs between calls that change only the joint."""
    cache = {} if cache is None else cache
    from omegaconf import open_dict
    decoding = copy.deepcopy(model.cfg.decoding)
    with open_dict(decoding):
        decoding.strategy = "greedy"  # one utterance at a time
        decoding.greedy.max_symbols = MAX_SYMBOLS
        if head == "tdt":
            decoding.tdt_include_token_duration = True
    if hasattr(model, "cur_decoder"):
        model.change_decoding_strategy(decoding, decoder_type="rnnt", verbose=False)
    else:
        model.change_decoding_strategy(decoding, verbose=False)
    out = {"features": [], "encoder": [], "tokens": [], "timestamps": [], "durations": [], "text": [], "ctc_tokens": []}
    with torch.no_grad():
        for number, samples in enumerate(clips):
            if number not in cache:
                audio = samples.float() / 32768.0
                features, feature_len = model.preprocessor(input_signal=audio[None],
                                                           length=torch.tensor([len(audio)]))
                cache[number] = (features, feature_len, *model.encoder(audio_signal=features, length=feature_len))
            features, feature_len, enc, enc_len = cache[number]
            out["features"].append(features[0, :, : int(feature_len)].T.contiguous())
            out["encoder"].append(enc[0, :, : int(enc_len)].T.contiguous())
            hyp = model.decoding.rnnt_decoder_predictions_tensor(encoder_output=enc, encoded_lengths=enc_len,
                                                                 return_hypotheses=True)[0]
            tokens = [int(t) for t in hyp.y_sequence]
            out["tokens"].append(tokens)
            out["timestamps"].append([int(t) for t in hyp.timestamp])
            out["durations"].append([int(d) for d in getattr(hyp, "token_duration", None) or []])
            out["text"].append(model.tokenizer.ids_to_text(tokens))
            if hasattr(model, "ctc_decoder"):
                log_probs = model.ctc_decoder(encoder_output=enc)  # [1, T', V + 1]
                best = log_probs[0, : int(enc_len)].argmax(-1).tolist()
                blank = log_probs.shape[-1] - 1
                collapsed = [t for i, t in enumerate(best) if t != blank and (i == 0 or best[i - 1] != t)]
                out["ctc_tokens"].append(collapsed)
    return out


def nemo_streaming_outputs(model, clips: list[torch.Tensor]) -> list[dict]:
    """For each look-ahead of ``encoder.att_context_size`` (NeMo's ``set_default_att_context_size``), each clip
    alone: the encoder output of NeMo's offline forward, the encoder output of every ``cache_aware_stream_step``
    as NeMo's ``CacheAwareStreamingAudioBuffer`` feeds it the clip's features (no online normalisation, no
    ``pad_and_drop_preencoded``; nothing dropped after the subsampling in the first step, as NeMo's
    cache-aware streaming example does), and the tokens of NeMo's cache-aware streaming transcription
    (``conformer_stream_step`` with the hypotheses carried from chunk to chunk, ``greedy_batch`` decoding)."""
    from omegaconf import open_dict
    from nemo.collections.asr.parts.utils.streaming_utils import CacheAwareStreamingAudioBuffer

    decoding = copy.deepcopy(model.cfg.decoding)
    with open_dict(decoding):
        decoding.strategy = "greedy_batch"
        decoding.greedy.max_symbols = MAX_SYMBOLS
    if hasattr(model, "cur_decoder"):
        model.change_decoding_strategy(decoding, decoder_type="rnnt", verbose=False)
    else:
        model.change_decoding_strategy(decoding, verbose=False)
    encoder = model.encoder
    results = []
    for context in [list(c) for c in encoder.att_context_size_all]:
        encoder.set_default_att_context_size(context)
        cfg = encoder.streaming_cfg
        result = {"att_context_size": context, "offline_encoder": [], "chunks": [], "tokens": [], "text": [],
                  "streaming_cfg": {"chunk_size": list(cfg.chunk_size), "shift_size": list(cfg.shift_size),
                                    "pre_encode_cache_size": list(cfg.pre_encode_cache_size),
                                    "drop_extra_pre_encoded": int(cfg.drop_extra_pre_encoded),
                                    "last_channel_cache_size": int(cfg.last_channel_cache_size),
                                    "valid_out_len": int(cfg.valid_out_len)}}
        with torch.no_grad():
            for samples in clips:
                audio = samples.float() / 32768.0
                features, feature_len = model.preprocessor(input_signal=audio[None], length=torch.tensor([len(audio)]))
                encoded, encoded_len = encoder(audio_signal=features, length=feature_len)
                result["offline_encoder"].append(encoded[0, :, : int(encoded_len)].T.contiguous())
                chunks, hypotheses = [], None
                for use_decoder in (False, True):
                    stream = CacheAwareStreamingAudioBuffer(model, online_normalization=False,
                                                            pad_and_drop_preencoded=False)
                    stream.append_audio(audio.numpy())
                    caches = encoder.get_initial_cache_state(batch_size=1)
                    previous_tokens = None
                    for step, (chunk, chunk_len) in enumerate(stream):
                        drop = 0 if step == 0 else cfg.drop_extra_pre_encoded
                        last = stream.is_buffer_empty()
                        if use_decoder:
                            (previous_tokens, _, *caches, hypotheses) = model.conformer_stream_step(
                                processed_signal=chunk, processed_signal_length=chunk_len, cache_last_channel=caches[0],
                                cache_last_time=caches[1], cache_last_channel_len=caches[2], keep_all_outputs=last,
                                previous_hypotheses=hypotheses, previous_pred_out=previous_tokens,
                                drop_extra_pre_encoded=drop, return_transcription=True)
                        else:
                            out, out_len, *caches = encoder.cache_aware_stream_step(
                                processed_signal=chunk, processed_signal_length=chunk_len, cache_last_channel=caches[0],
                                cache_last_time=caches[1], cache_last_channel_len=caches[2], keep_all_outputs=last,
                                drop_extra_pre_encoded=drop)
                            chunks.append(out[0, :, : int(out_len[0])].T.contiguous())
                tokens = [int(t) for t in hypotheses[0].y_sequence]
                result["chunks"].append(chunks)
                result["tokens"].append(tokens)
                result["text"].append(model.tokenizer.ids_to_text(tokens))
        results.append(result)
    encoder.set_default_att_context_size(list(encoder.att_context_size_all[0]))
    return results


def build(name: str, class_name: str, config: dict, head: str, clips: list[torch.Tensor], output: Path,
          seed: int, full_size: bool = False) -> dict:
    from omegaconf import OmegaConf
    import nemo.collections.asr as nemo_asr
    torch.manual_seed(seed)
    model = getattr(nemo_asr.models, class_name)(cfg=OmegaConf.create(config)).eval()
    generator = torch.Generator().manual_seed(seed)
    perturb(model, generator)
    vocab = model.tokenizer.vocab_size
    big = len(config["loss"].get("multiblank_rnnt_kwargs", {}).get("big_blank_durations", []))
    raise_blank_bias(model, head, clips, list(range(vocab, vocab + 1 + big)))
    path = output / f"{name}.nemo"
    model.save_to(str(path))
    started = time.perf_counter()
    outputs = nemo_outputs(model, head, clips)
    outputs["nemo_seconds"] = time.perf_counter() - started
    outputs.update(head=head, max_symbols=MAX_SYMBOLS, model_class=class_name)
    if name in STREAMING_MODELS:
        outputs["streaming"] = nemo_streaming_outputs(model, clips)
    if not full_size:
        if name not in FEATURE_MODELS:
            outputs["features"] = []
        torch.save(outputs, output / f"{name}.outputs.pt")
    return outputs


def main() -> int:
    args = parse_args()
    torch.set_num_threads(1)
    repo = Path(__file__).resolve().parents[1]
    names, clips = load_clips(repo / "examples")
    if args.full_size:  # a parakeet-sized encoder takes seconds per clip on a CPU: one clip
        names, clips = names[:1], clips[:1]
    output = Path(args.full_size or args.output)
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        if args.full_size:
            for size in FULL_SIZE_VOCABULARIES:
                train_tokenizer(Path(tmp) / "tokenizer" / str(size), size)
        else:
            train_tokenizer(Path(tmp) / "tokenizer", VOCAB)
        specs = (full_size_specs if args.full_size else model_specs)(str(Path(tmp) / "tokenizer"))
        if args.only:
            specs = {n: specs[n] for n in args.only.split(",")}
        if not args.full_size:
            torch.save({"names": names, "samples": clips}, output / "clips.pt")
        summary = {}
        for name, (class_name, config) in specs.items():
            loss = config["loss"]["loss_name"]
            head = {"tdt": "tdt", "multiblank_rnnt": "multiblank"}.get(loss, "rnnt")
            seed = args.seed + zlib.crc32(name.encode()) % 10000  # the same whichever models are built
            for attempt in range(8):
                # Random weights sometimes emit nothing on one clip and the maximum on another (the encoder
                # frames of a clip are much alike): take the first seed whose clips all have a few tokens.
                outputs = build(name, class_name, config, head, clips, output, seed + attempt, bool(args.full_size))
                counts = [len(t) / e.shape[0] for t, e in zip(outputs["tokens"], outputs["encoder"])]
                if args.full_size or (min(counts[:3]) >= 0.1 and max(counts) <= 2.0):
                    break
            if args.full_size:  # a parakeet-sized model: keep its outputs next to it, with the clips
                torch.save(dict(outputs, names=names, samples=clips), output / f"{name}.outputs.pt")
            summary[name] = {"tokens": [len(t) for t in outputs["tokens"]],
                             "frames": [e.shape[0] for e in outputs["encoder"]],
                             "size_mb": round(os.path.getsize(output / f"{name}.nemo") / 1e6, 2),
                             "nemo_seconds": round(outputs["nemo_seconds"], 2)}
            print(name, json.dumps(summary[name]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
