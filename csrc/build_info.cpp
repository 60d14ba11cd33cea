// What this binary was built with, for Python to read through ctypes.

#include "vllm_block_table/params.h"

// The CUDA dispatch key is registered in every build (a CUDA tensor then gets
// sgl_meta's own "built without CUDA" error), so the dispatcher cannot tell a
// CPU-only build from a CUDA one: this symbol can.
extern "C" int sgl_meta_has_cuda_kernels(void) {
#ifdef SGL_META_WITH_CUDA
  return 1;
#else
  return 0;
#endif
}

// The most KV-cache groups one vLLM block-table call takes (the per-group
// tables live in the launch parameters): sgl_meta.vllm_block_table.MAX_GROUPS.
extern "C" int sgl_meta_vllm_max_groups(void) { return sgl_meta::kVllmMaxGroups; }
