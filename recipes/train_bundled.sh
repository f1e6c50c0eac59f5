#!/usr/bin/env bash
# Reproduces the three bundled models on a 2-core CPU (docs/models.md has the times and results).
# Every step resumes where it stopped when rerun.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
TRANSDEC=${TRANSDEC:-.venv/bin/transdec}
DATA=data/synth
source recipes/bundled_models.sh
export OMP_WAIT_POLICY=PASSIVE  # idle OpenMP threads must not spin on a shared 2-core machine

# 1. Corpus (needs `apt-get install espeak-ng bible-kjv fortunes wordnet-base dict-gcide` and `pip install -c
#    constraints.txt -e '.[recipes]'`): the plan of every utterance, then the audio. The first RNN-T pieces
#    (step 2) had the 46,000 espeak-ng training utterances and 3,081 of the 6,000 Piper ones (synthesis, two
#    processes, was stopped there to train; the first 3,081 by number taken here differ from that set in 3
#    files); the later pieces (steps 3-4) had all of them. test_fresh (planned 2026-11-26, after step 44) reads the
#    796 test sentences that the test set leaves, for figures that no choice between models has seen.
$PY recipes/synthetic_corpus.py text --out $DATA --test-fresh-per-voice 398
$PY recipes/synthetic_corpus.py audio --out $DATA --splits dev test test_fresh
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits dev test test_fresh
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits train --audio-format wav
# Piper is the minority voice: its utterances are listed three times.
$PY - <<'PY'
import json
lines = open("data/synth/train.jsonl").read().splitlines()
piper = sorted((line for line in lines if json.loads(line)["voice"] == "piper"),
               key=lambda line: json.loads(line)["audio_filepath"])
later_piper = set(piper[3081:])
for name, keep in (("train_cpu_first.jsonl", lambda line: line not in later_piper),
                   ("train_cpu.jsonl", lambda line: True)):
    with open(f"data/synth/{name}", "w") as f:
        for line in lines:
            if keep(line):
                f.write((line + "\n") * (3 if json.loads(line)["voice"] == "piper" else 1))
PY
COMMON=(--dev-manifest $DATA/dev.jsonl "${BUNDLED_MODEL_OPTIONS[@]}" "${BUNDLED_CPU_OPTIONS[@]}")

# 2. RNN-T from scratch with both threads: 50 minutes with the decay over those 50 minutes, then resumed twice
#    with longer schedules (the resumed learning rate jumps back up: a warm restart): 3 minutes on a
#    150-minute schedule, then to 113 minutes in all at a peak of 2.5e-3 (dev WER 65% after the first piece,
#    39% at the end; docs/models.md).
FIRST=(--train-manifest $DATA/train_cpu_first.jsonl "${COMMON[@]}")
# shellcheck disable=SC2046
$TRANSDEC train "${FIRST[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 50
# shellcheck disable=SC2046
$TRANSDEC train "${FIRST[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 150 \
    --time-limit 3
# shellcheck disable=SC2046
$TRANSDEC train "${FIRST[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt --budget 113 \
    --peak-lr 2.5e-3
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-rnnt --last 5 --output exp/cpu3/tiny-en-rnnt.pt
# The first multi-blank model: the RNN-T encoder, stateless predictor and joint fresh, 45 minutes on one
# thread (the first TDT model ran beside it; the TDT of step 4 replaces it).
# shellcheck disable=SC2046
$TRANSDEC train "${FIRST[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu3/tiny-en-multiblank \
    --budget 45 --threads 1 --warmup-steps 200 --init-from exp/cpu3/tiny-en-rnnt.pt --init-encoder-only
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-multiblank --last 5 --output exp/cpu3/tiny-en-multiblank.pt

# 3. RNN-T continued on all the data, without dropout (docs/models.md, "Convergence"): 60 more minutes with
#    both threads, batches of 100 s, peak 1.5e-3 (dev WER 44% -> 24%).
LATER=(--train-manifest $DATA/train_cpu.jsonl "${COMMON[@]}" --dropout 0 --batch-seconds 100 --peak-lr 1.5e-3
       --warmup-steps 200)
# shellcheck disable=SC2046
$TRANSDEC train "${LATER[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu3/tiny-en-rnnt-2 --budget 60 \
    --init-from exp/cpu3/tiny-en-rnnt.pt
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-rnnt-2 --last 5 --output exp/cpu3/tiny-en-rnnt-2.pt

