// vllm_prepare_decode_inputs on CUDA (no torch headers): one thread per
// request, and the padded tail of query_start_loc and seq_lens spread over the
// same grid; the grid depends on max_num_reqs only.
#include <climits>

#include "common/cuda_utils.cuh"
#include "vllm_spec_decode/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads)
    vllm_prepare_decode_inputs_kernel(const __grid_constant__ VllmDecodeInputsParams p) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  if (i <= p.max_num_reqs) p.query_start_loc[i] = static_cast<int32_t>(i < p.n ? i : p.n);
  if (i >= p.n) {
    if (i < p.max_num_reqs) p.seq_lens[i] = 0;
    return;
  }
  // Every load first: they depend on nothing but i.
  const int64_t draft = p.draft_tokens[i * p.draft_stride];
  const int64_t sample = p.sample_src_positions[i];
  const int64_t position = p.advance ? p.positions[i] : 0;
  const int64_t target = p.target_seq_lens[i];
  const int64_t rejected = p.num_rejected[i];
  p.input_ids[i] = static_cast<int32_t>(draft);
  p.sample_src_positions[i] = static_cast<int64_t>(static_cast<uint64_t>(sample) + 1u);
  if (p.advance) p.positions[i] = vllm_decode_position(p, position);
  p.seq_lens[i] = vllm_decode_seq_len(p, target, rejected);
}

}  // namespace

const char* vllm_prepare_decode_inputs_cuda(const VllmDecodeInputsParams& p, void* stream) {
  const int64_t blocks = (p.max_num_reqs + 1 + kThreads - 1) / kThreads;
  if (blocks > INT32_MAX) return "too many rows for one launch";
  vllm_prepare_decode_inputs_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                                      static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
