#!/usr/bin/env bash
# N-gram LM fusion on a domain the bundled models never read, and on their own test set (docs/lm.md, Evaluation).
#
#   recipes/lm_domain_shift.sh            # every stage; a step whose output exists is skipped, so rerun to resume
#   STAGES="3 4" recipes/lm_domain_shift.sh
#
# 0. texts: the Linux man-pages (Debian manpages, manpages-dev) split by page into LM text, 200 dev and 400 test
#    sentences (recipes/lm_domain_text.py); the transcripts of the bundled models' training plans as the in-domain
#    LM text (needs data/synth/plan_*.jsonl: recipes/synthetic_corpus.py text, docs/models.md).
# 1. audio: the domain's dev and test read as the project's test sets are (half espeak-ng, half Piper; the same
#    random settings), and the synthetic corpus's own dev split (data/synth/dev.jsonl) for tuning in-domain.
# 2. LMs: order ORDER, one per bundled model (each its own tokenizer), from each text, with `transdec lm build`.
# 3. dev sweeps: greedy and ALSD++ beam 4 with each LM weight of WEIGHTS, token bonus and blank scoring on/off.
# 4. test: no LM, and greedy+LM and beam+LM each with the settings of its lowest dev WER; paired tests
#    (recipes/paired_wer.py) and the table (exp/lm/test/<set>/table.md).
# Sets: "domain" (data/domain, the man-pages LM) and "synth" (data/synth/test.jsonl, the training-text LM).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
STAGES=${STAGES:-0 1 2 3 4}
SETS=${SETS:-domain synth}               # the evaluation sets of stages 3 and 4
ORDER=${ORDER:-4}
WEIGHTS=${WEIGHTS:-0.1,0.2,0.3,0.4,0.5,0.6,0.8}
PLAIN_BONUSES=${PLAIN_BONUSES:-0 0.5 1 1.5}   # token bonuses tried without blank scoring
BLANK_BONUSES=${BLANK_BONUSES:-0 0.5 1}       # and with it
DOMAIN=data/domain
OUT=exp/lm
source recipes/bundled_models.sh
# One thread each, for a machine shared with other work; decoding runs on one thread anyway (transdec.runtime).
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE
mkdir -p $OUT/lms
has_stage() { [[ " $STAGES " == *" $1 "* ]]; }
dev_manifest() { [[ $1 == domain ]] && echo $DOMAIN/dev.jsonl || echo data/synth/dev.jsonl; }
test_manifest() { [[ $1 == domain ]] && echo $DOMAIN/test.jsonl || echo data/synth/test.jsonl; }
lm_file() { [[ $1 == domain ]] && echo $OUT/lms/$2-manpages.pt || echo $OUT/lms/$2-train.pt; }
evaluate() {  # evaluate OUTPUT_DIR MANIFEST MODEL [OPTIONS...]: skipped when OUTPUT_DIR has its summary
    local dir=$1 manifest=$2 model=$3; shift 3
    [[ -s $dir/summary.json ]] && return
    "$TRANSDEC" evaluate "$manifest" --model "$model" --normalizer none --output-dir "$dir" "$@" \
        > "$dir.log"
}

if has_stage 0; then
    [[ -s $DOMAIN/plan_test.jsonl ]] || "$PY" recipes/lm_domain_text.py --out $DOMAIN
    [[ -s $OUT/train_text.txt ]] || "$PY" recipes/lm_domain_eval.py training-text --synth data/synth \
        -o $OUT/train_text.txt
fi

if has_stage 1; then
    "$PY" recipes/synthetic_corpus.py audio --out $DOMAIN --splits dev test
    "$PY" recipes/synthetic_corpus.py manifest --out $DOMAIN --splits dev test
    "$PY" recipes/synthetic_corpus.py audio --out data/synth --splits dev
    "$PY" recipes/synthetic_corpus.py manifest --out data/synth --splits dev
fi

if has_stage 2; then
    for name in "${BUNDLED_NAMES[@]}"; do
        for text in manpages train; do
            source_text=$DOMAIN/lm_text.txt; [[ $text == train ]] && source_text=$OUT/train_text.txt
            lm=$OUT/lms/$name-$text
            [[ -s $lm.pt ]] || "$TRANSDEC" lm build --text $source_text --model "$name" --order "$ORDER" \
                -o $lm.arpa --compile $lm.pt | tee $lm.log
        done
    done
fi

if has_stage 3; then
    for set in $SETS; do
        for name in "${BUNDLED_NAMES[@]}"; do
            dir=$OUT/dev/$set/$name
            mkdir -p "$dir"
            evaluate "$dir/nolm" "$(dev_manifest $set)" "$name" --decoding greedy_label,beam_alsd_pp --beam-size 4
            for mode in plain blank; do
                bonuses=$PLAIN_BONUSES; flag=(); [[ $mode == blank ]] && bonuses=$BLANK_BONUSES flag=(--lm-blank-scoring)
                for bonus in $bonuses; do
                    evaluate "$dir/bonus$bonus-$mode" "$(dev_manifest $set)" "$name" \
                        --decoding greedy_label,beam_alsd_pp --beam-size 4 --lm "$(lm_file $set "$name")" --lm-weight "$WEIGHTS" \
                        --lm-token-bonus "$bonus" "${flag[@]}"
                done
            done
        done
    done
fi

if has_stage 4; then
    for set in $SETS; do
        for name in "${BUNDLED_NAMES[@]}"; do
            dir=$OUT/test/$set/$name
            mkdir -p "$dir"
            evaluate "$dir/nolm" "$(test_manifest $set)" "$name" --decoding greedy_label,beam_alsd_pp --beam-size 4
            for strategy in greedy_label beam_alsd_pp; do
                run=greedy_lm; [[ $strategy == beam_alsd_pp ]] && run=beam_lm
                "$PY" recipes/lm_domain_eval.py choose $OUT/dev/$set/$name --strategy $strategy > "$dir/$run.options"
                read -ra options < "$dir/$run.options"
                beam=(); [[ $strategy == beam_alsd_pp ]] && beam=(--beam-size 4)
                evaluate "$dir/$run" "$(test_manifest $set)" "$name" --decoding $strategy "${beam[@]}" \
                    --lm "$(lm_file $set "$name")" "${options[@]}"
            done
            greedy=$dir/nolm/predictions_greedy_label.jsonl
            "$PY" recipes/paired_wer.py "$greedy" "$dir"/greedy_lm/predictions_greedy_label+lm*.jsonl \
                > "$dir/paired-greedy_lm.txt"
            "$PY" recipes/paired_wer.py "$greedy" "$dir"/beam_lm/predictions_beam_alsd_pp+lm*.jsonl \
                > "$dir/paired-beam_lm.txt"
            "$PY" recipes/paired_wer.py "$dir/nolm/predictions_beam_alsd_pp.jsonl" \
                "$dir"/beam_lm/predictions_beam_alsd_pp+lm*.jsonl > "$dir/paired-beam_lm-vs-beam.txt"
        done
        "$PY" recipes/lm_domain_eval.py table $OUT/test/$set | tee $OUT/test/$set/table.md
    done
fi
