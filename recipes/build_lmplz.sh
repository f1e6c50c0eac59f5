#!/usr/bin/env bash
# Build KenLM's lmplz (the ARPA estimator `transdec lm build` uses when it is on PATH) from the kenlm source
# distribution on PyPI. The pip `kenlm` module only queries LMs; lmplz comes from the same sources, built with
# CMake against Debian's Boost development packages.
#
#   recipes/build_lmplz.sh PREFIX        # e.g. /opt/kenlm: installs PREFIX/bin/lmplz (and build_binary etc.)
#
# Environment: KENLM_VERSION (default 0.3.0), PY (a Python with pip, default python3), JOBS (default: all
# cores), SKIP_APT=1 to skip the apt-get step (the packages are already there, or you are not root).
# About 2 minutes on 2 cores. Then: export PATH=PREFIX/bin:$PATH; lmplz --help.
set -euo pipefail
PREFIX=${1:?usage: $0 PREFIX}
KENLM_VERSION=${KENLM_VERSION:-0.3.0}
PY=${PY:-python3}
JOBS=${JOBS:-$(nproc)}
mkdir -p "$PREFIX"
PREFIX=$(cd "$PREFIX" && pwd)

if [[ ${SKIP_APT:-0} != 1 ]]; then
    # Boost's program_options, system, thread and test are what lmplz links; zlib, bzip2 and lzma let it read
    # compressed text (optional, but KenLM's CMake looks for them).
    apt-get update -q
    apt-get install -y -q --no-install-recommends build-essential cmake libboost-program-options-dev \
        libboost-system-dev libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# --no-binary kenlm: the source distribution of kenlm only (its build requirements still come as wheels, which
# pip needs to read the sdist's metadata; with --no-binary :all: it would compile CMake itself).
"$PY" -m pip download -q --no-deps --no-binary kenlm "kenlm==$KENLM_VERSION" -d "$work"
tar xzf "$work/kenlm-$KENLM_VERSION.tar.gz" -C "$work"
cmake -S "$work/kenlm-$KENLM_VERSION" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$PREFIX"
cmake --build "$work/build" --target lmplz build_binary query -j "$JOBS"
mkdir -p "$PREFIX/bin"
for tool in lmplz build_binary query; do
    install -m 755 "$work/build/bin/$tool" "$PREFIX/bin/$tool"
done
"$PREFIX/bin/lmplz" --help 2>&1 | head -n 1 || true
echo "lmplz installed in $PREFIX/bin"
