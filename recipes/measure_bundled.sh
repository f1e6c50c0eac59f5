#!/usr/bin/env bash
# The measurements behind docs/models.md and docs/benchmarks.md for the bundled models, one after another
# (run it on an otherwise idle machine): the held-out results table and emission histogram, where the RNN-T's
# errors are, `transdec evaluate` with both greedy strategies, the WIND tables and jump histogram, the one-hour
# recording, WER on one-minute recordings, and training steps and `transdec evaluate` under each memory allocator.
# Outputs go to exp/measure/ (one text file per step; a step whose file exists is skipped, so delete the
# file to measure again). Needs the corpus plans, the held-out test sets and the train split's manifest
# (recipes/train_bundled.sh, stages 0-2).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
TEST=data/synth/test.jsonl
OUT=exp/measure
source recipes/bundled_models.sh
export OMP_WAIT_POLICY=PASSIVE
mkdir -p $OUT

step() {  # step NAME COMMAND...: run COMMAND into $OUT/NAME.txt unless that file exists
    local name=$1
    shift
    [[ -s $OUT/$name.txt ]] && { echo "skip $name (exists)"; return; }
    echo "== $name: $*"
    { echo "# commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' (uncommitted changes)'), $(date -u +%FT%TZ)"
      echo "# $*"
      "$@"; } > "$OUT/$name.txt.partial" 2>&1
    mv "$OUT/$name.txt.partial" "$OUT/$name.txt"
}

step model_report "$PY" recipes/model_report.py --manifest $TEST --models "${BUNDLED_NAMES[@]}" \
    --histogram docs/emissions.png
step model_report_fresh "$PY" recipes/model_report.py --manifest data/synth/test_fresh.jsonl \
    --models "${BUNDLED_NAMES[@]}" --speed-utterances 0
step evaluate_fresh-tiny-en-rnnt "$TRANSDEC" evaluate data/synth/test_fresh.jsonl --model tiny-en-rnnt \
    --decoding greedy_label --normalizer none --output-dir $OUT/fresh-tiny-en-rnnt
step error_profile "$PY" recipes/error_profile.py $OUT/fresh-tiny-en-rnnt/predictions_greedy_label.jsonl \
    --train data/synth/plan_train{,_wordnet,_wordnet_glosses,_piper_extra}.jsonl --plan data/synth/plan_test_fresh.jsonl
for name in "${BUNDLED_NAMES[@]}"; do
    step "evaluate-$name" "$TRANSDEC" evaluate $TEST --model "$name" --decoding greedy_label,greedy_frame \
        --output-dir "$OUT/eval-$name"
done
step wind "$PY" bench/wind.py --manifest $TEST --histogram docs/wind_jumps.png
step long_audio "$PY" bench/long_audio.py --minutes 60
step long_form_wer "$PY" recipes/long_form_wer.py --manifest $TEST --models "${BUNDLED_NAMES[@]}"
step allocator "$PY" bench/allocator.py --train-manifest data/synth/train.jsonl --test-manifest $TEST
