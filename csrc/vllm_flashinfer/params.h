// vllm_copy_page_indices: the argument bundle shared by the CPU and CUDA
// kernels, and the row check both run. vLLM 0.33's FlashInfer backend packs
// each request's block-table row into FlashInfer's paged-KV index stream
// (_copy_page_indices_kernel in vllm/v1/attention/backends/flashinfer.py).
//
// For row r < n = cu_num_blocks.numel() - 1, s = cu_num_blocks[r],
// e = cu_num_blocks[r + 1]:
//
//   page_indices[s + i] = block_table[r, i]      for i < e - s
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

struct VllmCopyPagesParams {
  int64_t n = 0;
  IndexArray cu_num_blocks;               // [n + 1]
  const int32_t* block_table = nullptr;   // [>= n, cols], rows by stride
  int64_t stride = 0;
  int64_t cols = 0;                       // <= INT32_MAX (host-checked)
  int32_t* page_indices = nullptr;        // [size]
  int64_t size = 0;
};

// Row r's span of page_indices; ok is false when it is negative, decreasing,
// past page_indices or wider than the block table's row.
struct VllmPageSpan {
  int64_t start = 0, end = 0;
  bool ok = true;
};

SGL_HD VllmPageSpan vllm_page_span(const VllmCopyPagesParams& p, int64_t r) {
  VllmPageSpan v;
  v.start = p.cu_num_blocks[r];
  v.end = p.cu_num_blocks[r + 1];
  v.ok = v.start >= 0 && v.end >= v.start && v.end <= p.size && v.end - v.start <= p.cols;
  return v;
}

void vllm_copy_page_indices_cpu(const VllmCopyPagesParams& p);
// CUDA launcher; nullptr on success, else the error text.
const char* vllm_copy_page_indices_cuda(const VllmCopyPagesParams& p, void* stream);

}  // namespace sgl_meta
