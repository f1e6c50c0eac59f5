#!/usr/bin/env bash
# Trains the three bundled models on a borrowed GPU machine (the workplace's `device` tool), which starts bare,
# reaches no network and runs one command for at most 10 minutes; background runs survive between commands
# while the machine is held. Needs .kit/ (recipes/gpu/make_kit.sh) carried along.
#
#   recipes/gpu/device.sh start MINUTES [SECONDS]   synthesise the corpus, start the three runs with a training
#                                                   budget of MINUTES, then follow them as `wait` does
#   recipes/gpu/device.sh wait SECONDS              follow the runs for SECONDS or until all have ended
#
# With INIT_FROM=DIR, each run starts from DIR/<name>.pt (e.g. src/transdec/pretrained, to continue training
# the bundled models) instead of from scratch. TRAIN_SPLIT=NAME synthesises and trains on the kit's plan_NAME.jsonl
# instead of plan_train.jsonl; SYNTH_SECONDS=S stops its synthesis after S seconds (the runs train on what is
# done; mix_plan.py orders a plan so that any prefix is balanced); TRAIN_OPTIONS adds options to the runs.
#
# Both end by writing, to $OUT, each model's newest weights (float16; the last two checkpoints averaged while
# the runs go on, the last five once they have ended) and the training logs, so that nothing is lost if the
# machine goes back.
set -euo pipefail
cd "$(dirname "$0")/../.."
source recipes/gpu/setup_kit.sh
source recipes/bundled_models.sh
# In the first run, steps were 5x slower in the first minutes than in the last (GPU mostly idle, the autograd
# thread at 100% CPU) while the reserved memory grew: most likely the caching allocator meeting new batch
# shapes. Expandable segments are meant for that; not yet measured here.
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
WORK=/tmp/transdec-work
DATA=$WORK/synth
OUT=${OUT:-$WORK/out}
TRAIN_SPLIT=${TRAIN_SPLIT:-train}
started=$SECONDS

start_runs() {
    local budget=$1
    mkdir -p "$DATA"
    for split in "$TRAIN_SPLIT" dev; do gunzip -c ".kit/plans/plan_$split.jsonl.gz" > "$DATA/plan_$split.jsonl"; done
    echo "[$SECONDS s] synthesising"
    python3 recipes/synthetic_corpus.py audio --out "$DATA" --splits dev "$TRAIN_SPLIT" --audio-format wav \
        --jobs "$(nproc)" & local synth=$!
    if [ -n "${SYNTH_SECONDS:-}" ]; then
        while kill -0 $synth 2> /dev/null && (( SECONDS - started < SYNTH_SECONDS )); do sleep 2; done
        # The pool's workers outlive their parent: stop them by name too.
        kill $synth 2> /dev/null || true
        pkill -f "synthetic_corpus.py audio" || true
    fi
    wait $synth || true
    python3 recipes/synthetic_corpus.py manifest --out "$DATA" --splits dev "$TRAIN_SPLIT" --audio-format wav
    echo "[$SECONDS s] starting three runs"
    for name in "${BUNDLED_NAMES[@]}"; do
        # setsid: the run outlives this command (the tool ends a command's own process group when it returns).
        # shellcheck disable=SC2046
        setsid nohup python3 -m transdec.cli train --train-manifest "$DATA/$TRAIN_SPLIT.jsonl" \
            --dev-manifest "$DATA/dev.jsonl" --exp-dir "$WORK/exp/$name" \
            "${BUNDLED_MODEL_OPTIONS[@]}" "${BUNDLED_GPU_OPTIONS[@]}" \
            $(bundled_head_options "$name") ${INIT_FROM:+--init-from "$INIT_FROM/$name.pt"} --budget "$budget" \
            --threads 2 ${TRAIN_OPTIONS:-} > "$WORK/$name.log" 2>&1 < /dev/null &
    done
}

running() { pgrep -f "transdec.cli train" > /dev/null; }

follow() {
    local until=$1
    while running && (( SECONDS - started < until )); do
        sleep 30
        for name in "${BUNDLED_NAMES[@]}"; do
            echo "[$SECONDS s] $name: $(tail -n 1 "$WORK/exp/$name/log.jsonl" 2>/dev/null)"
            echo "    $(tail -c 300 "$WORK/$name.log" | tr '\r' '\n' | tail -n 2 | tr '\n' ' ')"
        done
        nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
    done
}

collect() {
    # At most 8 files come back from $OUT: one model file per run and one file of all logs.
    local last=2
    running || last=5
    mkdir -p "$OUT"
    for name in "${BUNDLED_NAMES[@]}"; do
        { echo "=== $name: log.jsonl"; cat "$WORK/exp/$name/log.jsonl"; echo "=== $name: output";
          tail -c 20000 "$WORK/$name.log"; } >> "$OUT/logs.txt" 2>/dev/null || true
        # A run may delete an old checkpoint while this reads it: try again.
        for _ in 1 2 3; do
            python3 -m transdec.cli average --exp-dir "$WORK/exp/$name" --last $last --half --output "$OUT/$name.pt" \
                && break
            sleep 2
        done
    done
    ls -la "$OUT"
}

case ${1:-} in
    start) start_runs "$2"; follow "${3:-560}" ;;
    wait) follow "$2" ;;
    *) echo "usage: $0 start MINUTES [SECONDS] | wait SECONDS" >&2; exit 2 ;;
esac
collect
