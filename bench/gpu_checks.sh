#!/usr/bin/env bash
# Every GPU check of transdec in one go, for a CUDA machine that may have no network: the CUDA tests, then
# the benchmarks, each writing its output under $OUT (default /tmp/transdec-gpu) as it goes.
#
#   bash bench/gpu_checks.sh [STAGE ...]     stages: env tests beam profile decoders streaming nemo_streaming
#                                            encoder evaluate training
#                                            (default: all)
#
# Packages the machine lacks (NeMo for its reference decoders, soundfile for audio) are installed from
# wheels in .whl/ if that folder exists (bench/gpu_wheels.sh makes it); the audio of the `evaluate` stage,
# .gpu-data/, is made by recipes/speed_test_set.py. Carry both folders to the machine.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/transdec-gpu}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:/tmp/site"
fi
stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(env tests beam profile decoders streaming nemo_streaming encoder evaluate training)

for stage in "${stages[@]}"; do
    echo "== $stage ($SECONDS s)"
    case $stage in
        env)
            nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
            python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, torch.version.cuda)'
            python3 -c 'from cuda import bindings; print("cuda-bindings", bindings.__version__)' ;;
        tests)  # in TEST_WORKERS processes (pytest-xdist) where the machine has it
            workers=()
            python3 -c 'import xdist' 2>/dev/null && workers=(-n "${TEST_WORKERS:-4}")
            timeout "${TESTS_SECONDS:-300}" python3 -m pytest -q -rfE -p no:cacheprovider --maxfail=10 "${workers[@]}" \
                -k "not fused_kernels_equal_reference" tests/test_label_looping_graphs.py tests/test_compute_dtype.py \
                tests/test_beam_cuda.py \
                2>&1 | tee "$OUT/tests.txt"
            # the CUDA tests of phrase boosting (in the graphs too), the streaming decoders and recognizer, the joint kernel
            timeout "${TESTS_SECONDS:-300}" python3 -m pytest -q -rfE -p no:cacheprovider --maxfail=10 -k cuda \
                tests/test_biasing_tree.py tests/test_biasing_decoding.py tests/test_streaming_greedy.py tests/test_joint_kernel.py \
                tests/test_streaming_beam.py tests/test_streaming_recognizer.py \
                2>&1 | tee -a "$OUT/tests.txt" ;;
        beam)  # beam search beside greedy and NeMo, decoder only and whole system; the LM's scoring kernel
            # shellcheck disable=SC2086
            timeout "${BEAM_SECONDS:-400}" python3 bench/gpu_beam.py --output "$OUT/beam.md" ${BEAM_OPTIONS:-} \
                2>&1 | grep -v 'it/s' | tee "$OUT/beam.log" ;;
        profile)  # kernels and host syncs per decode, eagerly and under graphs
            # shellcheck disable=SC2086
            timeout "${PROFILE_SECONDS:-120}" python3 bench/gpu_profile.py --output "$OUT/profile.md" ${PROFILE_OPTIONS:-} \
                2>&1 | tee "$OUT/profile.log" ;;
        decoders)
            # shellcheck disable=SC2086
            timeout "${DECODERS_SECONDS:-400}" python3 bench/gpu.py --output "$OUT/decoders.md" ${DECODER_OPTIONS:-} \
                2>&1 | tee "$OUT/decoders.log" ;;
        streaming)  # concurrent streams batched on the GPU against one at a time
            timeout "${STREAMING_SECONDS:-120}" python3 bench/streaming.py speed --device cuda --streams 1 16 64 \
                --seconds 10 2>&1 | tee "$OUT/streaming.txt" ;;
        nemo_streaming)  # cache-aware streaming of a parakeet-110m-sized model beside NeMo's, 64 and 256 streams
            model=/tmp/nemo_stream_full/fc_streaming_110m.nemo
            [ -f "$model" ] || python3 recipes/nemo_streaming_full.py /tmp/nemo_stream_full > "$OUT/nemo_streaming_model.log" 2>&1
            # shellcheck disable=SC2086
            timeout "${NEMO_STREAMING_SECONDS:-300}" python3 bench/nemo_streaming.py run --model "$model" \
                --nemo-python python3 --device cuda --streams 64 256 --contexts 70,6 --rounds 2 --seconds 20 \
                ${NEMO_STREAMING_OPTIONS:-} 2>&1 | tee "$OUT/nemo_streaming.md" ;;
        encoder)
            timeout "${ENCODER_SECONDS:-150}" python3 bench/encoder_lengths.py --device cuda 2>&1 | tee "$OUT/encoder.txt" ;;
        evaluate)
            timeout "${EVALUATE_SECONDS:-150}" python3 -m transdec.cli evaluate .gpu-data/test.jsonl --device cuda \
                --decoding greedy_label --normalizer none 2>&1 | tee "$OUT/evaluate.txt" ;;
        training)  # the loss's frame loops against its Triton kernels; training steps, padded and not
            {
                for shape in "--batch 32 --frames 100 --tokens 50" "--batch 16 --frames 500 --tokens 250"; do
                    # shellcheck disable=SC2086
                    python3 bench/losses.py --device cuda --lattices loop kernel --vocab 256 --repeats 5 $shape
                done
                python3 bench/train_step.py --manifest .gpu-data/test.jsonl --device cuda --bf16 --layers 8 \
                    --prune-ranges 5 --lattices loop kernel --batch-seconds 100 --steps 5
                python3 bench/train_step.py --manifest .gpu-data/test.jsonl --device cuda --bf16 --layers 8 \
                    --prune-ranges 5 --lattices kernel --pad-to-seconds 0 1 --batch-seconds 100 --steps 40
            } 2>&1 | tee "$OUT/training.txt" ;;
        *) echo "unknown stage $stage" ;;
    esac
done
echo "== done ($SECONDS s)"
