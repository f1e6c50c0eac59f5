import os
import sys

import torch
from hypothesis import HealthCheck, settings

# The tests run many tiny tensor operations; with two OpenMP threads they slow down several-fold as soon
# as anything else uses a core (see docs/benchmarks.md). Results do not depend on the thread count.
torch.set_num_threads(1)

# Property tests are derandomized so that CI and developers see the same examples.
settings.register_profile(
    "default", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow], print_blob=True
)
settings.register_profile("thorough", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

sys.path.insert(0, os.path.dirname(__file__))
