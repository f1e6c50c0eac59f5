#!/usr/bin/env bash
# Trains the three bundled models (tiny-en-rnnt, tiny-en-tdt, tiny-en-multiblank) from nothing: the synthetic
# speech corpus, an RNN-T from scratch, TDT and multi-blank started from it, fine-tuning, averaging, evaluation.
#
#   recipes/train_bundled.sh [--stage N] [--stop-stage M] [--device cpu|cuda] [--data DIR] [--exp DIR] [--dry-run]
#
# Stage                                                                        2-core CPU, default budgets
#   0  corpus plans: every text, voice and synthesis setting                  ~10 s
#   1  audio: espeak-ng ~115 utterances/s, Piper ~7/s (~130,000 of them)      ~5 h
#   2  split manifests and the two training mixes                             ~10 min
#   3  tokenizer and RNN-T from scratch, 6 Conformer blocks (RNNT_MIN)        ~17 h
#   4  TDT from all of the RNN-T's weights (TDT_MIN), then multi-blank from
#      its encoder with a fresh stateless predictor and joint (MB_MIN)        ~14 h
#   5  RNN-T and multi-blank grown to 8 blocks and fine-tuned side by side
#      on the Piper-heavy mix with the pruned loss (FT_MIN)                   ~10 h
#   6  each final run's last five checkpoints averaged, float16, into final/  ~1 min
#   7  held-out WER per voice (test, test_fresh) and on one-minute recordings ~5 min
#
# Needs `apt-get install espeak-ng bible-kjv fortunes wordnet-base`, `pip install -c constraints.txt -e
# '.[recipes]'` and ~25 GB of disk for the training audio (WAV). Every stage resumes when run again: synthesis
# makes only missing files, `transdec train` goes on from its newest checkpoint, and a stage whose output exists is
# skipped (delete the output to redo it). --device cuda trains with BUNDLED_GPU_OPTIONS (recipes/bundled_models.sh;
# set the budgets lower, a GPU step is many times faster); TRAIN_OPTIONS adds options to every run (e.g. --bf16 on
# a CPU with AVX-512 BF16). --dry-run prints each stage's commands instead of running them.
# The bundled files' results and training times are in docs/models.md. They came out of a longer chain of
# fine-tuning runs; this recipe trains their final configuration in one pass, so it makes models of the same shape
# and settings, not the same files. Everything is written under --exp (default exp/bundled) and --data (default
# data/synth); copy final/*.pt into src/transdec/pretrained/ to bundle them, and recipes/measure_bundled.sh takes
# every measurement of the docs.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
source recipes/bundled_models.sh
export OMP_WAIT_POLICY=PASSIVE  # idle OpenMP threads must not spin on a shared 2-core machine

# Minutes of training per run, and the fine-tuning peak learning rate.
RNNT_MIN=${RNNT_MIN:-1000}
TDT_MIN=${TDT_MIN:-15}
MB_MIN=${MB_MIN:-800}
FT_MIN=${FT_MIN:-600}
FT_PEAK=${FT_PEAK:-5e-4}
# The corpus: Piper also reads 46,000 of espeak-ng's training sentences (train_piper_extra); both voices read
# WordNet's usage examples; of WordNet's definitions Piper reads the first 36,834 and espeak-ng 25,387 others.
TEXT_OPTIONS=(--train-piper-extra 46000 --train-wordnet 39786 --train-glosses 88676 --test-fresh-per-voice 398)
GLOSSES_PIPER=(0 36834)
GLOSSES_ESPEAK=(25387 50774)
TRAIN_SPLITS=(train train_wordnet train_wordnet_glosses train_piper_extra)

stage=0 stop_stage=7 device=cpu data=data/synth exp=exp/bundled dry_run=
while [ $# -gt 0 ]; do
    case $1 in
        --stage) stage=$2; shift 2 ;;
        --stop-stage) stop_stage=$2; shift 2 ;;
        --device) device=$2; shift 2 ;;
        --data) data=$2; shift 2 ;;
        --exp) exp=$2; shift 2 ;;
        --dry-run) dry_run=1; shift ;;
        -h | --help) sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$0"; exit 0 ;;
        *) echo "unknown option $1 (--help lists them)" >&2; exit 2 ;;
    esac
