#!/usr/bin/env bash
# Trains the bundled models on a borrowed GPU machine (the workplace's `device` tool), which starts bare,
# reaches no network and runs one command for at most 10 minutes; background runs survive between commands
# while the machine is held. Needs .kit/ and .kit-plans/ (recipes/gpu/make_kit.sh) carried along; with the
# bundled models in the tree the two are over one command's 64 MiB together, so carry .kit/ with `check` and
# .kit-plans/ with `start` (what one command leaves in the tree stays for the next while the machine is held),
# or pack small plans into the kit (make_kit.sh KIT_SPLITS) and carry .kit/ alone. The machine goes back 30 s
# after a command returns, runs and all: send the next `wait` at once.
#
#   recipes/gpu/device.sh check                     set up the kit, synthesise the dev set, and compare the
#                                                   lattice's frame loops with its Triton kernels, the
#                                                   subsampling's memory layouts and padded against unpadded
#                                                   batches, on the GPU (bench/losses.py, bench/train_step.py)
#   recipes/gpu/device.sh evaluate                  synthesise the test set and evaluate the bundled models on
#                                                   the GPU (transdec evaluate, label- and frame-looping)
#   recipes/gpu/device.sh start MINUTES [SECONDS]   synthesise the corpus, start the runs with a training
#                                                   budget of MINUTES, then follow them as `wait` does
#   recipes/gpu/device.sh wait SECONDS              follow the runs for SECONDS or until all have ended
#
# With INIT_FROM=DIR, each run starts from DIR/<name>.pt (e.g. src/transdec/pretrained, to continue training
# the bundled models) instead of from scratch. TRAIN_SPLIT=NAME synthesises and trains on plan_NAME.jsonl
# instead of plan_train.jsonl; SYNTH_SECONDS=S starts the runs after S seconds of synthesis, on what is done
# (mix_plan.py orders a plan so that any prefix is balanced); with KEEP_SYNTHESISING=1 synthesis goes on
# beside the runs (at low priority) and they read the grown manifest at each epoch (--reload-manifest), else
# it stops there. RUNS names the models to train (default all three); TRAIN_OPTIONS adds options to the runs.
#
# All end by writing, to $OUT, each model's newest weights (float16; the last two checkpoints averaged while
# the runs go on, the last five once they have ended) and the training logs, so that nothing is lost if the
# machine goes back.
set -euo pipefail
cd "$(dirname "$0")/../.."
source recipes/gpu/setup_kit.sh
source recipes/bundled_models.sh
# In the first run, steps were 5x slower in the first minutes than in the last (GPU mostly idle, the autograd
# thread at 100% CPU) while the reserved memory grew. Expandable segments, for the caching allocator meeting
# new batch shapes, did not change that (second run); cuDNN building plans for every new shape would explain
# it too, which is why `transdec train` pads batches on CUDA (--pad-to-seconds; `check` compares).
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
WORK=/tmp/transdec-work
DATA=$WORK/synth
OUT=${OUT:-$WORK/out}
TRAIN_SPLIT=${TRAIN_SPLIT:-train}
read -r -a RUN_NAMES <<< "${RUNS:-${BUNDLED_NAMES[*]}}"
started=$SECONDS

unpack_plan() {  # SPLIT: from .kit-plans/, else .kit/plans/
    local packed=.kit-plans/plan_$1.jsonl.gz
    [ -f "$packed" ] || packed=.kit/plans/plan_$1.jsonl.gz
    mkdir -p "$DATA"
    gunzip -c "$packed" > "$DATA/plan_$1.jsonl"
}

synthesise() {  # SPLIT, whole
    [ -f "$DATA/$1.jsonl" ] && return
    unpack_plan "$1"
    python3 recipes/synthetic_corpus.py audio --out "$DATA" --splits "$1" --audio-format wav --jobs "$(nproc)"
    python3 recipes/synthetic_corpus.py manifest --out "$DATA" --splits "$1" --audio-format wav
}

evaluate_models() {
    mkdir -p "$OUT"
    synthesise test
    for name in "${RUN_NAMES[@]}"; do
        python3 -m transdec.cli evaluate "$DATA/test.jsonl" --model "src/transdec/pretrained/$name.pt" --device cuda \
            --decoding greedy_label,greedy_frame --normalizer none --output-dir "$WORK/evaluate/$name"
        cp "$WORK/evaluate/$name/predictions_greedy_label.jsonl" "$OUT/$name-predictions.jsonl"
    done 2>&1 | tee "$OUT/evaluate.txt"
}

