// The vLLM step kernel on CUDA (no torch headers): one launch for whichever of
// positions + seq_lens, the block-table gather and the slot mappings the op
// asks for, over every KV-cache group.
//
// Grid: x = one block per row b < max(n, num_rows) plus one tail block, y =
// the group (one row of y when there are no groups). Block (b, g) writes row
// b's slot mappings and gathered row of group g; the blocks of group 0 also
// write row b's seq_lens and positions. The tail block pads group g's slot
// mapping from query_start_loc[n] to its end and (group 0) zeroes seq_lens[n:].
// The grid depends on host-known sizes only (n, num_rows, G), so a CUDA graph
// replays it with any new values; rows are independent, so no block waits on
// another. A block's threads stride over its row's tokens and block columns.
#include <climits>

#include "common/cuda_utils.cuh"
#include "vllm_block_table/params.h"

namespace sgl_meta {
namespace {

constexpr int kUnroll = 4;

// Threads per block. 128 keeps a bs-256, two-group step (514 blocks of up to
// 72 registers a thread) in one wave on an H200; the slot mappings alone
// (56 registers) take 256, which halves the passes over a long prefill row,
// still in one wave.
constexpr int step_threads(bool pos, bool slots, bool gather) { return slots && !pos && !gather ? 256 : 128; }
// Blocks per SM the registers must allow (0: no bound): four of 256 threads
// (64 registers a thread) keep the slot mappings of a bs-256, two-group step
// in one wave.
constexpr int step_min_blocks(int threads) { return threads == 256 ? 4 : 0; }

// The failure paths take values, not the parameter struct (see
// SGL_FAILURE_PATH). Row b's values as the hot path read them; the fault is
// found again here (the hot path keeps only that there is one).
SGL_FAILURE_PATH void fail_row(int op_id, int64_t b, int64_t req, int64_t start, int64_t end, int64_t computed_tokens,
                               int64_t req_limit, int64_t token_cap, bool tokens, bool computed) {
  const char* op = vllm_step_op_name(op_id);
  VllmRow r;
  r.req = req, r.start = start, r.end = end, r.computed = computed_tokens;
  int64_t value = 0, at = 0;
  const VllmFault f = vllm_row_fault(req_limit, token_cap, r, b, tokens, computed, &value, &at);
  const bool idx_mapping_in_range = f != kVllmBadRequest;
  SGL_DEVICE_CHECK(idx_mapping_in_range, "%s: idx_mapping[%lld] = %lld is outside [-1, %lld)", op, (long long)at,
                   (long long)value, (long long)req_limit);
  const bool query_start_loc_valid = f != kVllmBadQueryStart;
  SGL_DEVICE_CHECK(query_start_loc_valid,
                   "%s: query_start_loc[%lld] = %lld is negative, decreasing or past the token "
                   "buffers (%lld tokens)",
                   op, (long long)at, (long long)value, (long long)token_cap);
  const bool num_computed_tokens_non_negative = f != kVllmBadComputed;
  SGL_DEVICE_CHECK(num_computed_tokens_non_negative, "%s: num_computed_tokens[%lld] = %lld is negative", op,
                   (long long)at, (long long)value);
  const bool seq_len_fits_int32 = f != kVllmBadSeqLen;
  SGL_DEVICE_CHECK(seq_len_fits_int32,
                   "%s: num_computed_tokens + query length of row %lld = %lld does not fit int32 seq_lens", op,
                   (long long)at, (long long)value);
  __trap();
}

// A token's or a gathered row's fault in group g (req: the row's request).
SGL_FAILURE_PATH void fail_group(int op_id, VllmFault f, int g, int64_t b, int64_t t, int64_t value, int64_t src_cols,
                                 int64_t req) {
  const char* op = vllm_step_op_name(op_id);
  const bool positions_non_negative = f != kVllmBadPosition;
  SGL_DEVICE_CHECK(positions_non_negative, "%s: positions[%lld] = %lld is negative", op, (long long)t,
                   (long long)value);
  const bool block_sizes_positive = f != kVllmBadBlockSize;
  SGL_DEVICE_CHECK(block_sizes_positive, "%s: block_sizes[%d] = %lld is < 1", op, g, (long long)value);
  const bool block_column_inside_block_tables = f != kVllmBadBlockColumn;
  SGL_DEVICE_CHECK(block_column_inside_block_tables,
                   "%s: position of token %lld (row %lld) reads block column %lld, past "
                   "block_tables[%d].size(1) = %lld",
                   op, (long long)t, (long long)b, (long long)value, g, (long long)src_cols);
  const bool num_blocks_in_range = f != kVllmBadNumBlocks;
  SGL_DEVICE_CHECK(num_blocks_in_range,
                   "%s: num_blocks[%d, %lld] = %lld (row %lld) is outside [0, the block tables' width]", op, g,
                   (long long)req, (long long)value, (long long)b);
  __trap();
}

SGL_FAILURE_PATH void fail_tail(int op_id, int64_t n, int64_t tail, int64_t token_cap) {
  const bool query_start_loc_valid = false;
  SGL_DEVICE_CHECK(query_start_loc_valid,
                   "%s: query_start_loc[%lld] = %lld is negative or past the token buffers (%lld tokens)",
                   vllm_step_op_name(op_id), (long long)n, (long long)tail, (long long)token_cap);
  __trap();
}

// out[i] = computed + i for i < len (offsets in 32 bits: a range within the
// token buffers), strided over the block's threads: a decode row is one
// store by thread 0, the other threads' loop ends at its first test.
template <int kThreads, typename T>
__device__ __forceinline__ void write_positions(T* out, int64_t computed, uint32_t len) {
#pragma unroll 1  // (unrolled, a decode row's one store would sit behind the unrolled loop's setup)
  for (uint32_t i = threadIdx.x; i < len; i += kThreads) out[i] = static_cast<T>(computed + i);
}

// One pass of a row's token positions: tokens t0 + k * kThreads before the
// row's end, 0 past it.
template <int kThreads>
__device__ __forceinline__ void token_positions(int64_t (&pos)[kUnroll], const VllmStepParams& p, const VllmRow& r,
                                                int64_t t0) {
#pragma unroll
  for (int k = 0; k < kUnroll; ++k) {
    const int64_t t = t0 + k * kThreads;
    pos[k] = t < r.end ? vllm_token_position(p, r, t) : 0;
  }
}

// One pass of a gathered row: columns j0 + threadIdx.x + k * kThreads below
// `reach` (src: the row plus threadIdx.x), 0 past it.
template <int kThreads>
__device__ __forceinline__ void load_columns(int32_t (&v)[kUnroll], const int32_t* src, uint32_t j0, uint32_t reach) {
#pragma unroll
  for (int k = 0; k < kUnroll; ++k)
    v[k] = threadIdx.x + j0 + k * kThreads < reach ? load_ro(src + j0 + k * kThreads) : 0;
}

template <int kThreads>
__device__ __forceinline__ void zero_row(int32_t* dst, int64_t cols) {
#pragma unroll 1
  for (int64_t j = threadIdx.x; j < cols; j += kThreads) dst[j] = 0;
}

// One instantiation per set of parts the op writes (kPos: positions and
// seq_lens, kSlots: slot mappings, kGather: block tables; kCp: cp_size > 1;
// the launcher picks them from the params): a launch carries only the code of
// what it writes. Every load is issued before the branches that check what an
// earlier load returned, at an index that stays inside its tensor whatever the
// checks find; the checks gate the stores (positions and seq_lens: the query
// range alone, so they go out before the row's other checks, and a faulty row
// traps after writing inside its outputs). A row then costs its dependent
// loads only: the request index, what it selects, the table entries.
// kVllmDtypes: the row's index arrays in vLLM's dtypes, read without the
// dtype select (instantiated where the op writes positions, the one row
// whose cost is its scalar loads alone).
template <bool kPos, bool kSlots, bool kGather, bool kCp, bool kVllmDtypes,
          int kThreads = step_threads(kPos, kSlots, kGather)>
__global__ void __launch_bounds__(kThreads, step_min_blocks(kThreads))
    vllm_step_kernel(const __grid_constant__ VllmStepParams p) {
  constexpr bool kGroups = kSlots || kGather;  // (else a grid of one row of y)
  const int64_t b = blockIdx.x;
  const int g = kGroups ? static_cast<int>(blockIdx.y) : 0;
  const bool has_group = kGroups && g < p.groups;

  // The tail block and padded rows expected not taken, their loops not
  // unrolled: a row's code stays one short stretch (fetched from memory on a
  // cold step, every line and jump of it costs).
  if (__builtin_expect(b == gridDim.x - 1, 0)) {  // the tail block
    if (kPos && g == 0)
#pragma unroll 1
      for (int64_t i = p.n + threadIdx.x; i < p.seq_lens_size; i += kThreads) p.seq_lens[i] = 0;
    // Without slot mappings the tail block only checks query_start_loc[n],
    // which row n - 1 checks as its range's end.
    if (!kSlots && (!kPos || p.n > 0)) return;
    int64_t tail = 0;
    if (vllm_check_tail(p, &tail) != kVllmOk) fail_tail(p.op, p.n, tail, p.token_cap);
    if (kSlots && has_group) {
      int64_t* out = p.slot_mappings + g * p.slot_stride;
#pragma unroll 1
      for (int64_t t = tail + threadIdx.x; t < p.slot_cols; t += kThreads) out[t] = p.pad_id;
    }
    return;
  }

  if (__builtin_expect(kGather && b >= p.n, 0)) {  // a padded row (the gather's grid alone has them)
    if (has_group) zero_row<kThreads>(p.group[g].dst + b * p.group[g].dst_stride, p.group[g].dst_cols);
    return;
  }

  const VllmGroupScalars gs = vllm_group_scalars(p, g);
  constexpr bool kTokens = kPos || kSlots;
  const bool computed = kPos || p.reads_computed();  // (a constant where kPos fixes it)
  const VllmRow r = vllm_load_row<kVllmDtypes>(p, b, kTokens, computed);
  const VllmGroup& grp = p.group[has_group ? g : 0];
  const bool gathers = kGather && has_group && b < p.num_rows;
  // num_blocks beside the computed count (both wait only for the request index).
  const int64_t blocks = gathers && vllm_request_in_range(p, r.req) ? grp.num_blocks[r.req] : 0;
  const bool range_ok = vllm_query_range_ok(r.start, r.end, p.token_cap);
  if (kPos && g == 0) {
    // Stored as soon as the computed count is back, the row's check written
    // after them (it then runs beside the stores): only the query range, known
    // while the count is in flight, gates them. A faulty row ends in the
    // check's trap.
    const uint32_t len = range_ok ? static_cast<uint32_t>(r.end - r.start) : 0u;
    if (threadIdx.x == 0) p.seq_lens[b] = static_cast<int32_t>(r.computed + len);
    if (kVllmDtypes || p.pos64)
      write_positions<kThreads>(static_cast<int64_t*>(p.pos) + r.start, r.computed, len);
    else
      write_positions<kThreads>(static_cast<int32_t*>(p.pos) + r.start, r.computed, len);
  }
  // The row's checks as one predicate (fail_row finds which failed).
  const bool row_ok = vllm_request_ok(r.req, p.req_limit) && range_ok &&
                      (!computed || vllm_computed_ok(r.computed, r.end - r.start, kTokens));
  if (!row_ok) fail_row(p.op, b, r.req, r.start, r.end, r.computed, p.req_limit, p.token_cap, kTokens, computed);
  if (!has_group) return;

  if (kSlots) {
    // kUnroll tokens per thread per pass (a 2048-token prefill row in two
    // with 256 threads), in three steps: their positions, their table
    // entries, their stores. Where the positions are read from `positions`
    // (the op without positions of its own), the next pass's loads go out
    // while this pass's entries are in flight.
    constexpr bool kAhead = !kPos;
    int64_t* out = p.slot_mappings + g * p.slot_stride;
    const int32_t* src = grp.src + (r.req == kVllmNoRequest ? 0 : r.req * grp.src_stride);
    int64_t ahead[kUnroll];
    if (kAhead) token_positions<kThreads>(ahead, p, r, r.start + threadIdx.x);
    for (int64_t t0 = r.start + threadIdx.x; t0 < r.end; t0 += kThreads * kUnroll) {
      int64_t pos[kUnroll];
      if (kAhead) {
#pragma unroll
        for (int k = 0; k < kUnroll; ++k) pos[k] = ahead[k];
      } else {
        token_positions<kThreads>(pos, p, r, t0);
      }
      VllmSlotSource s[kUnroll];
      int32_t entry[kUnroll];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)  // (a decode row: k = 0 only)
        s[k] = vllm_slot_source<kCp>(p, r, g, gs, pos[k], t0 + k * kThreads < r.end);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) entry[k] = s[k].read ? load_ro(src + s[k].col) : 0;
      if (kAhead) token_positions<kThreads>(ahead, p, r, t0 + kThreads * kUnroll);
      // The first fault of the pass, picked with constant indices: one failure
      // call reading s[] at a run-time index would put s[] in local memory.
      VllmFault fault = kVllmOk;
      int64_t fault_t = 0, fault_value = 0;
#pragma unroll
      for (int k = 0; k < kUnroll; ++k)
        if (fault == kVllmOk && s[k].fault != kVllmOk)
          fault = s[k].fault, fault_t = t0 + k * kThreads, fault_value = s[k].value;
      if (fault != kVllmOk) fail_group(p.op, fault, g, b, fault_t, fault_value, grp.src_cols, r.req);
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const int64_t t = t0 + k * kThreads;
        if (t < r.end) out[t] = vllm_slot_value(p, gs, s[k], entry[k]);
      }
    }
  }

  if (gathers) {
    int32_t* dst = grp.dst + b * grp.dst_stride;
    if (r.req == kVllmNoRequest) {
      zero_row<kThreads>(dst, grp.dst_cols);
      return;
    }
    // The first pass's loads go out before the row's span check: clamped to
    // the tables' width they stay inside the request's row whatever num_blocks
    // holds, and the check (with the sliding window's division) runs once,
    // while they are in flight; it gates the stores. 32-bit offsets: the
    // width is an int32 column count.
    const int64_t width = grp.src_cols < grp.dst_cols ? grp.src_cols : grp.dst_cols;
    const uint32_t reach = blocks < 0 ? 0u : static_cast<uint32_t>(blocks < width ? blocks : width);
    const int32_t* src = grp.src + r.req * grp.src_stride + threadIdx.x;
    int32_t* out = dst + threadIdx.x;
    int32_t v[kUnroll];
    // Where the launch gathers alone, the first pass reads the row's first
    // columns whatever num_blocks says (the stores keep to it): its loads then
    // wait for the request index alone, and go out beside num_blocks' read
    // (host memory, in vLLM's runner) instead of after it. Beside the slot
    // mappings' loads in the fused step the extra columns cost more than the
    // wait.
    constexpr uint32_t kPass = kThreads * kUnroll;
    load_columns<kThreads>(v, src, 0, kSlots ? reach : width < kPass ? static_cast<uint32_t>(width) : kPass);
    int64_t count = 0, null = 0, value = 0;
    const VllmFault f = vllm_gather_span(p, r, g, gs, blocks, &count, &null, &value);
    if (f != kVllmOk) fail_group(p.op, f, g, b, 0, value, grp.src_cols, r.req);
    const uint32_t nulls = static_cast<uint32_t>(null < count ? null : count);
    for (uint32_t j0 = 0;;) {
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        const uint32_t j = threadIdx.x + j0 + k * kThreads;
        if (j < reach) out[j0 + k * kThreads] = j >= nulls ? v[k] : 0;
      }
      j0 += kThreads * kUnroll;
      if (j0 >= reach) break;
      load_columns<kThreads>(v, src, j0, reach);
    }
  }
}

