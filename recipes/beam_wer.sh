#!/usr/bin/env bash
# WER of greedy decoding against ALSD++ beam search (beam 4 and 8) for each bundled model on the held-out test
# set, with the paired comparison of recipes/paired_wer.py. Needs data/synth/test.jsonl (recipes/train_bundled.sh
# stages 0-2, or just: recipes/synthetic_corpus.py text ...; audio --splits test; manifest --splits test).
# Outputs go to exp/beam_wer/; a step whose output exists is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
TEST=${TEST:-data/synth/test.jsonl}
OUT=exp/beam_wer
source recipes/bundled_models.sh
export OMP_WAIT_POLICY=PASSIVE
mkdir -p $OUT

for name in "${BUNDLED_NAMES[@]}"; do
    for beam in 4 8; do
        dir=$OUT/$name-beam$beam
        [[ -s $dir/summary.json ]] && continue
        # greedy rides along with the first beam size: the same encoder outputs, decoded both ways
        decodings=beam_alsd_pp; [[ $beam == 4 ]] && decodings=greedy_label,beam_alsd_pp
        "$TRANSDEC" evaluate $TEST --model "$name" --decoding $decodings --beam-size $beam --normalizer none \
            --output-dir "$dir" | tee "$dir.txt"
    done
    for beam in 4 8; do
        "$PY" recipes/paired_wer.py $OUT/$name-beam4/predictions_greedy_label.jsonl \
            $OUT/$name-beam$beam/predictions_beam_alsd_pp.jsonl > $OUT/$name-paired-beam$beam.txt
    done
done
tail -n +1 $OUT/*.txt
