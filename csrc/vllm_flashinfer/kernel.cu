// vllm_copy_page_indices on CUDA (no torch headers): one block per row, as
// vLLM's program per request; the grid depends on n only.
#include <climits>

#include "common/cuda_utils.cuh"
#include "vllm_flashinfer/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kUnroll = 4;  // entries per thread per pass: a 512-block row in one pass

// Row r's span, with the values its check names (values, not the parameter
// struct: see SGL_FAILURE_PATH).
SGL_FAILURE_PATH void fail_row(int64_t r, int64_t start, int64_t end, int64_t size, int64_t cols) {
  const bool cu_num_blocks_valid = false;
  SGL_DEVICE_CHECK(cu_num_blocks_valid,
                   "vllm_copy_page_indices: cu_num_blocks[%lld] = %lld, cu_num_blocks[%lld] = %lld must be "
                   "non-negative, non-decreasing, within page_indices (%lld entries) and span at most "
                   "block_table.size(1) = %lld blocks",
                   (long long)r, (long long)start, (long long)(r + 1), (long long)end, (long long)size,
                   (long long)cols);
  __trap();
}

// The row's loads go out before the span check: their count is clamped to
// [0, cols], so they stay inside row r whatever cu_num_blocks holds, and the
// check runs while they are in flight; it gates the stores. (Checked first,
// the row cost its compares, the branch and the address arithmetic between
// the span's load and the row's: ~0.5 us a launch on an H200, 15% of it.)
__global__ void __launch_bounds__(kThreads) vllm_copy_page_indices_kernel(const __grid_constant__ VllmCopyPagesParams p) {
  const int64_t r = blockIdx.x;
  const int32_t* src = p.block_table + r * p.stride + threadIdx.x;
  const VllmPageSpan v = vllm_page_span(p, r);
  const int64_t span = v.end - v.start;
  // 32-bit offsets within the row: at most cols <= INT32_MAX entries.
  const uint32_t reach = span < 0 ? 0u : static_cast<uint32_t>(span < p.cols ? span : p.cols);
  uint32_t i0 = 0;
  do {
    int32_t e[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) e[k] = threadIdx.x + i0 + k * kThreads < reach ? load_ro(src + i0 + k * kThreads) : 0;
    if (i0 == 0 && !v.ok) fail_row(r, v.start, v.end, p.size, p.cols);
    int32_t* dst = p.page_indices + v.start + threadIdx.x;
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (threadIdx.x + i0 + k * kThreads < reach) dst[i0 + k * kThreads] = e[k];
    i0 += kThreads * kUnroll;
  } while (i0 < reach);
}

}  // namespace

const char* vllm_copy_page_indices_cuda(const VllmCopyPagesParams& p, void* stream) {
  if (p.n > INT32_MAX) return "too many rows for one launch";
  vllm_copy_page_indices_kernel<<<static_cast<unsigned>(p.n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