done
[[ $stage =~ ^[0-9]+$ && $stop_stage =~ ^[0-9]+$ ]] || { echo "--stage and --stop-stage take numbers" >&2; exit 2; }
case $device in
    # continued: runs that start from a trained model; pair: each of two runs side by side
    cpu) machine=("${BUNDLED_CPU_OPTIONS[@]}") continued=(--batch-seconds 100) pair=(--threads 1) ;;
    cuda) machine=("${BUNDLED_GPU_OPTIONS[@]}") continued=() pair=() ;;
    *) echo "--device must be cpu or cuda, not $device" >&2; exit 2 ;;
esac
continued+=(--warmup-steps 100 --prune-range 5)
read -r -a extra <<< "${TRAIN_OPTIONS:-}"
base_mix=$data/mix_base.jsonl fine_tuning_mix=$data/mix_fine_tuning.jsonl

show() {  # COMMAND...: print it, quoted where needed
    printf '+'
    printf ' %q' "$@"
}
run() {  # COMMAND...: print it, and run it unless --dry-run
    show "$@"
    echo
    [ -n "$dry_run" ] || "$@"
}
have() {  # FILE: true (and say so) if FILE exists and is not empty
    [ -s "$1" ] && echo "# $1 exists: skipped"
}
in_stage() {  # N DESCRIPTION: true if stage N is to run (and announce it)
    [ "$stage" -le "$1" ] && [ "$1" -le "$stop_stage" ] && echo "== stage $1: $2"
}
fit() {  # NAME MODEL LAYERS MINUTES MIX [OPTION...]: train into $exp/NAME (resuming a run that is there), then
         # average its last five checkpoints into $exp/NAME.pt; skipped once that file exists
    local name=$1 model=$2 layers=$3 minutes=$4 mix=$5
    shift 5
    have "$exp/$name.pt" && return
    # shellcheck disable=SC2046
    run "$TRANSDEC" train --train-manifest "$mix" --dev-manifest "$data/dev.jsonl" --exp-dir "$exp/$name" \
        "${BUNDLED_MODEL_OPTIONS[@]}" $(bundled_head_options "$model") --layers "$layers" "${BUNDLED_LONG_FORM[@]}" \
        "${machine[@]}" --budget "$minutes" "$@" "${extra[@]}"  # a later option overrides an earlier one
    run "$TRANSDEC" average --exp-dir "$exp/$name" --last 5 --output "$exp/$name.pt"
}
side_by_side() {  # FIT_ARGS_1 -- FIT_ARGS_2: two fits at once (one after the other with --dry-run)
    local first=() pid
    while [ "$1" != -- ]; do first+=("$1"); shift; done
    shift
    if [ -n "$dry_run" ]; then fit "${first[@]}"; fit "$@"; return; fi
    fit "${first[@]}" &
    pid=$!
    fit "$@"
    wait "$pid"
}
report() {  # NAME COMMAND...: COMMAND's output into $exp/eval/NAME.txt, unless that file exists
    local out=$exp/eval/$1.txt
    shift
    have "$out" && return
    show "$@"
    echo " > $out"
    [ -n "$dry_run" ] || { "$@" > "$out.partial"; mv "$out.partial" "$out"; }
}

if in_stage 0 "corpus plans"; then
    run "$PY" recipes/synthetic_corpus.py text --out "$data" "${TEXT_OPTIONS[@]}"
fi

if in_stage 1 "audio synthesis"; then
    corpus_audio=("$PY" recipes/synthetic_corpus.py audio --out "$data")
    run "${corpus_audio[@]}" --splits dev test test_fresh
    run "${corpus_audio[@]}" --splits train train_wordnet train_piper_extra --audio-format wav
    run "${corpus_audio[@]}" --splits train_wordnet_glosses --voices piper --index-range "${GLOSSES_PIPER[@]}" \
        --audio-format wav
    run "${corpus_audio[@]}" --splits train_wordnet_glosses --voices espeak --index-range "${GLOSSES_ESPEAK[@]}" \
        --audio-format wav
