#!/usr/bin/env bash
# Reproduces the three bundled models (docs/models.md has the times and results of each stage).
# Every step resumes where it stopped when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
DATA=data/synth
source recipes/bundled_models.sh

# 1. Corpus (needs `apt-get install espeak-ng bible-kjv fortunes` and `pip install -c constraints.txt -e
#    '.[recipes]'`): the plan of every utterance, then the audio. 52,000 training utterances (46,000 espeak-ng,
#    6,000 Piper), 200 dev, 800 test.
$PY recipes/synthetic_corpus.py text --out $DATA
$PY recipes/synthetic_corpus.py audio --out $DATA --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --audio-format wav

# 2. Stage 1, on one GPU: the three models at once, 19 minutes of training each (BUNDLED_TRAIN_OPTIONS).
#    The bundled runs used the workplace's borrowed H100 through recipes/gpu/device.sh (which synthesises the
#    training audio there from the same plan, with the tools recipes/gpu/make_kit.sh packs); elsewhere:
for name in "${BUNDLED_NAMES[@]}"; do
    # shellcheck disable=SC2046
    $TRANSDEC train --train-manifest $DATA/train.jsonl --dev-manifest $DATA/dev.jsonl --exp-dir exp/gpu1/$name \
        "${BUNDLED_TRAIN_OPTIONS[@]}" $(bundled_head_options "$name") --budget 19 &
done
wait
for name in "${BUNDLED_NAMES[@]}"; do
    $TRANSDEC average --exp-dir exp/gpu1/$name --last 5 --half --output exp/gpu1/$name.pt
done

# 3. Stage 2, on this 2-core CPU: each model continues (weights and tokenizer) with smaller batches, three
#    runs at once, one thread each. Piper utterances are repeated three times in its manifest (only the
#    first 3,081 of them were synthesised here; see docs/models.md).
$PY - <<'PY'
import json
lines = open("data/synth/train.jsonl").read().splitlines()
with open("data/synth/train_stage2.jsonl", "w") as f:
    for line in lines:
        f.write((line + "\n") * (3 if json.loads(line)["voice"] == "piper" else 1))
PY
for name in "${BUNDLED_NAMES[@]}"; do
    OMP_WAIT_POLICY=PASSIVE $TRANSDEC train --train-manifest $DATA/train_stage2.jsonl --dev-manifest $DATA/dev.jsonl \
        --exp-dir exp/cpu2/$name --init-from exp/gpu1/$name.pt "${BUNDLED_CPU_OPTIONS[@]}" \
        $(bundled_head_options "$name") --budget 70 &
done
wait

# 4. The bundled files: the last five checkpoints averaged, float16; then the report for docs/models.md.
for name in "${BUNDLED_NAMES[@]}"; do
    $TRANSDEC average --exp-dir exp/cpu2/$name --last 5 --half --output src/transdec/pretrained/$name.pt
done
$PY recipes/model_report.py --manifest $DATA/test.jsonl --models "${BUNDLED_NAMES[@]}" --histogram docs/emissions.png
