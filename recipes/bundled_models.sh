# Training options of the three bundled models, sourced by recipes/train_bundled.sh and recipes/gpu/device.sh
# so that the documented recipe and the run that made the files cannot drift apart.
# All three share the encoder shape (the `transdec train` defaults) and these options; they differ in the head.
BUNDLED_NAMES=(tiny-en-rnnt tiny-en-tdt tiny-en-multiblank)
# One GPU, three runs at once, each for a fixed time (--budget): batches of 400 s of padded audio (~90
# utterances), bf16 encoder, float32 joint and loss. The 1024-token BPE keeps emissions sparse (0.38 tokens per
# 80 ms frame on these transcripts; 0.66 with 128 tokens), which is what big blanks and WIND windows exploit.
BUNDLED_TRAIN_OPTIONS=(--vocab-size 1024 --batch-seconds 400 --peak-lr 2.5e-3 --warmup-steps 500 --max-steps 100000
                       --time-masks 5 --bf16 --save-every 250 --eval-every 1000 --loader-threads 4 --device cuda)
bundled_head_options() {
    case $1 in
        tiny-en-rnnt) echo --head rnnt --predictor lstm ;;
        tiny-en-tdt) echo --head tdt --durations 0 1 2 3 4 --sigma 0.05 --predictor lstm ;;
        tiny-en-multiblank) echo --head multiblank --big-blank-durations 2 4 8 --sigma 0.05 --predictor stateless \
                                 --context-size 2 ;;
        *) echo "unknown bundled model $1" >&2; return 1 ;;
    esac
}
# Stage 2 on a CPU: the stage-1 weights continue with 60 s batches (more updates per hour), lighter SpecAugment.
BUNDLED_CPU_OPTIONS=(--vocab-size 1024 --batch-seconds 60 --peak-lr 1.5e-3 --warmup-steps 200 --max-steps 100000
                     --time-masks 2 --save-every 200 --eval-every 500 --threads 1 --loader-threads 1 --device cpu)
