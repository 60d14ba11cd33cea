// The vLLM speculator's ops on CUDA (no torch headers).
//
// vllm_prepare_decode_inputs: one thread per request, and the padded tail of
// query_start_loc and seq_lens spread over the same grid; the grid depends on
// max_num_reqs only.
//
// vllm_update_draft_inputs: one block per request, as vLLM's program per
// request; the grid depends on n only. The hidden-state row is copied in the
// widest word its addresses allow (the host picks it: 16 bytes for the usual
// contiguous bfloat16 rows), one instantiation per word size.
#include <climits>
#include <cstdint>

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
  if (p.advance) p.positions[i] = vllm_next_position(position, p.max_model_len);
  p.seq_lens[i] = vllm_decode_seq_len(p, target, rejected);
}

constexpr int kUnroll = 4;  // words per thread per pass: a 4096-wide bfloat16 row in one pass

template <int W>
struct Word;
template <>
struct Word<16> {
  using type = uint4;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<4> {
  using type = uint32_t;
};
template <>
struct Word<2> {
  using type = uint16_t;
};

// (values, not the parameter struct: see SGL_FAILURE_PATH)
SGL_FAILURE_PATH void fail_step(int64_t step, int64_t cols) {
  const bool current_draft_step_in_range = false;
  SGL_DEVICE_CHECK(current_draft_step_in_range,
                   "vllm_update_draft_inputs: current_draft_step = %lld is outside [0, %lld) "
                   "(output_draft_tokens.size(1))",
                   (long long)step, (long long)cols);
  __trap();
}

template <int W>
__global__ void __launch_bounds__(kThreads)
    vllm_update_draft_inputs_kernel(const __grid_constant__ VllmDraftInputsParams p) {
  using T = typename Word<W>::type;
  const int64_t r = blockIdx.x;
  const bool lead = threadIdx.x == 0;
  // Every load first: none depends on the step, so the step, the token, the
  // row's first pass and the lead thread's values take one memory round trip
  // together. After the last draft step (no next one) they go unused.
  const int64_t step = p.current_draft_step[0];
  const int64_t draft = lead ? p.draft_tokens[r] : 0;
  const T* src = reinterpret_cast<const T*>(p.hidden_states + r * p.src_stride);
  T* dst = reinterpret_cast<T*>(p.next_input_hidden_states + r * p.dst_stride);
  // Fewer than 2**31 words: the host bounds the hidden size by 2**31 - 1 elements.
  const uint32_t words = static_cast<uint32_t>(p.row_bytes / W);
  T w[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const uint32_t i = threadIdx.x + k * kThreads;
    w[k] = i < words ? load_ro(src + i) : T{};
  }
  int64_t sample = 0, position = 0;
  int32_t seq = 0;
  if (lead) {
    sample = p.sample_src_positions[r];
    if (p.advance) {
      position = p.positions[r];
      seq = p.seq_lens[r];
    }
  }
  if (!vllm_draft_step_ok(p, step)) fail_step(step, p.cols);
  if (lead) p.output_draft_tokens[r * p.out_stride + step] = draft;
  if (step >= p.num_speculative_steps - 1) return;
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const uint32_t i = threadIdx.x + k * kThreads;
    if (i < words) dst[i] = w[k];
  }
  // Rows wider than one pass (hidden > 4096 at 16-byte words).
  for (uint32_t i0 = threadIdx.x + kUnroll * kThreads; i0 < words; i0 += kUnroll * kThreads) {
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const uint32_t i = i0 + k * kThreads;
      w[k] = i < words ? load_ro(src + i) : T{};
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k)
      if (i0 + k * kThreads < words) dst[i0 + k * kThreads] = w[k];
  }
  if (lead) {
    p.sample_src_positions[r] = static_cast<int64_t>(static_cast<uint64_t>(sample) + 1u);
    p.input_ids[r] = static_cast<int32_t>(draft);
    if (p.advance) {
      p.positions[r] = vllm_next_position(position, p.max_model_len);
      p.seq_lens[r] = vllm_next_seq_len(seq, p.max_model_len);
    }
  }
}

template <int W>
cudaError_t launch_update_draft_inputs(const VllmDraftInputsParams& p, cudaStream_t stream) {
  vllm_update_draft_inputs_kernel<W><<<static_cast<unsigned>(p.n), kThreads, 0, stream>>>(p);
  return cudaGetLastError();
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

const char* vllm_update_draft_inputs_cuda(const VllmDraftInputsParams& p, void* stream) {
  if (p.n == 0) return nullptr;
  if (p.n > INT32_MAX) return "too many rows for one launch";
  const auto s = static_cast<cudaStream_t>(stream);
  cudaError_t err;
  switch (p.word_bytes) {
    case 16: err = launch_update_draft_inputs<16>(p, s); break;
    case 8: err = launch_update_draft_inputs<8>(p, s); break;
    case 4: err = launch_update_draft_inputs<4>(p, s); break;
    default: err = launch_update_draft_inputs<2>(p, s); break;
  }
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