# 4. TDT from all of the new RNN-T's weights (its duration outputs start fresh) and multi-blank continued from
#    its own first model, 20 minutes each, the two at once with one thread each.
# shellcheck disable=SC2046
$TRANSDEC train "${LATER[@]}" $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu3/tiny-en-tdt --budget 20 \
    --threads 1 --init-from exp/cpu3/tiny-en-rnnt-2.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${LATER[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu3/tiny-en-multiblank-2 \
    --budget 20 --threads 1 --init-from exp/cpu3/tiny-en-multiblank.pt &
wait

# 5. The first bundled files (2026-11-23, first round): the last five checkpoints averaged, float16.
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-rnnt-2 --last 5 --half --output exp/cpu3/tiny-en-rnnt-3.pt
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-tdt --last 5 --half --output exp/cpu3/tiny-en-tdt.pt
$TRANSDEC average --exp-dir exp/cpu3/tiny-en-multiblank-2 --last 5 --half --output exp/cpu3/tiny-en-multiblank-2.pt

# 6. Second round (2026-11-23): RNN-T and multi-blank continued from those files with the pruned loss (5 rows
#    per frame, 1.67x faster steps; docs/benchmarks.md), the two at once with one thread each, 120 minutes. (The
#    simple joint of these two runs started random: the CTC-head start of `transdec train` came after them.)
CONTINUED=(--train-manifest $DATA/train_cpu.jsonl "${COMMON[@]}" --dropout 0 --batch-seconds 100 --peak-lr 1.5e-3
           --warmup-steps 200 --threads 1 --prune-range 5 --budget 120)
# shellcheck disable=SC2046
$TRANSDEC train "${CONTINUED[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu6/tiny-en-rnnt \
    --init-from exp/cpu3/tiny-en-rnnt-3.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${CONTINUED[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu6/tiny-en-multiblank \
    --init-from exp/cpu3/tiny-en-multiblank-2.pt &
wait
$TRANSDEC average --exp-dir exp/cpu6/tiny-en-rnnt --last 5 --output exp/cpu6/tiny-en-rnnt.pt
$TRANSDEC average --exp-dir exp/cpu6/tiny-en-multiblank --last 5 --output exp/cpu6/tiny-en-multiblank.pt

# 7. TDT from all of the new RNN-T's weights and multi-blank continued once more, 30 minutes each at a lower
#    peak (5e-4 after 100 warm-up steps), the two at once with one thread each.
LOWER_PEAK=(--train-manifest $DATA/train_cpu.jsonl "${COMMON[@]}" --dropout 0 --batch-seconds 100 --peak-lr 5e-4
       --warmup-steps 100 --threads 1 --prune-range 5 --budget 30)
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu6/tiny-en-tdt \
    --init-from exp/cpu6/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu6/tiny-en-multiblank-2 \
    --init-from exp/cpu6/tiny-en-multiblank.pt &
wait

$TRANSDEC average --exp-dir exp/cpu6/tiny-en-multiblank-2 --last 5 --output exp/cpu6/tiny-en-multiblank-2.pt

# 8. Third round: RNN-T and multi-blank continued once more, 105 minutes at peak 1e-3 after 200 warm-up steps,
#    the two at once with one thread each.
THIRD=(--train-manifest $DATA/train_cpu.jsonl "${COMMON[@]}" --dropout 0 --batch-seconds 100 --peak-lr 1e-3
       --warmup-steps 200 --threads 1 --prune-range 5 --budget 105)
# shellcheck disable=SC2046
$TRANSDEC train "${THIRD[@]}" $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu7/tiny-en-rnnt \
    --init-from exp/cpu6/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${THIRD[@]}" $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu7/tiny-en-multiblank \
    --init-from exp/cpu6/tiny-en-multiblank-2.pt &
wait

$TRANSDEC average --exp-dir exp/cpu7/tiny-en-rnnt --last 5 --output exp/cpu7/tiny-en-rnnt.pt
$TRANSDEC average --exp-dir exp/cpu7/tiny-en-multiblank --last 5 --output exp/cpu7/tiny-en-multiblank.pt

# 9. TDT again, from all of the third-round RNN-T's weights: 22 minutes with both threads, peak 5e-4 after 100
#    warm-up steps.
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --threads 2 --budget 22 $(bundled_head_options tiny-en-tdt) \
    --exp-dir exp/cpu7/tiny-en-tdt --init-from exp/cpu7/tiny-en-rnnt.pt

# 10. More Piper (2026-11-24): the third-round RNN-T had 1.6% greedy WER on its own Piper training utterances
#     but 18% on held-out Piper ones, so it had learnt the 6,000 Piper utterances rather than the voice.
#     Piper now also reads the first 10,155 espeak-ng training sentences (synthesis was stopped there after
#     26 minutes on the 2 cores); every Piper utterance is listed twice (78,310 lines in all).
# The manifest of the later rounds: train and train_piper_extra, every Piper utterance listed twice.
piper_twice_manifest() {  # piper_twice_manifest OUT.jsonl
    $PY recipes/synthetic_corpus.py manifest --out $DATA --splits train_piper_extra --audio-format wav
    $PY - "$DATA" "$1" <<'PY'
import json
import sys

data, out = sys.argv[1:]
lines = [line for name in ("train", "train_piper_extra")
         for line in open(f"{data}/{name}.jsonl").read().splitlines()]
with open(out, "w") as f:
    for line in lines:
        f.write((line + "\n") * (2 if json.loads(line)["voice"] == "piper" else 1))
PY
}
more_piper() {  # more_piper N OUT.jsonl: Piper also reads the first N espeak-ng training sentences
    $PY recipes/synthetic_corpus.py text --out $DATA --train-piper-extra "$1"
    $PY recipes/synthetic_corpus.py audio --out $DATA --splits train_piper_extra --audio-format wav
    piper_twice_manifest "$2"
}
more_piper "${EXTRA_PIPER:-10155}" $DATA/train_cpu2.jsonl

#     Fourth round on it (2026-11-24): RNN-T and multi-blank continued from the third-round averages (that
#     session's exp/ was gone, so from their float16 copies, the bundled files of commit f726916), 62 minutes at
#     peak 5e-4 after 100 warm-up steps, one thread each, two at a time.
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu2.jsonl --budget 62 \
    $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu8/tiny-en-rnnt --init-from exp/cpu7/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu2.jsonl --budget 62 \
    $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu8/tiny-en-multiblank \
    --init-from exp/cpu7/tiny-en-multiblank.pt &
wait

$TRANSDEC average --exp-dir exp/cpu8/tiny-en-rnnt --last 5 --output exp/cpu8/tiny-en-rnnt.pt

# 11. TDT again, from all of the fourth-round RNN-T's weights, as in step 9 on the new data.
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu2.jsonl --threads 2 --budget 12 \
    $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu8/tiny-en-tdt --init-from exp/cpu8/tiny-en-rnnt.pt

# 12. Fifth round (2026-11-24): multi-blank first continued 30 minutes on the step-10 data, one thread, while
#     Piper read espeak-ng training sentences 10,155-16,187 on the other core (synthesis stopped when the run
#     ended); then RNN-T (from step 10) and multi-blank continued 62 minutes each on all 16,188 extra Piper
#     utterances (every Piper utterance listed twice, 90,376 lines), same settings as step 10.
$TRANSDEC average --exp-dir exp/cpu8/tiny-en-multiblank --last 5 --output exp/cpu8/tiny-en-multiblank.pt
EXTRA_PIPER_5=${EXTRA_PIPER_5:-16188}
$PY recipes/synthetic_corpus.py text --out $DATA --train-piper-extra "$EXTRA_PIPER_5"
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_piper_extra --audio-format wav --jobs 1 &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu2.jsonl --budget 30 \
    $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu9/tiny-en-multiblank \
    --init-from exp/cpu8/tiny-en-multiblank.pt
$TRANSDEC average --exp-dir exp/cpu9/tiny-en-multiblank --last 5 --output exp/cpu9/tiny-en-multiblank.pt
wait
piper_twice_manifest $DATA/train_cpu3.jsonl
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu3.jsonl --budget 62 \
    $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu9/tiny-en-rnnt --init-from exp/cpu8/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu3.jsonl --budget 62 \
    $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu9/tiny-en-multiblank-2 \
    --init-from exp/cpu9/tiny-en-multiblank.pt &
wait
$TRANSDEC average --exp-dir exp/cpu9/tiny-en-rnnt --last 5 --output exp/cpu9/tiny-en-rnnt.pt

# 13. TDT again, from all of the fifth-round RNN-T's weights, as in step 11.
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu3.jsonl --threads 2 --budget 12 \
    $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu9/tiny-en-tdt --init-from exp/cpu9/tiny-en-rnnt.pt

# 14. Sixth round (2026-11-24): Piper read espeak-ng training sentences 16,188-29,999 too (two processes, 34
#     minutes; 30,000 extra Piper utterances, every Piper utterance listed twice, 118,000 lines); then RNN-T and
#     multi-blank continued 95 minutes each from the fifth-round averages, same settings as step 10. (A
#     session ended 3.5 minutes into runs started with a 62-minute budget; they resumed with 95, and from
#     minute 11 on with tcmalloc preloaded, 1.27x more steps per minute; `transdec train` now keeps freed
#     memory itself, docs/benchmarks.md, "Memory allocator".)
more_piper 30000 $DATA/train_cpu4.jsonl
$TRANSDEC average --exp-dir exp/cpu9/tiny-en-multiblank-2 --last 5 --output exp/cpu9/tiny-en-multiblank-2.pt
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu4.jsonl --budget 95 \
    $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu10/tiny-en-rnnt --init-from exp/cpu9/tiny-en-rnnt.pt &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu4.jsonl --budget 95 \
    $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu10/tiny-en-multiblank \
    --init-from exp/cpu9/tiny-en-multiblank-2.pt &
wait
$TRANSDEC average --exp-dir exp/cpu10/tiny-en-rnnt --last 5 --output exp/cpu10/tiny-en-rnnt.pt

# 15. TDT again, from all of the sixth-round RNN-T's weights, as in step 11.
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest $DATA/train_cpu4.jsonl --threads 2 --budget 12 \
    $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu10/tiny-en-tdt --init-from exp/cpu10/tiny-en-rnnt.pt

# 16. Seventh round (2026-11-24): Piper read the remaining espeak-ng training sentences too (46,000 extra Piper
#     utterances, every Piper utterance listed twice, 150,000 lines; the last 16,000 took 40 minutes on the 2
#     cores); then RNN-T continued 90 minutes and TDT 18 minutes from its average on one core while
#     multi-blank continued 110 minutes on the other, all from the sixth-round averages, same settings as
#     step 10 (the runs had tcmalloc preloaded, as in step 14).
long_round() {  # long_round MANIFEST FROM TO: RNN-T 90 min then TDT 18 on one core, multi-blank 110 on the other
    local manifest=$1 from=$2 to=$3
    $TRANSDEC average --exp-dir exp/$from/tiny-en-multiblank --last 5 --output exp/$from/tiny-en-multiblank.pt
    (
        # shellcheck disable=SC2046
        $TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest "$manifest" --budget 90 \
            $(bundled_head_options tiny-en-rnnt) --exp-dir exp/$to/tiny-en-rnnt \
            --init-from exp/$from/tiny-en-rnnt.pt
        $TRANSDEC average --exp-dir exp/$to/tiny-en-rnnt --last 5 --output exp/$to/tiny-en-rnnt.pt
        # shellcheck disable=SC2046
        $TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest "$manifest" --budget 18 \
            $(bundled_head_options tiny-en-tdt) --exp-dir exp/$to/tiny-en-tdt --init-from exp/$to/tiny-en-rnnt.pt
    ) &
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" --train-manifest "$manifest" --budget 110 \
        $(bundled_head_options tiny-en-multiblank) --exp-dir exp/$to/tiny-en-multiblank \
        --init-from exp/$from/tiny-en-multiblank.pt &
    wait
}
more_piper 46000 $DATA/train_cpu5.jsonl
long_round $DATA/train_cpu5.jsonl cpu10 cpu11

# 17. Eighth round (2026-11-24): new sentences, since the Bible and fortunes are used up: the 39,786 WordNet
#     usage examples, each read by espeak-ng and Piper (79,572 utterances, about an hour of synthesis on the 2
#     cores); one manifest of the 98,000 old utterances once and the new ones twice (the old ones have been
#     seen about twice already), 257,144 lines. Then as step 16, from the seventh-round averages. (A round of
#     more passes over the old data alone was started and abandoned for this one.)
$PY recipes/synthetic_corpus.py text --out $DATA --train-piper-extra 46000 --train-wordnet 39786
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits train_wordnet --audio-format wav
cat $DATA/train.jsonl $DATA/train_piper_extra.jsonl $DATA/train_wordnet.jsonl $DATA/train_wordnet.jsonl \
    > $DATA/train_cpu6.jsonl
long_round $DATA/train_cpu6.jsonl cpu11 cpu13

# 18. Ninth round (2026-11-24): the same manifest again, from the eighth-round averages. (This run was stopped
#     after 4.5 minutes at the end of a session and resumed from its step-400 checkpoints in the next.)
long_round $DATA/train_cpu6.jsonl cpu13 cpu14

# 19. Tenth round (2026-11-24): new sentences again, WordNet's 88,676 definitions (`--train-glosses`), read by
#     espeak-ng (11 minutes for all) and by Piper (~9 utterances/s on the 2 cores; the synthesis was stopped
#     after the first 17,293, and only those are used). One manifest of the 98,000 old utterances and the
#     79,572 WordNet examples once and the 105,969 definitions twice, 389,510 lines; then as step 16, from the
#     ninth-round averages. Not bundled: better on espeak-ng, worse on Piper and overall (docs/models.md).
$PY recipes/synthetic_corpus.py text --out $DATA --train-piper-extra 46000 --train-wordnet 39786 \
    --train-glosses 88676
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --splits train_wordnet_glosses --audio-format wav
$PY - <<'PY'
import json
piper_used = 17293
definitions = [line for line in open("data/synth/train_wordnet_glosses.jsonl")
               if json.loads(line)["voice"] == "espeak"
               or int(json.loads(line)["audio_filepath"].removesuffix(".wav").rsplit("-", 1)[1]) < piper_used]
with open("data/synth/train_cpu7.jsonl", "w") as out:
    for name in ("train", "train_piper_extra", "train_wordnet"):
        out.writelines(open(f"data/synth/{name}.jsonl"))
    out.writelines(definitions + definitions)
PY
long_round $DATA/train_cpu7.jsonl cpu14 cpu15

# 20. (The bundled files of 2026-11-24 were the ninth round's, step 18, averaged as in step 22.)
# 21. Eleventh round (2026-11-25): the ninth round's manifest with long-form rows (`--long-form-share 0.25
#     --long-form-seconds 40`: a quarter of the utterances joined into rows of up to 40 s each epoch, docs/models.md,
#     "Long recordings"), from the ninth-round averages; RNN-T 75 minutes then TDT 15 from its average on one
#     core, multi-blank 90 minutes on the other, otherwise as step 16.
LONG_FORM=(--long-form-share 0.25 --long-form-seconds 40)
(
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu6.jsonl --budget 75 \
        $(bundled_head_options tiny-en-rnnt) --exp-dir exp/cpu16/tiny-en-rnnt --init-from exp/cpu14/tiny-en-rnnt.pt
    $TRANSDEC average --exp-dir exp/cpu16/tiny-en-rnnt --last 5 --output exp/cpu16/tiny-en-rnnt.pt
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu6.jsonl --budget 15 \
        $(bundled_head_options tiny-en-tdt) --exp-dir exp/cpu16/tiny-en-tdt --init-from exp/cpu16/tiny-en-rnnt.pt
) &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu6.jsonl --budget 90 \
    $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu16/tiny-en-multiblank \
    --init-from exp/cpu14/tiny-en-multiblank.pt &
wait

# 22. The files bundled from the eleventh round (until step 24 replaced them): the last five checkpoints
#     averaged, float16, with local attention of CONTEXT frames each side set afterwards (no weight changes;
#     docs/models.md, "Long recordings"); then the measurements for the docs.
CONTEXT=48
for name in "${BUNDLED_NAMES[@]}"; do
    $TRANSDEC average --exp-dir exp/cpu16/$name --last 5 --half --output src/transdec/pretrained/$name.pt
    $PY recipes/set_attention_context.py src/transdec/pretrained/$name.pt src/transdec/pretrained/$name.pt \
        --frames $CONTEXT
done
recipes/measure_bundled.sh

# 23. Twelfth round (2026-11-25): the encoders grown from 4 to 6 Conformer blocks (a block that
#     starts as the identity inserted after blocks 1 and 3, `recipes/grow_encoder.py`; RNN-T 4.18 M parameters,
#     multi-blank 3.36 M) and trained with local attention of 32 frames (receptive field 235 frames, 18.8 s);
#     data: Piper's readings of the first 25,387 definitions listed twice, espeak-ng's readings of as many other
#     definitions once, the 98,000 older utterances and the 79,572 WordNet examples once (253,733 lines, 56%
#     Piper); long-form rows as in step 21. RNN-T 95 minutes, then TDT 15 from its average; multi-blank 110.
#     (Until 2026-11-25 grow_encoder.py left the new blocks' random layers unseeded, so this step and step 25
#     grew their files with other random values than the script's --seed 0 gives now.)
$PY - <<'PY'
import json
piper_used = 25387  # the contiguous prefix of Piper's readings of the definitions synthesised by then
piper, espeak = [], []
for line in open("data/synth/train_wordnet_glosses.jsonl"):
    row = json.loads(line)
    index = int(row["audio_filepath"].removesuffix(".wav").rsplit("-", 1)[1])
    if row["voice"] == "piper" and index < piper_used:
        piper.append(line)
    elif row["voice"] == "espeak" and piper_used <= index < 2 * piper_used:
        espeak.append(line)
with open("data/synth/train_cpu8.jsonl", "w") as out:
    for name in ("train", "train_piper_extra", "train_wordnet"):
        out.writelines(open(f"data/synth/{name}.jsonl"))
    out.writelines(piper + piper + espeak)
PY
mkdir -p exp/grow
for name in tiny-en-rnnt tiny-en-multiblank; do
    $PY recipes/grow_encoder.py exp/cpu16/$name.pt exp/grow/$name.pt --after 1 3
done
SIX_BLOCKS=(--train-manifest $DATA/train_cpu8.jsonl "${LONG_FORM[@]}" --layers 6 --attention-context 32)
(
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${SIX_BLOCKS[@]}" --budget 95 $(bundled_head_options tiny-en-rnnt) \
        --exp-dir exp/cpu17/tiny-en-rnnt --init-from exp/grow/tiny-en-rnnt.pt
    $TRANSDEC average --exp-dir exp/cpu17/tiny-en-rnnt --last 5 --output exp/cpu17/tiny-en-rnnt.pt
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${SIX_BLOCKS[@]}" --budget 15 $(bundled_head_options tiny-en-tdt) \
        --exp-dir exp/cpu17/tiny-en-tdt --init-from exp/cpu17/tiny-en-rnnt.pt
) &
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" "${SIX_BLOCKS[@]}" --budget 110 $(bundled_head_options tiny-en-multiblank) \
    --exp-dir exp/cpu17/tiny-en-multiblank --init-from exp/grow/tiny-en-multiblank.pt &
wait

# 24. The bundled files, from the twelfth round: the last five checkpoints averaged, float16 (local attention of
#     32 frames as trained); then the measurements for the docs.
for name in "${BUNDLED_NAMES[@]}"; do
    $TRANSDEC average --exp-dir exp/cpu17/$name --last 5 --half --output src/transdec/pretrained/$name.pt
done
recipes/measure_bundled.sh

# 25. Thirteenth round (2026-11-25, on a fresh machine: the corpus synthesised again, Piper now fixed by the
#     plan, so step 1's dev and test sets as well): multi-blank only, grown from the step-24 file to 8 blocks
#     (4.32 M parameters, RNN-T 4.18 M), one thread for 110 minutes in three pieces while the other core
#     synthesised Piper's readings of the definitions in order; each piece started from a manifest of what
#     existed: the train split (Piper x2), the WordNet examples read by espeak-ng, espeak-ng's readings of
#     definitions 25,387-50,773, and Piper's readings of the first 109, 11,535 and 23,096 definitions (x2).
#     Not bundled: held-out 8.44% against the step-24 file's 8.40% (espeak-ng better, Piper worse; docs/models.md).
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet --voices espeak --audio-format wav
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices espeak \
    --index-range 25387 50774 --audio-format wav
$PY recipes/grow_encoder.py src/transdec/pretrained/tiny-en-multiblank.pt exp/grow/tiny-en-multiblank-8.pt \
    --after 2 4
PIECE_LIMIT=(--time-limit 35)
for piper_definitions in 109 11535 23096; do
    $PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices piper \
        --index-range 0 $piper_definitions --audio-format wav
    $PY recipes/synthetic_corpus.py manifest --out $DATA --splits train train_wordnet train_wordnet_glosses \
        --audio-format wav
    $PY recipes/mix_manifest.py $DATA/train_cpu9.jsonl --data $DATA \
        --splits train train_wordnet train_wordnet_glosses --piper-copies train=2 train_wordnet_glosses=2
    [ $piper_definitions = 23096 ] && PIECE_LIMIT=()
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu9.jsonl --layers 8 \
        --attention-context 32 --budget 110 "${PIECE_LIMIT[@]}" $(bundled_head_options tiny-en-multiblank) \
        --exp-dir exp/cpu18/tiny-en-multiblank --init-from exp/grow/tiny-en-multiblank-8.pt
done
$TRANSDEC average --exp-dir exp/cpu18/tiny-en-multiblank --last 5 --output exp/cpu18/tiny-en-multiblank.pt

# 26. Fourteenth round (2026-11-25, same machine as step 25): step 25's multi-blank fine-tuned on a Piper-heavy
#     mix, one thread for 100 minutes (peak 4e-4) in three pieces while the other core synthesised Piper's
#     readings of training sentences (train_piper_extra) in order. Each piece's manifest: the train split's
#     espeak-ng sentences, a seeded half of the espeak-ng examples and definitions, and Piper x3 (train
#     sentences, the first 307, 9,106 and 17,947 train_piper_extra sentences) or x2 (the first 36,834
#     definitions): 54%, 60% and 65% Piper. (Piece 1's seed was 62,051, the size in bytes of that manifest's
#     train_piper_extra.jsonl; later pieces use the number of its rows.)
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices piper \
    --index-range 0 36834 --audio-format wav
PIPER_HEAVY=(--splits train train_wordnet train_wordnet_glosses train_piper_extra --espeak-share 0.5
             --espeak-whole train --piper-copies train=3 train_wordnet_glosses=2 train_piper_extra=3)
remix() {  # MIX SEED [SPLIT=COPIES...]: the split manifests again, then the Piper-heavy mix MIX; the pairs
           # given extend PIPER_HEAVY's --piper-copies list, which ends it
    $PY recipes/synthetic_corpus.py manifest --out $DATA --audio-format wav \
        --splits train train_wordnet train_wordnet_glosses train_piper_extra
    $PY recipes/mix_manifest.py "$1" --data $DATA "${PIPER_HEAVY[@]}" "${@:3}" --seed "$2"
}
piper_mix() {  # MIX SENTENCES SEED [SYNTHESIS OPTIONS...]: Piper reads the first SENTENCES train_piper_extra
               # sentences (those not there yet), then remix MIX SEED
    $PY recipes/synthetic_corpus.py audio --out $DATA --splits train_piper_extra --voices piper \
        --index-range 0 "$2" --audio-format wav "${@:4}"
    remix "$1" "$3"
}
PIECE_LIMIT=(--time-limit 35)
for piper_sentences in 307 9106 17947; do
    SEED=$piper_sentences; [ $piper_sentences = 307 ] && SEED=62051
    piper_mix $DATA/train_cpu10.jsonl $piper_sentences $SEED
    [ $piper_sentences = 17947 ] && PIECE_LIMIT=()
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu10.jsonl --layers 8 \
        --attention-context 32 --peak-lr 4e-4 --budget 100 "${PIECE_LIMIT[@]}" \
        $(bundled_head_options tiny-en-multiblank) --exp-dir exp/cpu19/tiny-en-multiblank \
        --init-from exp/cpu18/tiny-en-multiblank.pt
done

# 27. The bundled multi-blank file, from the fourteenth round (RNN-T and TDT stay step 24's); then the
#     measurements for the docs.
$TRANSDEC average --exp-dir exp/cpu19/tiny-en-multiblank --last 5 --half \
    --output src/transdec/pretrained/tiny-en-multiblank.pt
rm -f exp/measure/*.txt
recipes/measure_bundled.sh

# 28. Fifteenth round (2026-11-25, same machine as step 25): the RNN-T of step 24 grown to 8 blocks (5.14 M
#     parameters; the grown file came from the unseeded script, see step 23) and trained on step 26's Piper-heavy
#     mix, peak 5e-4, one thread, in 35-minute pieces while the other core synthesised more train_piper_extra
#     sentences: pieces started with the first 25,487, 33,959, 35,505 and then 36,235 of them (68-71% Piper;
#     seed = that count). The second piece was cut short by the end of a session (resumed from the checkpoint
#     at 40.6 minutes) and the budget then cut from 200 to 170 minutes; the synthesis was stopped at 36,235
#     sentences to give the other core to step 29.
$PY recipes/grow_encoder.py src/transdec/pretrained/tiny-en-rnnt.pt exp/grow/tiny-en-rnnt-8.pt --after 2 4
for piece in 25487:200:35 33959:200:6 35505:170:35 36235:170:35 36235:170:35 36235:170:35; do
    IFS=: read -r piper_sentences budget minutes <<< "$piece"
    piper_mix $DATA/train_cpu11.jsonl $piper_sentences $piper_sentences
    [ $piper_sentences = 35505 ] && cp $DATA/train_cpu11.jsonl $DATA/train_cpu12.jsonl  # step 29's data
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu11.jsonl --layers 8 \
        --attention-context 32 --budget $budget --time-limit $minutes $(bundled_head_options tiny-en-rnnt) \
        --exp-dir exp/cpu20/tiny-en-rnnt --init-from exp/grow/tiny-en-rnnt-8.pt
done

# 29. Sixteenth round (2026-11-25, beside step 28 on the other core): the fourteenth-round multi-blank
#     (step 26's last five checkpoints averaged, float32) fine-tuned again on the mix of step 28's third piece
#     (35,505 train_piper_extra sentences), peak 3e-4, 105 minutes on one thread. Held-out 7.29%
#     (espeak-ng 5.71%, Piper 8.91%) against step 26's 8.03%; step 28: 6.86% (6.16%, 7.59%), step 24 7.46%.
$TRANSDEC average --exp-dir exp/cpu19/tiny-en-multiblank --last 5 --output exp/cpu19/tiny-en-multiblank.pt
# shellcheck disable=SC2046
$TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu12.jsonl --layers 8 \
    --attention-context 32 --peak-lr 3e-4 --budget 105 $(bundled_head_options tiny-en-multiblank) \
    --exp-dir exp/cpu21/tiny-en-multiblank --init-from exp/cpu19/tiny-en-multiblank.pt

# 30. The bundled RNN-T and multi-blank files, from steps 28 and 29 (TDT stays step 24's); then the
#     measurements for the docs.
bundle() {  # RNNT_EXP MULTIBLANK_EXP: exp/RNNT_EXP/tiny-en-rnnt's and exp/MULTIBLANK_EXP/tiny-en-multiblank's last
            # five checkpoints averaged into the package (float16), then every measurement taken again
    $TRANSDEC average --exp-dir exp/$1/tiny-en-rnnt --last 5 --half --output src/transdec/pretrained/tiny-en-rnnt.pt
    $TRANSDEC average --exp-dir exp/$2/tiny-en-multiblank --last 5 --half \
        --output src/transdec/pretrained/tiny-en-multiblank.pt
    rm -f exp/measure/*.txt
    recipes/measure_bundled.sh
}
bundle cpu20 cpu21

# 31. Seventeenth and eighteenth rounds (2026-11-25, one thread each, side by side), both on step 28's final
#     mix (train_cpu11.jsonl at 36,235 train_piper_extra sentences): the sixteenth-round multi-blank (step 29's
#     last five checkpoints averaged, float32) again at peak 2e-4 for 90 minutes (started with a 120-minute
#     budget, cut to 90 on resuming in the next session), and the fifteenth-round RNN-T (step 28's average,
#     float32) at peak 2e-4 for 80 minutes with seed 2 (another batch order).
ROUND_MIX=$DATA/train_cpu11.jsonl
continue_round() {  # NAME FROM TO BUDGET SEED [BLOCKS]: exp/FROM/NAME's last five checkpoints averaged (float32),
                   # then trained on $ROUND_MIX at peak 2e-4 into exp/TO/NAME, in the background on one thread;
                   # BLOCKS is the encoder depth, 8 unless given
    $TRANSDEC average --exp-dir exp/$2/$1 --last 5 --output exp/$2/$1.pt
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest "$ROUND_MIX" --layers "${6:-8}" \
        --attention-context 32 --peak-lr 2e-4 --budget $4 --seed $5 $(bundled_head_options $1) \
        --exp-dir exp/$3/$1 --init-from exp/$2/$1.pt &
}
continue_round tiny-en-multiblank cpu21 cpu22 90 1  # seed 1: the default, as that run had
continue_round tiny-en-rnnt cpu20 cpu23 80 2
wait

# 32. Nineteenth and twentieth rounds (2026-11-25, the same way): step 31's RNN-T (seed 3) and multi-blank
#     (seed 4), at 85 minutes each.
continue_round tiny-en-rnnt cpu23 cpu24 85 3
continue_round tiny-en-multiblank cpu22 cpu25 85 4
wait

# 33. The bundled RNN-T and multi-blank files, from step 32 (TDT stays step 24's); then the measurements for
#     the docs.
bundle cpu24 cpu25

# 34. Twenty-first and twenty-second rounds (2026-11-25, the same way): step 32's RNN-T (seed 5) and multi-blank
#     (seed 6), at 65 minutes each (started with 85, cut on resuming at minute 6 to finish inside the session).
#     Held-out 6.46% and 6.80% (6.49% and 6.87% before): the rounds on this mix have levelled off.
continue_round tiny-en-rnnt cpu24 cpu26 65 5
continue_round tiny-en-multiblank cpu25 cpu27 65 6
wait

# 35. Twenty-third and twenty-fourth rounds (2026-11-25, the same machine): Piper reads the rest of
#     train_piper_extra (sentences 36,235-45,999, 22 minutes on both cores), a new mix with the same voice balance
#     (train_cpu14.jsonl, 308,321 rows, 74% Piper), then step 34's RNN-T (seed 7) and multi-blank (seed 8) on it,
#     100 minutes each. Held-out RNN-T 6.16% (6.46% before), multi-blank 6.86% (6.80% before).
piper_mix $DATA/train_cpu14.jsonl 46000 46000 --jobs 2
ROUND_MIX=$DATA/train_cpu14.jsonl
continue_round tiny-en-rnnt cpu26 cpu28 100 7
continue_round tiny-en-multiblank cpu27 cpu29 100 8
wait

# 36. The bundled RNN-T file from step 35 and multi-blank file from step 34 (TDT stays step 24's); then the
#     measurements for the docs.
bundle cpu28 cpu27

# 37. Twenty-fifth and twenty-sixth rounds (2026-11-25, the same machine): Piper reads WordNet's 39,786 usage
#     examples (train_wordnet; about 50 minutes on both cores, over two sessions), a new mix with them three times, as
#     the other Piper splits (train_cpu15.jsonl, 427,380 rows, 82% Piper), then step 35's RNN-T (seed 9) and
#     multi-blank (seed 10) on it, 100 minutes each. Held-out RNN-T 6.07% (espeak-ng 5.41%, Piper 6.75%; 6.16%
#     before), multi-blank 6.49% (5.50%, 7.50%; 6.80% before).
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet --voices piper --audio-format wav --jobs 2
remix $DATA/train_cpu15.jsonl 39786 train_wordnet=3
ROUND_MIX=$DATA/train_cpu15.jsonl
continue_round tiny-en-rnnt cpu28 cpu30 100 9
continue_round tiny-en-multiblank cpu29 cpu31 100 10
wait

# 38. The bundled RNN-T and multi-blank files, from step 37 (TDT stays step 24's); then the measurements for the
#     docs.
bundle cpu30 cpu31

# 39. Twenty-seventh and twenty-eighth rounds (2026-11-26, the same machine): Piper reads WordNet's definitions
#     36,834-58,529 (train_wordnet_glosses; about 35 minutes on both cores, over two sessions), a new mix with all
#     its Piper readings three times (train_cpu16.jsonl, 529,511 rows, 85% Piper), then step 37's RNN-T (seed 11)
#     and multi-blank (seed 12) on it, 110 minutes each. Held-out RNN-T 6.20% (espeak-ng 5.80%, Piper 6.60%),
#     multi-blank 6.67% (6.01%, 7.34%): better on Piper, worse on espeak-ng, whose share of the mix fell from 18% to
#     15%, so neither is bundled. The average of both rounds' last five checkpoints (step 37's and these) gives
#     6.02% and 6.44% (the soup commands below), 0.05 points better than step 37 each, within the test set's noise:
#     not bundled either.
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices piper \
    --index-range 0 58530 --audio-format wav --jobs 2
remix $DATA/train_cpu16.jsonl 58530 train_wordnet=3 train_wordnet_glosses=3
ROUND_MIX=$DATA/train_cpu16.jsonl
continue_round tiny-en-rnnt cpu30 cpu32 110 11
continue_round tiny-en-multiblank cpu31 cpu33 110 12
wait
$TRANSDEC average --exp-dir exp/cpu30/tiny-en-rnnt exp/cpu32/tiny-en-rnnt --half \
    --output exp/cpu32/tiny-en-rnnt-soup-half.pt
$TRANSDEC average --exp-dir exp/cpu31/tiny-en-multiblank exp/cpu33/tiny-en-multiblank --half \
    --output exp/cpu33/tiny-en-multiblank-soup-half.pt

# 40. Twenty-ninth and thirtieth rounds (2026-11-26, the same machine): Piper reads the rest of WordNet's
#     definitions (58,530-88,675) and espeak-ng the ones it had not read (0-25,386 and 50,774-88,675), a new mix
#     with the same settings as step 39 (train_cpu17.jsonl, 651,794 rows, 83% Piper), then step 39's soups
#     (float32) grown from 8 to 10 Conformer blocks (RNN-T 6.11 M parameters, multi-blank 5.29 M) and trained
#     on it at peak 3e-4 (warm-up 200 steps) for 100 minutes each, seeds 13 (RNN-T) and 14 (multi-blank).
#     Held-out RNN-T 6.63% (espeak-ng 6.14%, Piper 7.13%), multi-blank 6.91% (6.19%, 7.65%), and after 35 and 32
#     more minutes at peak 2e-4 (seeds 15 and 16, commands below) 6.67% and 7.01%: worse than step 37's files, so
#     neither is bundled.
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices piper \
    --index-range 58530 88676 --audio-format wav --jobs 2
for range in "0 25387" "50774 88676"; do
    # shellcheck disable=SC2086
    $PY recipes/synthetic_corpus.py audio --out $DATA --splits train_wordnet_glosses --voices espeak \
        --index-range $range --audio-format wav --jobs 2
done
remix $DATA/train_cpu17.jsonl 88676 train_wordnet=3 train_wordnet_glosses=3
grown_round() {  # NAME SOUP_FROM SOUP_TO TO SEED: the soup of exp/SOUP_FROM/NAME and exp/SOUP_TO/NAME (float32)
                 # grown to 10 blocks, then trained on train_cpu17.jsonl into exp/TO/NAME, in the background
    $TRANSDEC average --exp-dir exp/$2/$1 exp/$3/$1 --output exp/grow/$1-soup.pt
    $PY recipes/grow_encoder.py exp/grow/$1-soup.pt exp/grow/$1-10.pt --after 3 5 --seed 10
    # shellcheck disable=SC2046
    $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest $DATA/train_cpu17.jsonl --layers 10 \
        --attention-context 32 --peak-lr 3e-4 --warmup-steps 200 --budget 100 --seed $5 \
        $(bundled_head_options $1) --exp-dir exp/$4/$1 --init-from exp/grow/$1-10.pt &
}
grown_round tiny-en-rnnt cpu30 cpu32 cpu34 13
grown_round tiny-en-multiblank cpu31 cpu33 cpu35 14
wait
ROUND_MIX=$DATA/train_cpu17.jsonl
continue_round tiny-en-rnnt cpu34 cpu36 35 15 10
continue_round tiny-en-multiblank cpu35 cpu37 32 16 10
wait

# 41. Thirty-first and thirty-second rounds (2026-11-26, a fresh 2-core Zen 5 EPYC: the corpus was synthesised
#     again, all but train_piper_extra's Piper readings), not bundled: a mix of every reading there, Piper x3
#     (train_cpu18.jsonl, 577,848 rows, 70% Piper), then the bundled RNN-T (seed 19) and multi-blank (seed 20) on
#     it with --bf16 (linear layers only: ~1.3x the steps), peak 2e-4, 100 minutes each. Held-out RNN-T 6.23%
#     (espeak-ng 5.43%, Piper 7.06%), multi-blank 7.58% (6.01%, 9.19%); each averaged with the bundled file it
#     started from, 5.97% (5.28%, 6.68%) and 6.66% (5.47%, 7.88%).
$PY recipes/mix_manifest.py $DATA/train_cpu18.jsonl --data $DATA --splits train train_wordnet train_wordnet_glosses \
    --piper-copies train=3 train_wordnet=3 train_wordnet_glosses=3 --seed 88676
bf16_round() {  # MIX EXP RNNT_START RNNT_SEED MB_START MB_SEED: both models from these files, 100 minutes
                # (BUDGET_MIN) at peak 2e-4 (PEAK_LR) on MIX with --bf16 side by side into exp/EXP, then each
                # averaged (NAME-half.pt) and that averaged with its start file (NAME-soup-half.pt)
    local -A start=([tiny-en-rnnt]=$3 [tiny-en-multiblank]=$5) seed=([tiny-en-rnnt]=$4 [tiny-en-multiblank]=$6)
    for name in tiny-en-rnnt tiny-en-multiblank; do
        # shellcheck disable=SC2046
        $TRANSDEC train "${LOWER_PEAK[@]}" "${LONG_FORM[@]}" --train-manifest "$1" --layers 8 --attention-context 32 \
            --peak-lr "${PEAK_LR:-2e-4}" --budget "${BUDGET_MIN:-100}" --bf16 --seed "${seed[$name]}" \
            $(bundled_head_options $name) --exp-dir "exp/$2/$name" --init-from "${start[$name]}" &
    done
    wait
    for name in tiny-en-rnnt tiny-en-multiblank; do
        $TRANSDEC average --exp-dir "exp/$2/$name" --last 5 --half --output "exp/$2/$name-half.pt"
        $PY recipes/average_models.py "${start[$name]}" "exp/$2/$name-half.pt" --output "exp/$2/$name-soup-half.pt"
    done
}
bf16_round $DATA/train_cpu18.jsonl cpu40 src/transdec/pretrained/tiny-en-rnnt.pt 19 \
    src/transdec/pretrained/tiny-en-multiblank.pt 20
# 42. Thirty-third and thirty-fourth rounds (2026-11-26, the same machine), not bundled: Piper had read the first
#     6,994 train_piper_extra sentences again (the rest would have taken the run's time); a mix of every reading,
#     Piper x3 (train_cpu19.jsonl, 598,827 rows, 71% Piper), then step 41's RNN-T soup (seed 21, 11,589 steps)
#     and the bundled multi-blank (seed 22, 11,977) on it, as in step 41. Held-out RNN-T 6.34% (espeak-ng
#     5.62%, Piper 7.08%), multi-blank 7.23% (5.84%, 8.66%); each averaged with the file it started from, 5.92%
#     (5.26%, 6.60%) and 6.51% (5.43%, 7.61%). The RNN-T soup is 16 words better than the bundled file, not
#     significant (77 test utterances better, 69 worse: recipes/paired_wer.py).
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_piper_extra --voices piper --index-range 0 6994 \
    --audio-format wav
$PY recipes/synthetic_corpus.py manifest --out $DATA --audio-format wav --splits train_piper_extra
$PY recipes/mix_manifest.py $DATA/train_cpu19.jsonl --data $DATA \
    --splits train train_wordnet train_wordnet_glosses train_piper_extra \
    --piper-copies train=3 train_wordnet=3 train_wordnet_glosses=3 train_piper_extra=3 --seed 46000
bf16_round $DATA/train_cpu19.jsonl cpu41 exp/cpu40/tiny-en-rnnt-soup-half.pt 21 \
    src/transdec/pretrained/tiny-en-multiblank.pt 22
# 43. Thirty-fifth and thirty-sixth rounds (2026-11-26, the same machine), not bundled: new texts, GCIDE's block
#     quotations (train_gcide, 31,370 sentences; needs `apt-get install dict-gcide`), read by both voices; Piper had
#     read 587 more train_piper_extra sentences. A mix of every reading, Piper x3 (train_cpu20.jsonl, 726,071 rows,
#     72% Piper), then step 42's RNN-T soup (seed 23, 11,283 steps) and the bundled multi-blank (seed 24, 11,590)
#     on it, as in step 41. Held-out RNN-T 6.18%, multi-blank 7.38% (significantly worse than the bundled file);
#     each averaged with the file it started from, 5.91% and 6.60%: no significant gain (recipes/paired_wer.py).
$PY recipes/synthetic_corpus.py text --out $DATA --train-piper-extra 46000 --train-wordnet 39786 \
    --train-glosses 88676 --train-gcide 31370
$PY recipes/synthetic_corpus.py audio --out $DATA --splits train_gcide --audio-format wav --jobs 2
for range in "6994 7580" "7585 7586"; do  # the Piper readings that run had finished
    # shellcheck disable=SC2086
    $PY recipes/synthetic_corpus.py audio --out $DATA --splits train_piper_extra --voices piper --index-range $range \
        --audio-format wav
done
$PY recipes/synthetic_corpus.py manifest --out $DATA --audio-format wav --splits train_piper_extra train_gcide
$PY recipes/mix_manifest.py $DATA/train_cpu20.jsonl --data $DATA \
    --splits train train_wordnet train_wordnet_glosses train_piper_extra train_gcide \
    --piper-copies train=3 train_wordnet=3 train_wordnet_glosses=3 train_piper_extra=3 train_gcide=3 --seed 47000
bf16_round $DATA/train_cpu20.jsonl cpu42 exp/cpu41/tiny-en-rnnt-soup-half.pt 23 \
    src/transdec/pretrained/tiny-en-multiblank.pt 24
# 44. Thirty-seventh and thirty-eighth rounds (2026-11-26, the same machine), not bundled: step 43's readings with
#     Piper's listed five times (train_cpu21.jsonl, 1,072,897 rows, 81% Piper, like step 37's 82%), then step 43's
#     RNN-T soup (seed 25, 12,058 steps) and the bundled multi-blank (seed 26, 12,409) on it, as in step 41.
#     Held-out RNN-T 5.97% (117 test utterances better than the bundled file, 115 worse), multi-blank 7.19%
#     (significantly worse); each averaged with the file it started from, 6.05% and 6.76%.
$PY recipes/mix_manifest.py $DATA/train_cpu21.jsonl --data $DATA \
    --splits train train_wordnet train_wordnet_glosses train_piper_extra train_gcide \
    --piper-copies train=5 train_wordnet=5 train_wordnet_glosses=5 train_piper_extra=5 train_gcide=5 --seed 47001
bf16_round $DATA/train_cpu21.jsonl cpu43 exp/cpu42/tiny-en-rnnt-soup-half.pt 25 \
    src/transdec/pretrained/tiny-en-multiblank.pt 26
# 45. Thirty-ninth and fortieth rounds (2026-11-26, the same machine), not bundled: step 44's RNN-T (its last five
#     checkpoints, seed 27, 5,978 steps) and the bundled multi-blank (seed 28, 6,179) 50 minutes at peak 5e-5 on
#     step 44's mix. Held-out RNN-T 6.03%, multi-blank 7.04% (significantly worse than the bundled file); each
#     averaged with its start file, 5.99% and 6.76%.
PEAK_LR=5e-5 BUDGET_MIN=50 bf16_round $DATA/train_cpu21.jsonl cpu44 exp/cpu43/tiny-en-rnnt-half.pt 27 \
    src/transdec/pretrained/tiny-en-multiblank.pt 28
# 46. Forty-first and forty-second rounds (2026-11-26, the same machine), not bundled: step 44's readings reweighted
#     towards rare words (train_cpu22.jsonl, 1,718,026 rows, 81% Piper: each row listed once per word in it read
#     fewer than 100 times in those splits, at most four times, and left out if it has none; words read 10-99 times
#     are 19% of the words heard instead of 14%), then step 44 again on it: the same start files and seeds (25, 26;
#     ~12,200 and ~12,600 steps). Held-out RNN-T 6.56% (significantly worse than the bundled file, and than step
#     44's 5.97% on the plain mix), multi-blank 7.49%; each averaged with its start file, 6.06% and 6.76%.
$PY recipes/mix_manifest.py $DATA/train_cpu22.jsonl --data $DATA \
    --splits train train_wordnet train_wordnet_glosses train_piper_extra train_gcide \
    --piper-copies train=5 train_wordnet=5 train_wordnet_glosses=5 train_piper_extra=5 train_gcide=5 --seed 47002 \
    --rare-below 100
bf16_round $DATA/train_cpu22.jsonl cpu45 exp/cpu42/tiny-en-rnnt-soup-half.pt 25 \
    src/transdec/pretrained/tiny-en-multiblank.pt 26
