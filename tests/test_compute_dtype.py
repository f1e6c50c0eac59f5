"""The predictor and joint in bfloat16 / float16 (``DecodingConfig.compute_dtype``)."""

import pytest
import torch

import transdec
from transdec.decoding import DecodingConfig, decode
from transdec.protocol import HeadSpec
from transdec.model.synthetic import random_decoder, random_encoder_output

EXAMPLES = ["examples/piper_allens_axiom.flac", "examples/piper_are_you_making_this_up.flac"]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_bundled_model_transcribes_the_examples_alike_in_lower_precision(dtype):
    model = transdec.load_model("tiny-en-rnnt")
    full = model.transcribe(EXAMPLES)
    lower = model.transcribe(EXAMPLES, DecodingConfig(compute_dtype=dtype))
    assert [t.text for t in lower] == [t.text for t in full]


@pytest.mark.parametrize("kind", ["rnnt", "tdt", "multiblank"])
def test_scores_stay_in_the_encoder_dtype_and_the_model_is_untouched(kind):
    head = HeadSpec(kind, 12, durations=(0, 1, 2) if kind == "tdt" else (),
                    big_blank_durations=(2, 4) if kind == "multiblank" else ())
    model = random_decoder(head, blank_rate=0.6, seed=0)
    frames, lengths = random_encoder_output([20, 7], 16, seed=1)
    result = decode(model, frames, lengths, DecodingConfig(compute_dtype=torch.bfloat16))
    assert result.hyps.scores.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in model.parameters())
    assert all(len(h.tokens) == len(h.timestamps) for h in result.hypotheses())
