"""A parakeet-110m-sized NeMo cache-aware streaming FastConformer Transducer with random weights, for
``bench/nemo_streaming.py``.

The architecture of NeMo's ``fastconformer_transducer_bpe_streaming.yaml`` at its published size (the one of
``stt_en_fastconformer_hybrid_large_streaming_multi``, about 114M parameters): 17 layers, d_model 512, 8 heads,
8x ``dw_striding`` causal subsampling (256 channels), causal convolutions of kernel 9 with layer norm,
``chunked_limited`` attention with the look-aheads ``[[70, 13], [70, 6], [70, 1], [70, 0]]``, 80 mel bins not
normalised (``normalize: NA``), an LSTM predictor of 640, a joint of 640 and a 1024-token sentencepiece
tokenizer. Weights are NeMo's random initialisation, perturbed and with the blank bias raised as
``recipes/nemo_fixtures.py`` does for its models (about 0.35 tokens per encoder frame on its first clip).

Runs in NeMo's virtualenv, from the repository root (writes ``DIR/fc_streaming_110m.nemo`` and its outputs)::

    OMP_NUM_THREADS=1 /work/nemo-venv/bin/python recipes/nemo_streaming_full.py /tmp/nemo_stream_full
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import zlib
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import nemo_fixtures as fixtures  # noqa: E402

NAME = "fc_streaming_110m"
CONTEXTS = [[70, 13], [70, 6], [70, 1], [70, 0]]


def spec(tokenizer_dir: str) -> tuple[str, dict]:
    """NeMo model class and config of the parakeet-110m-sized cache-aware streaming Transducer."""
    enc = fixtures.streaming_encoder(CONTEXTS, n_layers=17, d_model=512, n_heads=8, subsampling_conv_channels=256,
                                     conv_kernel_size=9, conv_norm_type="layer_norm", dropout_emb=0.0)
    return "EncDecRNNTBPEModel", fixtures.model_config(tokenizer_dir, enc=enc, dec=fixtures.lstm_decoder(layers=1),
                                                        pred_hidden=640, joint_hidden=640, normalize="NA")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", help="directory for the .nemo (outside git)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    repo = Path(__file__).resolve().parents[1]
    names, clips = fixtures.load_clips(repo / "examples")
    names, clips = names[:1], clips[:1]
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fixtures.train_tokenizer(Path(tmp) / "tokenizer", 1024)
        class_name, config = spec(str(Path(tmp) / "tokenizer"))
        seed = args.seed + zlib.crc32(NAME.encode()) % 10000
        outputs = fixtures.build(NAME, class_name, config, "rnnt", clips, output, seed, full_size=True)
    torch.save(dict(outputs, names=names, samples=clips), output / f"{NAME}.outputs.pt")
    summary = {"tokens": [len(t) for t in outputs["tokens"]], "frames": [e.shape[0] for e in outputs["encoder"]],
               "size_mb": round(os.path.getsize(output / f"{NAME}.nemo") / 1e6, 2)}
    print(NAME, json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
