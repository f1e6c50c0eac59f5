"""Training transdec models: data, SpecAugment, the training loop and checkpoint averaging."""
