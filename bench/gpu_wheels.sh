#!/usr/bin/env bash
# Makes .whl/: the wheels a CUDA machine without network needs for bench/gpu_checks.sh beyond its own PyTorch
# image (Python 3.12, x86-64): NeMo 3.0.0 and what its ASR decoders import, for NeMo's columns in bench/gpu.py,
# and soundfile, soxr, jiwer for `transdec evaluate`. lightning is pinned to 2.4.0 (2.6 breaks NeMo 3.0.0's
# import); antlr4-python3-runtime has no wheel and is built here. About 18 MB.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
WHEELS=(
    nemo-toolkit==3.0.0 lightning==2.4.0 annotated-types==0.8.0 audioread==3.1.0 braceexpand==0.1.7 cffi==2.1.1
    cytoolz==1.2.0 datasets==5.2.0 decorator==5.3.1 dill==0.4.1 httpcore2==2.16.2 httpx2==2.16.2 hydra-core==1.3.2
    intervaltree==3.2.1 jiwer==4.0.0 kaldialign==0.12.0 lhotse==1.33.0 librosa==0.11.0 multiprocess==0.70.19
    nv-one-logger-core==2.3.1 nv-one-logger-training-telemetry==2.3.1 nv-one-logger-pytorch-lightning-integration==2.3.1
    omegaconf==2.3.0 overrides==7.7.0 platformdirs==4.14.8 pooch==1.9.0 pycparser==3.12 pydantic==2.14.4
    pydantic-core==2.50.5 rapidfuzz==3.14.6 sniffio==1.3.1 soundfile==0.14.0 soxr==1.1.0 StrEnum==0.4.15
    text-unidecode==1.3 toml==0.10.2 truststore==0.10.5 typing-inspection==0.4.5 webdataset==1.0.2
)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 -d .whl "${WHEELS[@]}"
python3 -m pip wheel -q --no-deps -w .whl antlr4-python3-runtime==4.9.3
du -sh .whl
