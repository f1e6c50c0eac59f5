"""Copies a model file with new Conformer blocks inserted into its encoder, computing the same function.

    .venv/bin/python recipes/grow_encoder.py IN.pt OUT.pt --after 1 3

inserts one block after each listed block (0-based, in the original numbering): four blocks with
``--after 1 3`` become six. Continued training then starts from the trained model rather than from scratch.

A new block starts as the identity. Its residual branches start at zero (the last linear layer of both feed-forward
modules, of the attention and of the convolution module are zero; the layers before them keep their random
initialisation, seeded by ``--seed``, so the branches start learning as soon as those weights move). Every block
ends with a layer norm, which a zero branch alone would not undo, so the block it follows hands over its final
norm's gain and bias to the new block and keeps a plain normalisation (gain 1, bias 0): the new block's norm then
receives an already normalised input, which it leaves as it is before applying the moved gain and bias. Outputs
agree with the original model's up to the layer norms' epsilon (checked here on random input).
"""

from __future__ import annotations

import argparse
import copy

import torch

from transdec.loading import load_model
from transdec.model.checkpoint import save_model
from transdec.model.conformer import ConformerBlock
from transdec.model.transducer_model import TransducerModel


def identity_block(template: ConformerBlock) -> ConformerBlock:
    """A fresh block shaped like ``template`` whose residual branches output zero."""
    block = copy.deepcopy(template)
    for module in block.modules():
        if isinstance(module, torch.nn.Linear | torch.nn.Conv1d | torch.nn.LayerNorm):
            module.reset_parameters()
    for last in (block.ff1.net[4], block.ff2.net[4], block.attention.out, block.conv.pointwise_out):
        torch.nn.init.zeros_(last.weight)
        torch.nn.init.zeros_(last.bias)
    return block


def grow(model: TransducerModel, after: list[int]) -> TransducerModel:
    """A copy of ``model`` with an identity block inserted after each block index in ``after``."""
    config = copy.deepcopy(model.config)
    old_blocks = list(model.encoder.blocks)
    if any(not 0 <= i < len(old_blocks) for i in after) or len(set(after)) != len(after):
        raise SystemExit(f"--after must name distinct blocks among 0..{len(old_blocks) - 1}, got {after}")
    config.encoder.num_layers = len(old_blocks) + len(after)
    grown = TransducerModel(config, model.tokenizer)
    result = grown.load_state_dict({name: w for name, w in model.state_dict().items() if ".blocks." not in name},
                                   strict=False)
    assert not result.unexpected_keys and all(".blocks." in name for name in result.missing_keys)
    blocks = []
    for i, block in enumerate(old_blocks):
        block = copy.deepcopy(block)
        blocks.append(block)
        if i in after:
            new = identity_block(block)
            new.norm.load_state_dict(block.norm.state_dict())
            block.norm.reset_parameters()
            blocks.append(new)
    grown.encoder.blocks = torch.nn.ModuleList(blocks)
    return grown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model")
    parser.add_argument("output")
    parser.add_argument("--after", type=int, nargs="+", required=True, metavar="BLOCK")
    parser.add_argument("--seed", type=int, default=0, help="seeds the new blocks' random layers")
    args = parser.parse_args()
    model = load_model(args.model).double().eval()
    torch.manual_seed(args.seed)
    grown = grow(model, args.after).double().eval()
    features = torch.randn(2, 400, model.config.encoder.feature_dim, dtype=torch.float64)
    lengths = torch.tensor([400, 250])
    with torch.no_grad():
        before, _ = model.encoder(features, lengths)
        after, _ = grown.encoder(features, lengths)
    difference = (before - after).abs().max().item()
    if difference > 1e-3:
        raise SystemExit(f"the grown encoder differs from the original by {difference:.2e}")
    save_model(grown.float(), args.output)
    print(f"wrote {args.output}: {len(model.encoder.blocks)} -> {len(grown.encoder.blocks)} blocks, "
          f"{sum(p.numel() for p in grown.parameters()) / 1e6:.2f} M parameters, "
          f"largest output difference {difference:.1e}")


if __name__ == "__main__":
    main()
