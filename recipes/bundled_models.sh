# Training options of the three bundled models, sourced by recipes/train_bundled.sh and recipes/gpu/device.sh
# so that the documented recipe and the runs that made the files cannot drift apart.
BUNDLED_NAMES=(tiny-en-rnnt tiny-en-tdt tiny-en-multiblank)

# Shape shared by all three (the rest is `transdec train`'s default: d_model 144, 4 heads, kernel 15, 8x
# subsampling): 4 Conformer blocks, LSTM / joint width 320, 256 BPE tokens.
BUNDLED_MODEL_OPTIONS=(--vocab-size 256 --layers 4 --predictor-hidden 320 --joint-dim 320)

bundled_head_options() {
    case $1 in
        tiny-en-rnnt) echo --head rnnt --predictor lstm ;;
        tiny-en-tdt) echo --head tdt --durations 0 1 2 3 4 --sigma 0.05 --predictor lstm ;;
        tiny-en-multiblank) echo --head multiblank --big-blank-durations 2 4 8 --sigma 0.05 --predictor stateless \
                                 --context-size 2 ;;
        *) echo "unknown bundled model $1" >&2; return 1 ;;
    esac
}

# On this 2-core CPU, one run at a time with both threads: ~1.4 s per step of 150 s of padded audio.
BUNDLED_CPU_OPTIONS=(--batch-seconds 150 --peak-lr 2e-3 --warmup-steps 400 --max-steps 100000 --time-masks 2
                     --save-every 200 --eval-every 500 --threads 2 --loader-threads 1)

# On one GPU, three runs at once for a fixed time (--budget): batches of 400 s of padded audio (~90
# utterances), bf16 encoder, float32 joint and loss. (The 2026-11-23 GPU runs used these with 6 blocks and
# 1024 tokens; see docs/models.md.)
BUNDLED_GPU_OPTIONS=(--batch-seconds 400 --peak-lr 2.5e-3 --warmup-steps 500 --max-steps 100000 --time-masks 5
                     --bf16 --save-every 250 --eval-every 1000 --loader-threads 4 --device cuda)
