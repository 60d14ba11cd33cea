// vllm_copy_page_indices: torch binding (argument checks, then the kernel).
#include <climits>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "common/op_binding.h"
#include "vllm_flashinfer/params.h"

namespace sgl_meta {

using DT = Expect::DType;

template <typename T>
void vllm_copy_page_indices(T page_indices, T block_table, T cu_num_blocks) {
  const ArgChecker check("vllm_copy_page_indices");
  const T& dev = cu_num_blocks;
  check.tensor(cu_num_blocks, "cu_num_blocks", {DT::kIndex, 1, 1}, dev);
  const int64_t n = cu_num_blocks.size(0) - 1;
  check.tensor(block_table, "block_table", {DT::kInt32, 2, n, 0, "cu_num_blocks.numel() - 1"}, dev);
  check.tensor(page_indices, "page_indices", {DT::kInt32, 1}, dev);
  const int64_t cols = block_table.size(1);
  check.require(cols <= INT32_MAX, "block_table.size(1) must be <= 2**31 - 1, got ", cols);
  if (n == 0) return;  // no rows: nothing is written
  check.template disjoint<T>({ArgChecker::whole("page_indices", &page_indices)},
                             {ArgChecker::whole("block_table", &block_table),
                              ArgChecker::whole("cu_num_blocks", &cu_num_blocks)});
  VllmCopyPagesParams p;
  p.n = n;
  p.cu_num_blocks = index_array_of(cu_num_blocks);
  p.block_table = block_table.template const_data_ptr<int32_t>();
  p.stride = block_table.stride(0);
  p.cols = cols;
  p.page_indices = page_indices.template mutable_data_ptr<int32_t>();
  p.size = page_indices.size(0);
  run_on_device(check, dev, p, &vllm_copy_page_indices_cpu, SGL_CUDA_ONLY(&vllm_copy_page_indices_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(vllm_copy_page_indices)
