"""One predictor step of a 2-layer LSTM of width 640 on CPU: nn.LSTM vs transdec's explicit cell.

``nn.LSTM`` called with one time step dispatches to oneDNN on CPU; this shows what that costs in a
decoding loop, with and without oneDNN, next to :meth:`transdec.model.LSTMPredictor.step`. All
variants run in one process, interleaved per batch size and thread count.
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

from transdec.model import LSTMPredictor


def microseconds_per_call(function, repeats: int) -> float:
    for _ in range(10):
        function()
    start = time.perf_counter()
    for _ in range(repeats):
        function()
    return (time.perf_counter() - start) / repeats * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batch-sizes", default="1,4,32")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()

    warnings.filterwarnings("ignore", message=".*TF32.*")  # torch's notice about Intel GPUs, irrelevant here
    torch.manual_seed(0)
    predictor = LSTMPredictor(vocab_size=1025, hidden_size=640, num_layers=2).eval()
    print(f"# torch {torch.__version__}; microseconds per step; 2-layer LSTM 640, float32")
    print("| threads | B | nn.LSTM (default, oneDNN) | nn.LSTM, oneDNN off | transdec step | nn.LSTM / transdec |")
    print("|---|---|---|---|---|---|")
    with torch.inference_mode():
        for threads in (int(t) for t in args.threads.split(",")):
            torch.set_num_threads(threads)
            for batch_size in (int(b) for b in args.batch_sizes.split(",")):
                labels = torch.randint(0, 1024, (batch_size,))
                state = predictor.initial_state(batch_size)
                embedded = predictor.embedding(labels).unsqueeze(1)

                def lstm_module():
                    return predictor.lstm(embedded, state)

                def without_onednn():
                    with torch.backends.mkldnn.flags(enabled=False):
                        return predictor.lstm(embedded, state)

                default = microseconds_per_call(lstm_module, args.repeats)
                no_onednn = microseconds_per_call(without_onednn, args.repeats)
                ours = microseconds_per_call(lambda: predictor.step(labels, state), args.repeats)
                print(f"| {threads} | {batch_size} | {default:.0f} | {no_onednn:.0f} | {ours:.0f} | {default / ours:.1f}x |")


if __name__ == "__main__":
    main()
