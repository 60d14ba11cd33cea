#!/usr/bin/env bash
# cibuildwheel hook, run inside the manylinux container (pyproject.toml):
#   build  torch + build requirements into the build environment (before-build;
#          the build runs without isolation, against this torch)
#   test   torch into the test environment (before-test), so installing the
#          wheel finds torch>=2.10 satisfied by the matching CUDA build
#
# torch comes from the PyTorch index of the image's CUDA (cu128, cu129, cu130):
# the wheel links libcudart.so.<major> and expects torch to have loaded it.
#   SGLMETA_CUDA         CUDA version of the image, e.g. 12.8 (default 13.0)
#   SGLMETA_BUILD_TORCH  torch requirement (default: newest torch>=2.10 there)
set -euo pipefail
mode=${1:?usage: cibw_torch.sh build|test}
cuda=${SGLMETA_CUDA:-13.0}
index="https://download.pytorch.org/whl/cu${cuda//./}"

# A mismatch between the image and SGLMETA_CUDA would silently mix CUDA versions.
nvcc_cuda=$(nvcc --version | sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p')
if [[ "$nvcc_cuda" != "$cuda" ]]; then
  echo "cibw_torch.sh: image has CUDA $nvcc_cuda but SGLMETA_CUDA=$cuda" >&2
  exit 1
fi

# That index alone (it mirrors torch's dependencies): with PyPI next to it, pip
# could prefer a newer torch built for another CUDA.
python -m pip install "${SGLMETA_BUILD_TORCH:-torch>=2.10}" --index-url "$index"
if [[ "$mode" == build ]]; then
  python -m pip install "setuptools>=77" wheel ninja
fi
python - "$cuda" <<'EOF'
import sys
import torch

print(f"torch {torch.__version__} (CUDA {torch.version.cuda}) in {sys.prefix}")
if torch.version.cuda != sys.argv[1]:
    sys.exit(f"cibw_torch.sh: torch is built for CUDA {torch.version.cuda}, want {sys.argv[1]}")
EOF
