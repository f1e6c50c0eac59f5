#!/usr/bin/env bash
# Reproduces the three bundled models on a 2-core CPU (docs/models.md has the times and results).
# Every step resumes where it stopped when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
DATA=data/synth
source recipes/bundled_models.sh
export OMP_WAIT_POLICY=PASSIVE  # idle OpenMP threads must not spin on a shared 2-core machine

# 1. Corpus (needs `apt-get install espeak-ng bible-kjv fortunes` and `pip install -c constraints.txt -e
#    '.[recipes]'`): the plan of every utterance, then the audio. The bundled runs had the 46,000 espeak-ng
#    training utterances and the first 3,081 of the 6,000 Piper ones (synthesis was stopped there to train).
$PY recipes/synthetic_corpus.py text --out $DATA
$PY recipes/synthetic_corpus.py audio --out $DATA --splits dev test
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits dev test
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits train --audio-format wav
# Piper is the minority voice: its utterances are listed three times.
$PY - <<'PY'
import json
with open("data/synth/train_cpu.jsonl", "w") as f:
    for line in open("data/synth/train.jsonl").read().splitlines():
        f.write((line + "\n") * (3 if json.loads(line)["voice"] == "piper" else 1))
PY
COMMON=(--train-manifest $DATA/train_cpu.jsonl --dev-manifest $DATA/dev.jsonl "${BUNDLED_MODEL_OPTIONS[@]}"
        "${BUNDLED_CPU_OPTIONS[@]}")

# 2. RNN-T from scratch with both threads: 50 minutes with the decay over those 50 minutes, then resumed twice
#    with longer schedules (the resumed learning rate jumps back up: a warm restart). The bundled model had
#    these three pieces: 3 minutes on a 150-minute schedule, then to 113 minutes in all at a peak of 2.5e-3
#    (dev WER 65% after the first piece, 39% at the end; docs/models.md).
# shellcheck disable=SC2046
$TRANSDEC train "${COMMON[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 50
# shellcheck disable=SC2046
$TRANSDEC train "${COMMON[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 150 \
    --time-limit 3
# shellcheck disable=SC2046
$TRANSDEC train "${COMMON[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 113 \
    --peak-lr 2.5e-3
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-rnnt --last 5 --output exp/cpu3/tiny-en-rnnt.pt

# 3. TDT (all RNN-T weights; its duration outputs start fresh) and multi-blank (the RNN-T encoder; stateless
#    predictor and joint start fresh) from the RNN-T model, 45 minutes each, two runs at once, one thread each.
# shellcheck disable=SC2046
$TRANSDEC train "${COMMON[@]}" $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu3/tiny-en-tdt --budget 45 \
    --threads 1 --warmup-steps 200 --init-from exp/cpu3/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${COMMON[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu3/tiny-en-multiblank \
    --budget 45 --threads 1 --warmup-steps 200 --init-from exp/cpu3/tiny-en-rnnt.pt --init-encoder-only &
wait

# 4. The bundled files: the last five checkpoints averaged, float16; then the report for docs/models.md.
for name in "${BUNDLED_NAMES[@]}"; do
    $TRANSDEC average --exp-dir exp/cpu3/$name --last 5 --half --output src/transdec/pretrained/$name.pt
done
$PY recipes/model_report.py --manifest $DATA/test.jsonl --models "${BUNDLED_NAMES[@]}" --histogram docs/emissions.png
