// The one place where sgl_meta's operator schemas are defined and bound to
// their kernels. Every op writes caller-owned buffers (annotated `(x!)`) and
// returns nothing, so it can be captured in a CUDA graph and traced by
// torch.compile (auto-functionalized from the schema).
//
// The same host function serves CPU and CUDA: it checks arguments, then runs
// the CPU kernel or launches the CUDA kernel by the tensors' device.
#include <torch/csrc/stable/library.h>

#include "ops.h"

STABLE_TORCH_LIBRARY(sgl_meta, m) {
  m.def(
      "update_trtllm_mha_graph_metadata("
      "Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token, "
      "Tensor(a!) cache_seqlens, Tensor(b!) cu_seqlens_k, Tensor(c!) page_table, "
      "int bs, int seqlen_offset, int max_seq_pages, int page_size, "
      "Tensor? swa_mapping=None, Tensor(d!)? swa_page_table=None, "
      "Tensor? out_cache_loc=None, Tensor(e!)? swa_out_cache_loc=None, "
      "Tensor(f!)? cu_seqlens_q=None, Tensor? qlens=None, int q_stride=0, "
      "int q_mode=0, bool live_pages_only=False) -> ()");
  m.def(
      "build_trtllm_mha_page_table("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor cache_seqlens, "
      "Tensor(a!) page_table, int page_size, Tensor(b!)? swa_page_table=None, "
      "Tensor? full_to_swa=None) -> ()");
}

#define SGL_META_IMPL_ALL(m)                                       \
  m.impl("update_trtllm_mha_graph_metadata",                       \
         TORCH_BOX(&sgl_meta::update_trtllm_mha_graph_metadata));  \
  m.impl("build_trtllm_mha_page_table",                            \
         TORCH_BOX(&sgl_meta::build_trtllm_mha_page_table));

STABLE_TORCH_LIBRARY_IMPL(sgl_meta, CPU, m) { SGL_META_IMPL_ALL(m) }

// Registered in CPU-only builds too, so a CUDA tensor gets sgl_meta's own
// "built without CUDA" error rather than a dispatcher error.
STABLE_TORCH_LIBRARY_IMPL(sgl_meta, CUDA, m) { SGL_META_IMPL_ALL(m) }
