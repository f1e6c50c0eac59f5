"""Model files bundled with transdec; load them with :func:`transdec.load_model`."""
