# shellcheck shell=bash
# What scripts/pack_sglang.sh and scripts/pack_vllm.sh share; sourced, run from the repository root.

# pack_wheels PY DEST [PLATFORM...] -- WHEEL...: the cp312 and pure-Python wheels into DEST/whl, for
# the manylinux PLATFORMs named (newer glibc first) and manylinux_2_28, 2_17 and 2014.
pack_wheels() {
  local py=$1 dest=$2 platforms=()
  shift 2
  while [ "$1" != -- ]; do
    platforms+=(--platform "$1")
    shift
  done
  shift
  "$py" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$dest/whl" "$@"
}

# pack_host SITE DEST PACKAGE DIST_INFO: the host's Python package from SITE without its *.so files,
# as DEST/PACKAGE.tar.xz.
pack_host() {
  tar -C "$1" --exclude='*.so' --exclude='__pycache__' -cJf "$2/$3.tar.xz" "$3" "$4"
}

# pack_sgl_meta DEST GROUP ENTRY: our package as the GPU run imports it, with the entry point ENTRY in
# GROUP (the metadata the host's plugin loader reads; a pip install would write the same), the tests'
# conftest.py and helpers.py, and a pytest.ini that knows the gpu marker.
pack_sgl_meta() {
  local dest=$1 version info
  cp -r sgl_meta "$dest/src/"
  find "$dest/src" -name __pycache__ -prune -exec rm -rf {} +
  # The extension's debug sections are three quarters of its size (21 MB -> 5 MB
  # for sm_90): without them the vLLM carry stays under the 64 MiB a call takes.
  if command -v strip >/dev/null && [[ -f "$dest/src/sgl_meta/_C.abi3.so" ]]; then
    strip --strip-debug "$dest/src/sgl_meta/_C.abi3.so"
  fi
  version=$(cat sgl_meta/VERSION)
  info="$dest/src/sgl_meta-$version.dist-info"
  mkdir -p "$info" "$dest/tests"
  printf 'Metadata-Version: 2.1\nName: sgl-meta\nVersion: %s\n' "$version" >"$info/METADATA"
  printf '[%s]\nsgl_meta = %s\n' "$2" "$3" >"$info/entry_points.txt"
  cp tests/conftest.py tests/helpers.py "$dest/tests/"
  printf '[pytest]\nmarkers =\n    gpu: needs a CUDA device\n' >"$dest/pytest.ini"
}
