// update_trtllm_mha_graph_metadata(_multi): the argument bundle shared by the
// CPU and CUDA kernels. Plain data (raw pointers, element strides, scalars):
// the torch binding fills it after its checks, the kernels never see a torch
// type.
//
// One call reads one set of inputs (TrtllmMhaInputs) and writes K >= 1
// destination sets (TrtllmMhaDest): the single op is K = 1, the multi op
// writes the K draft steps of a multi-step speculative backend, whose sets
// differ only by their seqlen_offset (and so by their live page counts).
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

enum QMode : int { kQModeNone = 0, kQModeCumsum = 1, kQModeStrided = 2 };

struct TrtllmMhaInputs {
  IndexArray req_pool_indices;  // [>= bs]
  IndexArray seq_lens;          // [>= bs]
  IndexArray qlens;             // [>= bs], q_mode == CUMSUM only
  IndexArray seqlen_offsets;    // [>= bs] per-row offsets (ragged verify), or absent
  const int32_t* req_to_token = nullptr;  // [pool_size, row_stride]
  int64_t req_to_token_stride = 0;        // elements between rows
  int64_t pool_size = 0;                  // req_to_token.size(0)
  IndexArray swa_mapping;                 // [swa_mapping_size] int32/int64, or absent
  int64_t swa_mapping_size = 0;
  const int64_t* out_cache_loc = nullptr;  // [out_cache_loc_size] or null
  int64_t out_cache_loc_size = 0;
  // Unified memory pool: virtual page -> physical page tables (int64). With
  // v2p the page table holds max(v2p[vpage], 0), with swa_v2p the SWA table
  // holds max(swa_v2p[vpage], 0), vpage = slot < 0 ? 0 : slot / page_size.
  const int64_t* v2p = nullptr;
  int64_t v2p_size = 0;
  const int64_t* swa_v2p = nullptr;
  int64_t swa_v2p_size = 0;

  int64_t bs = 0;
  int64_t max_seq_pages = 0;
  PageDivisor page;
  int32_t q_stride = 0;  // host-checked: bs * q_stride fits int32
  int32_t q_mode = kQModeNone;
  bool live_pages_only = false;
  // Seqlen metadata only (cache_seqlens, cu_seqlens_k, cu_seqlens_q): no
  // page table, SWA table or swa_out_cache_loc is written, nothing else read.
  bool skip_page_table = false;
  bool multi = false;  // called as ..._multi (named in error messages)
};

// One destination set (one CUDA graph's metadata buffers).
struct TrtllmMhaDest {
  int32_t* cache_seqlens = nullptr;   // [>= bs]
  int32_t* cu_seqlens_k = nullptr;    // [>= bs + 1]
  int32_t* cu_seqlens_q = nullptr;    // [>= bs + 1], null when q_mode == NONE
  int32_t* page_table = nullptr;      // [>= bs, >= max_seq_pages], null with skip_page_table
  int32_t* swa_page_table = nullptr;  // like page_table, or null
  int64_t* swa_out_cache_loc = nullptr;  // [swa_out_len] or null
  int64_t page_table_stride = 0;
  int64_t swa_page_table_stride = 0;
  int64_t swa_out_len = 0;
  int32_t seqlen_offset = 0;  // host-checked to fit int32
};

// Lengths (common/index_array.h): seq_lens[i] and qlens[i] must lie in
// [0, 2**31 - 1], every set's cache_seqlens[i] = seq_lens[i] (+
// seqlen_offsets[i]) + seqlen_offset too, and so must every running sum
// (cu_seqlens_k, cu_seqlens_q). Offsets may be negative; a result may not.

// The length every set shares before its own seqlen_offset:
// seq_lens[i] + seqlen_offsets[i], wrapping in uint64 (seq_lens is a device
// value: a signed add of hostile ones would be undefined behaviour).
SGL_HD uint64_t base_seqlen(const TrtllmMhaInputs& in, int64_t i) {
  uint64_t sum = static_cast<uint64_t>(in.seq_lens[i]);
  if (in.seqlen_offsets.present()) sum += static_cast<uint64_t>(in.seqlen_offsets[i]);
  return sum;
}

// Whether base + seqlen_offset lies in [0, 2**31 - 1], for a base whose
// seq_lens term passed length_fits: the true sum then lies in
// (-2**63 - 2**31, 2**63 + 2**32), and no value of that range other than
// [0, 2**31 - 1] itself wraps (mod 2**64) into [0, 2**31 - 1].
SGL_HD bool set_seqlen_fits(uint64_t base, int32_t seqlen_offset) {
  return base + static_cast<uint64_t>(static_cast<int64_t>(seqlen_offset)) <= INT32_MAX;
}

// cache_seqlens of one set: int32(base + seqlen_offset), the value once it fits.
SGL_HD int32_t set_seqlen(uint64_t base, int32_t seqlen_offset) {
  return static_cast<int32_t>(static_cast<uint32_t>(base) + static_cast<uint32_t>(seqlen_offset));
}

// cu_seqlens_q[j] = int32(j * q_stride) for Q_MODE_STRIDED, wrapping like the
// eager int64 product cast to int32 (unsigned: no signed-overflow UB).
SGL_HD int32_t strided_q(const TrtllmMhaInputs& in, int64_t j) {
  return static_cast<int32_t>(static_cast<uint32_t>(j) * static_cast<uint32_t>(in.q_stride));
}

// Page-table columns a row of cache length `len` writes: all `max_seq_pages`,
// or with live_pages_only only min(ceil(len / page_size), max_seq_pages).
// (Templates: the CUDA kernel passes its own compact argument struct.)
template <class Args>
SGL_HD int64_t columns_to_write(const Args& in, int32_t len) {
  if (!in.live_pages_only) return in.max_seq_pages;
  return min_i64(in.page.ceil_div32(len), in.max_seq_pages);
}

// The virtual page a slot names in the unified pool: a negative slot (an
// unfilled entry) reads virtual page 0, the reserved sink, and is not divided.
template <class Args>
SGL_HD int64_t virtual_page(const Args& in, int32_t slot) {
  return slot < 0 ? 0 : in.page.div32(slot);
}

// CPU kernel for K = num_sets destination sets (throws std::runtime_error on
// an out-of-range device value or length, before anything is written).
void update_trtllm_mha_metadata_cpu(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets,
                                    int num_sets);

// CUDA launcher; `stream` is a cudaStream_t. One launch for up to
// kMaxSetsPerLaunch sets (more take several launches on the stream). Returns
// nullptr on success, else the error text (the binding raises it, naming the op).
constexpr int kMaxSetsPerLaunch = 4;
const char* update_trtllm_mha_metadata_cuda(const TrtllmMhaInputs& in,
                                            const TrtllmMhaDest* sets, int num_sets,
                                            void* stream);

}  // namespace sgl_meta
