# shellcheck shell=bash disable=SC2034
# Options of the three bundled models, sourced by recipes/train_bundled.sh and recipes/measure_bundled.sh.
BUNDLED_NAMES=(tiny-en-rnnt tiny-en-tdt tiny-en-multiblank)

# Shape shared by all three (the rest is `transdec train`'s default: d_model 144, 4 heads, kernel 15, 8x
# subsampling): 256 BPE tokens, LSTM / joint width 320, attention limited to 32 encoder frames (2.56 s) each
# side, no dropout. Depth: 8 Conformer blocks for tiny-en-rnnt and tiny-en-multiblank, 6 for tiny-en-tdt.
BUNDLED_MODEL_OPTIONS=(--vocab-size 256 --predictor-hidden 320 --joint-dim 320 --attention-context 32 --dropout 0)

bundled_head_options() {
    case $1 in
        tiny-en-rnnt) echo --head rnnt --predictor lstm ;;
        tiny-en-tdt) echo --head tdt --durations 0 1 2 3 4 --sigma 0.05 --predictor lstm ;;
        tiny-en-multiblank) echo --head multiblank --big-blank-durations 2 4 8 --sigma 0.05 --predictor stateless \
                                 --context-size 2 ;;
        *) echo "unknown bundled model $1" >&2; return 1 ;;
    esac
}

# A quarter of the utterances joined into rows of up to 40 s each epoch, so that the models keep their accuracy
# on long recordings (docs/models.md, "Long recordings").
BUNDLED_LONG_FORM=(--long-form-share 0.25 --long-form-seconds 40)

# On a 2-core CPU: one run on both threads, batches of 150 s of padded audio (~35 utterances), float32.
BUNDLED_CPU_OPTIONS=(--batch-seconds 150 --peak-lr 2e-3 --warmup-steps 400 --max-steps 100000 --time-masks 2
                     --save-every 200 --eval-every 500 --threads 2 --loader-threads 1)

# On one GPU: batches of 400 s of padded audio (~90 utterances), bf16 encoder, float32 joint and loss.
BUNDLED_GPU_OPTIONS=(--batch-seconds 400 --peak-lr 2.5e-3 --warmup-steps 500 --max-steps 100000 --time-masks 5
                     --bf16 --save-every 250 --eval-every 1000 --loader-threads 4 --device cuda)