check_kernels() {
    mkdir -p "$OUT"
    synthesise dev
    {
        nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
        python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
        for shape in "--batch 32 --frames 100 --tokens 50" "--batch 16 --frames 500 --tokens 250"; do
            # shellcheck disable=SC2086
            python3 bench/losses.py --device cuda --lattices loop kernel --vocab 256 --repeats 5 $shape
        done
        for head in rnnt multiblank; do
            python3 bench/train_step.py --manifest "$DATA/dev.jsonl" --device cuda --bf16 --head "$head" \
                --layers 8 --prune-ranges 5 --lattices loop kernel --batch-seconds 100 --steps 5
        done
        # At 400 s batches the steps grew 17x for 4x the audio (docs/benchmarks.md, "Third borrowed H100"):
        # the subsampling's channels-last convolutions are the suspect.
        for seconds in 100 400; do
            python3 bench/train_step.py --manifest "$DATA/dev.jsonl" --device cuda --bf16 --layers 8 \
                --prune-ranges 5 --lattices kernel --layouts channels_last contiguous --batch-seconds $seconds \
                --steps 5
        done
        # ...or cuDNN building its plans for every new input shape (~90 ms a call, GPU idle): padded batches
        # repeat their shapes (transdec train --pad-to-seconds, 1 s by default on CUDA).
        python3 bench/train_step.py --manifest "$DATA/dev.jsonl" --device cuda --bf16 --layers 8 --prune-ranges 5 \
            --lattices kernel --layouts channels_last contiguous --pad-to-seconds 0 1 --batch-seconds 100 --steps 40
    } 2>&1 | tee "$OUT/check.txt"
}

start_runs() {
    local budget=$1
    synthesise dev
    unpack_plan "$TRAIN_SPLIT"
    echo "[$SECONDS s] synthesising"
    # setsid: the process outlives this command (the tool ends a command's own process group when it returns).
    setsid nohup nice -n 10 python3 recipes/synthetic_corpus.py audio --out "$DATA" --splits "$TRAIN_SPLIT" \
        --audio-format wav --jobs "$(nproc)" > "$WORK/synth.log" 2>&1 < /dev/null &
    sleep 5  # until it shows in the process list
    while synthesising && (( SECONDS - started < ${SYNTH_SECONDS:-100000} )); do sleep 2; done
    if [ -z "${KEEP_SYNTHESISING:-}" ]; then
        # The pool's workers outlive their parent: stop them by name.
        pkill -f "synthetic_corpus.py audio" || true
    fi
    python3 recipes/synthetic_corpus.py manifest --out "$DATA" --splits "$TRAIN_SPLIT" --audio-format wav
    local reload=()
    if [ -n "${KEEP_SYNTHESISING:-}" ]; then
        reload=(--reload-manifest)
        setsid nohup bash -c "while pgrep -f 'synthetic_corpus.py audio' > /dev/null; do sleep 60;
            python3 recipes/synthetic_corpus.py manifest --out '$DATA' --splits '$TRAIN_SPLIT' --audio-format wav;
            done" > "$WORK/manifest.log" 2>&1 < /dev/null &
    fi
    echo "[$SECONDS s] starting ${#RUN_NAMES[@]} runs on $(wc -l < "$DATA/$TRAIN_SPLIT.jsonl") utterances"
    for name in "${RUN_NAMES[@]}"; do
        # shellcheck disable=SC2046
        setsid nohup python3 -m transdec.cli train --train-manifest "$DATA/$TRAIN_SPLIT.jsonl" \
            --dev-manifest "$DATA/dev.jsonl" --exp-dir "$WORK/exp/$name" \
            "${BUNDLED_MODEL_OPTIONS[@]}" "${BUNDLED_GPU_OPTIONS[@]}" "${reload[@]}" \
            $(bundled_head_options "$name") ${INIT_FROM:+--init-from "$INIT_FROM/$name.pt"} --budget "$budget" \
            --threads 2 ${TRAIN_OPTIONS:-} > "$WORK/$name.log" 2>&1 < /dev/null &
    done
}

synthesising() { pgrep -f "synthetic_corpus.py audio" > /dev/null; }
running() { pgrep -f "transdec.cli train" > /dev/null; }

follow() {
    local until=$1
    while running && (( SECONDS - started < until )); do
        sleep 30
        for name in "${RUN_NAMES[@]}"; do
            echo "[$SECONDS s] $name: $(tail -n 1 "$WORK/exp/$name/log.jsonl" 2>/dev/null)"
            echo "    $(tail -c 300 "$WORK/$name.log" | tr '\r' '\n' | tail -n 2 | tr '\n' ' ')"
        done
        echo "    $(wc -l < "$DATA/$TRAIN_SPLIT.jsonl" 2> /dev/null) utterances in the manifest;" \
            "$(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"
    done
}

collect() {
    # At most 8 files come back from $OUT: one model file per run and one file of all logs.
    local last=2
    running || last=5
    mkdir -p "$OUT"
    for name in "${RUN_NAMES[@]}"; do
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
    check) check_kernels; exit ;;
    evaluate) evaluate_models; exit ;;
    start) start_runs "$2"; follow "${3:-560}" ;;
    wait) follow "$2" ;;
    *) echo "usage: $0 check | evaluate | start MINUTES [SECONDS] | wait SECONDS" >&2; exit 2 ;;
esac
collect