template <bool kPos, bool kSlots, bool kGather, bool kCp>
void launch_index(const VllmStepParams& p, dim3 grid, cudaStream_t s) {
  constexpr int kThreads = step_threads(kPos, kSlots, kGather);
  if constexpr (kPos) {
    if (vllm_has_vllm_dtypes(p)) {
      vllm_step_kernel<kPos, kSlots, kGather, kCp, true><<<grid, kThreads, 0, s>>>(p);
      return;
    }
  }
  vllm_step_kernel<kPos, kSlots, kGather, kCp, false><<<grid, kThreads, 0, s>>>(p);
}

template <bool kPos, bool kSlots, bool kGather>
void launch_parts(const VllmStepParams& p, dim3 grid, cudaStream_t s) {
  if constexpr (kSlots) {  // context parallelism only matters to the slot mappings
    if (p.cp_size > 1) {
      launch_index<kPos, kSlots, kGather, true>(p, grid, s);
      return;
    }
  }
  launch_index<kPos, kSlots, kGather, false>(p, grid, s);
}

}  // namespace

const char* vllm_step_cuda(const VllmStepParams& p, void* stream) {
  const int64_t rows = p.gather && p.num_rows > p.n ? p.num_rows : p.n;
  if (rows + 1 > INT32_MAX) return "too many rows for one launch";
  const dim3 grid(static_cast<unsigned>(rows + 1), p.groups > 0 ? p.groups : 1);
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const int parts = (p.write_pos ? 4 : 0) | (p.slots ? 2 : 0) | (p.gather ? 1 : 0);
  switch (parts) {
    case 0: launch_parts<false, false, false>(p, grid, s); break;
    case 1: launch_parts<false, false, true>(p, grid, s); break;
    case 2: launch_parts<false, true, false>(p, grid, s); break;
    case 3: launch_parts<false, true, true>(p, grid, s); break;
    case 4: launch_parts<true, false, false>(p, grid, s); break;
    case 5: launch_parts<true, false, true>(p, grid, s); break;
    case 6: launch_parts<true, true, false>(p, grid, s); break;
    default: launch_parts<true, true, true>(p, grid, s); break;
  }
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
