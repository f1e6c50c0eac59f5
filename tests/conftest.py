import os
import sys

import pytest
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


_EXIT_STATUS = pytest.StashKey[int]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    session.config.stash[_EXIT_STATUS] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # One process loads Ray, ONNX Runtime, sherpa-onnx, Triton and uvicorn; in a full run a native thread of one of
    # them once crashed during interpreter shutdown (segfault, exit 139) after every test had passed and pytest had
    # reported. When pytest runs as the program, end the process here with pytest's own status and skip that
    # shutdown: everything is reported and written by now. Under pytest.main() in another program, nothing changes.
    program = sys.argv[0] if sys.argv else ""
    as_program = "pytest" in (os.path.basename(program), os.path.basename(os.path.dirname(program)))
    if as_program and _EXIT_STATUS in config.stash:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(config.stash[_EXIT_STATUS])