fi

if in_stage 2 "manifests and training mixes"; then
    if ! { have "$base_mix" && have "$fine_tuning_mix"; }; then
        run "$PY" recipes/synthetic_corpus.py manifest --out "$data" --splits dev test test_fresh
        run "$PY" recipes/synthetic_corpus.py manifest --out "$data" --splits "${TRAIN_SPLITS[@]}" --audio-format wav
        # From scratch: every reading once, Piper's definitions twice (60% Piper, ~277,000 rows).
        run "$PY" recipes/mix_manifest.py "$base_mix" --data "$data" --splits "${TRAIN_SPLITS[@]}" \
            --piper-copies train_wordnet_glosses=2
        # Fine-tuning, towards the harder voice: Piper's readings three times (the definitions twice), espeak-ng's
        # whole in the train split and a seeded half elsewhere (82% Piper, ~427,000 rows).
        run "$PY" recipes/mix_manifest.py "$fine_tuning_mix" --data "$data" --splits "${TRAIN_SPLITS[@]}" \
            --piper-copies train=3 train_wordnet=3 train_wordnet_glosses=2 train_piper_extra=3 \
            --espeak-share 0.5 --espeak-whole train
    fi
fi

if in_stage 3 "tokenizer and RNN-T from scratch"; then
    fit rnnt-6 tiny-en-rnnt 6 "$RNNT_MIN" "$base_mix"
fi

if in_stage 4 "TDT and multi-blank from the RNN-T"; then
    fit tdt-6 tiny-en-tdt 6 "$TDT_MIN" "$base_mix" "${continued[@]}" --peak-lr 5e-4 --init-from "$exp/rnnt-6.pt"
    fit multiblank-6 tiny-en-multiblank 6 "$MB_MIN" "$base_mix" --warmup-steps 200 --init-from "$exp/rnnt-6.pt" \
        --init-encoder-only
fi

if in_stage 5 "RNN-T and multi-blank grown to 8 blocks and fine-tuned"; then
    for name in rnnt multiblank; do
        # A block that starts as the identity after blocks 2 and 4: the grown model computes what the 6-block one did.
        have "$exp/$name-8-init.pt" || run "$PY" recipes/grow_encoder.py "$exp/$name-6.pt" "$exp/$name-8-init.pt" \
            --after 2 4
    done
    tuning=("${continued[@]}" "${pair[@]}" --peak-lr "$FT_PEAK")
    side_by_side rnnt-8 tiny-en-rnnt 8 "$FT_MIN" "$fine_tuning_mix" "${tuning[@]}" --init-from "$exp/rnnt-8-init.pt" \
        -- multiblank-8 tiny-en-multiblank 8 "$FT_MIN" "$fine_tuning_mix" "${tuning[@]}" \
        --init-from "$exp/multiblank-8-init.pt"
fi

declare -A final_run=([tiny-en-rnnt]=rnnt-8 [tiny-en-tdt]=tdt-6 [tiny-en-multiblank]=multiblank-8)
models=()
for name in "${BUNDLED_NAMES[@]}"; do models+=("$exp/final/$name.pt"); done

if in_stage 6 "model files"; then
    run mkdir -p "$exp/final"
    for name in "${BUNDLED_NAMES[@]}"; do
        have "$exp/final/$name.pt" || run "$TRANSDEC" average --exp-dir "$exp/${final_run[$name]}" --last 5 --half \
            --output "$exp/final/$name.pt"
    done
fi

if in_stage 7 "evaluation"; then
    run mkdir -p "$exp/eval"
    report test "$PY" recipes/model_report.py --manifest "$data/test.jsonl" --models "${models[@]}" \
        --speed-utterances 0
    report test_fresh "$PY" recipes/model_report.py --manifest "$data/test_fresh.jsonl" --models "${models[@]}" \
        --speed-utterances 0
    report long_form "$PY" recipes/long_form_wer.py --manifest "$data/test.jsonl" --models "${models[@]}"
fi
