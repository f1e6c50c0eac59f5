"""Conformer encoder and subsampling: output lengths, batch invariance under padding, configuration checks."""

from __future__ import annotations

import pytest
import torch

from transdec.model.conformer import ConformerConfig, ConformerEncoder
from transdec.model.subsampling import ConvSubsampling, strided_length


def small_config(**overrides) -> ConformerConfig:
    options = dict(feature_dim=80, model_dim=32, num_layers=2, num_heads=2, conv_kernel=5,
                   subsampling_channels=8, dropout=0.0)
    return ConformerConfig(**{**options, **overrides})


@pytest.mark.parametrize("factor", [4, 8])
@pytest.mark.parametrize("kind", ["dw_striding", "striding"])
def test_subsampling_output_length_matches_frames(factor: int, kind: str) -> None:
    torch.manual_seed(0)
    sub = ConvSubsampling(80, 16, factor=factor, kind=kind, channels=4).double()
    for frames in [1, 2, 7, 8, 9, 31, 64, 65]:
        out, lengths = sub(torch.randn(1, frames, 80, dtype=torch.float64), torch.tensor([frames]))
        assert out.shape[1] == lengths.item() == -(-frames // factor)  # ceil(frames / factor)


def test_strided_length_is_ceil_division() -> None:
    lengths = torch.arange(0, 100)
    assert torch.equal(strided_length(lengths, 3), (lengths + 7) // 8)


@pytest.mark.parametrize("factor,kind,context", [(8, "dw_striding", None), (4, "striding", None), (8, "dw_striding", 2)])
def test_encoder_output_does_not_depend_on_batch_padding(factor: int, kind: str, context: int | None) -> None:
    torch.manual_seed(1)
    encoder = ConformerEncoder(small_config(subsampling_factor=factor, subsampling=kind,
                                            attention_context=context)).double().eval()
    lengths = torch.tensor([57, 13, 40, 1])
    features = torch.randn(4, 57, 80, dtype=torch.float64)
    features[1, 13:] = 1e3  # whatever the padding holds must not leak into the valid frames
    encoded, out_lengths = encoder(features, lengths)
    for i, length in enumerate(lengths.tolist()):
        alone, alone_length = encoder(features[i : i + 1, :length], lengths[i : i + 1])
        assert alone_length.item() == out_lengths[i].item()
        torch.testing.assert_close(encoded[i, : out_lengths[i]], alone[0], rtol=0, atol=1e-10)
        assert torch.all(encoded[i, out_lengths[i] :] == 0)


@pytest.mark.parametrize("factor", [4, 8])
def test_local_attention_bounds_what_a_frame_depends_on(factor: int) -> None:
    """Changing the input at one feature frame changes exactly the output frames within the receptive field
    (on both sides; the subsampling front end's margin is a fraction of a frame, so the bound is tight to 1)."""
    torch.manual_seed(3)
    encoder = ConformerEncoder(small_config(subsampling_factor=factor, attention_context=3)).double().eval()
    field = encoder.receptive_field
    assert field == 2 * (3 + 5 // 2) + 1
    frames = 60 * factor
    features = torch.randn(1, frames, 80, dtype=torch.float64)
    lengths = torch.tensor([frames])
    base, _ = encoder(features, lengths)
    changed = features.clone()
    at = 30 * factor  # the first feature frame of encoder frame 30
    changed[0, at] += 1.0
    moved, _ = encoder(changed, lengths)
    differs = ((moved - base).abs().amax(-1) > 1e-12)[0].nonzero().flatten()
    assert differs.min() >= 30 - field and differs.max() <= 30 + field
    assert differs.min() <= 30 - field + 1 and differs.max() >= 30 + field - 1
    full, _ = ConformerEncoder(small_config(subsampling_factor=factor)).double().eval()(features, lengths)
    assert full.shape == base.shape


def test_encoder_gradients_reach_every_parameter() -> None:
    torch.manual_seed(2)
    encoder = ConformerEncoder(small_config())
    encoded, _ = encoder(torch.randn(2, 40, 80), torch.tensor([40, 30]))
    encoded.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in encoder.parameters())


def test_config_checks() -> None:
    with pytest.raises(ValueError, match="heads"):
        ConformerConfig(model_dim=30, num_heads=4)
    with pytest.raises(ValueError, match="odd"):
        ConformerConfig(conv_kernel=4)
    with pytest.raises(ValueError, match="attention_context"):
        ConformerConfig(attention_context=0)
    with pytest.raises(ValueError, match="4 or 8"):
        ConvSubsampling(80, 16, factor=2)


@pytest.mark.parametrize("kind", ["dw_striding", "striding"])
def test_subsampling_layouts_give_the_same_output(kind: str) -> None:
    torch.manual_seed(0)
    subsampling = ConvSubsampling(80, 32, 8, kind).double()
    features, lengths = torch.randn(3, 50, 80, dtype=torch.float64), torch.tensor([50, 31, 7])
    channels_last, _ = subsampling(features, lengths)
    subsampling.set_memory_format(torch.contiguous_format)
    contiguous, _ = subsampling(features, lengths)
    torch.testing.assert_close(contiguous, channels_last, rtol=0, atol=1e-12)


@pytest.mark.parametrize("chunk_bytes", [1, 1_300_000, 2**40])
def test_subsampling_without_autograd_in_row_groups_gives_the_same_output(chunk_bytes: int) -> None:
    """Inference subsamples groups of rows in place (one row, two rows, all); autograd takes the plain path."""
    torch.manual_seed(0)
    subsampling = ConvSubsampling(80, 32, 8).double()
    features, lengths = torch.randn(5, 60, 80, dtype=torch.float64), torch.tensor([60, 31, 7, 60, 1])
    plain, plain_lengths = subsampling(features, lengths)
    kept = features.clone()
    subsampling.chunk_bytes = chunk_bytes
    with torch.inference_mode():
        grouped, grouped_lengths = subsampling(features, lengths)
    assert torch.equal(features, kept)  # the caller's features are not written to
    assert torch.equal(grouped_lengths, plain_lengths)
    torch.testing.assert_close(grouped, plain, rtol=0, atol=1e-12)


def test_under_cpu_autocast_only_linear_layers_take_bfloat16() -> None:
    """``--bf16`` on a CPU: convolutions and attention stay float32 (faster there), linear layers go bf16."""
    torch.manual_seed(4)
    encoder = ConformerEncoder(small_config()).eval()
    seen: dict[str, set[torch.dtype]] = {}

    def record(module, inputs, output) -> None:
        seen.setdefault(type(module).__name__, set()).add(output.dtype)

    for module in encoder.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            module.register_forward_hook(record)
    attention_outputs: set[torch.dtype] = set()  # what the attention core hands its output projection
    depthwise_outputs: set[torch.dtype] = set()  # the depthwise convolution is called as a function
    for block in encoder.blocks:
        block.attention.out.register_forward_pre_hook(lambda module, inputs: attention_outputs.add(inputs[0].dtype))
        block.conv.depthwise_norm.register_forward_pre_hook(
            lambda module, inputs: depthwise_outputs.add(inputs[0].dtype))
    features, lengths = torch.randn(2, 50, 80), torch.tensor([50, 31])
    reference, _ = encoder(features, lengths)
    assert seen == {"Conv2d": {torch.float32}, "Linear": {torch.float32}}
    seen.clear()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        mixed, _ = encoder(features, lengths)
    assert seen == {"Conv2d": {torch.float32}, "Linear": {torch.bfloat16}}
    assert attention_outputs == depthwise_outputs == {torch.float32}
    torch.testing.assert_close(mixed.float(), reference, rtol=0.05, atol=0.05)
