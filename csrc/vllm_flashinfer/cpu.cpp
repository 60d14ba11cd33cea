// vllm_copy_page_indices on CPU: same results as the CUDA kernel; a hostile
// cu_num_blocks raises std::runtime_error before anything is written, where
// CUDA trips a device-side assert.

#include "common/errors.h"
#include "vllm_flashinfer/params.h"

namespace sgl_meta {
namespace {

[[noreturn]] void fail_row(const VllmCopyPagesParams& p, int64_t r, const VllmPageSpan& v) {
  raise_error("vllm_copy_page_indices", "cu_num_blocks[", r, "] = ", v.start, ", cu_num_blocks[", r + 1,
              "] = ", v.end, " must be non-negative, non-decreasing, within page_indices (", p.size,
              " entries) and span at most block_table.size(1) = ", p.cols, " blocks");
}

}  // namespace

void vllm_copy_page_indices_cpu(const VllmCopyPagesParams& p) {
  for (int64_t r = 0; r < p.n; ++r) {
    const VllmPageSpan v = vllm_page_span(p, r);
    if (!v.ok) fail_row(p, r, v);
  }
  for (int64_t r = 0; r < p.n; ++r) {
    const VllmPageSpan v = vllm_page_span(p, r);
    const int32_t* row = p.block_table + r * p.stride;
    for (int64_t i = 0; i < v.end - v.start; ++i) p.page_indices[v.start + i] = row[i];
  }
}

}  // namespace sgl_meta
