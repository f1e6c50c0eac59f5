"""The transposed weight copies of decoding's small matrix products (transdec.model.decoding_weights)."""

import torch

from transdec.model.decoding_weights import linear, transposed


def test_linear_equals_the_module_and_follows_weight_updates() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Linear(6, 4).double()
    x = torch.randn(3, 2, 6, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(linear(x, layer), layer(x), rtol=0, atol=1e-12)
        assert transposed(layer, "weight").is_contiguous()
    optimiser = torch.optim.SGD(layer.parameters(), lr=0.5)
    layer(x).sum().backward()
    optimiser.step()  # an in-place update: the cached copy must be rebuilt
    with torch.no_grad():
        torch.testing.assert_close(linear(x, layer), layer(x), rtol=0, atol=1e-12)
    layer.float()  # a cast reallocates the weight
    with torch.inference_mode():
        torch.testing.assert_close(linear(x.float(), layer), layer(x.float()))


def test_gradients_flow_through_the_weight_itself() -> None:
    layer = torch.nn.Linear(5, 3)
    assert not transposed(layer, "weight").is_contiguous()  # the view, not a copy
    linear(torch.randn(2, 5), layer).sum().backward()
    assert layer.weight.grad is not None and layer.bias.grad is not None


def test_a_frozen_layer_after_inference_mode_decoding_still_trains_what_feeds_it() -> None:
    """A frozen weight is saved for its input's gradient: with autograd on it must not be the copy made while
    decoding under inference mode."""
    layer = torch.nn.Linear(5, 3).requires_grad_(False)
    with torch.inference_mode():
        linear(torch.randn(2, 5), layer)  # caches a copy, an inference tensor
    x = torch.randn(2, 5, requires_grad=True)
    linear(x, layer).sum().backward()
    torch.testing.assert_close(x.grad, layer.weight.sum(0).expand(2, 5))
