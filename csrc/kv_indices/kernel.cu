// build_kv_indices, build_draft_decode_kv_indices: the CUDA kernels (no torch
// headers).
//
// build_kv_indices:
// Grid (bs [+ 1], blocks per row), sized from bs and the static row width
// only, never from device lengths: a CUDA graph replays it with any new
// lengths. Block (b, y) writes ids y * 256 + t, y * 256 + t + step, ... of row
// b, one per thread: with E == 1 a coalesced copy of the row's slots. Blocks
// past a row's live length leave at once; block (b, 0) always stays, checks
// the row and writes kv_indptr[b + 1].
//
// kv_indptr in the same launch: a row's start is the sum of the lengths
// before it, which every block of the row forms itself (a block-wide sum over
// b lengths, read from L2) instead of waiting for another block: no grid-wide
// dependency, no second launch. Block (b, 0) writes entry b + 1 of kv_indptr
// and of the verify companions (qo_indptr, mask_indptr) from the same sum.
// The extra row bs (num_kv_splits given) holds one block that reduces the
// batch's largest and smallest lengths and writes every row's split counts.
//
// build_draft_decode_kv_indices: grid (G + 1), G one wave, sized from bs and
// the row width (and the window) only. Each request's prefix is cut into
// tiles of 1024 tokens, dealt round-robin to the warps: a warp reads each
// token of its tiles once and stores it into every step's and branch's copy,
// so a 128k request among short ones takes its share of the GPU instead of a
// fixed number of blocks. Every block scans the prefix lengths itself
// (offsets, tile counts, row checks; no grid-wide dependency), then writes the
// draft chains of its requests. The extra block G scans positions and writes
// every step's kv_indptr (and the split counts, when asked).
#include <climits>

#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "common/sm_count.h"
#include "kv_indices/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kBlocksPerSm = 2048 / kThreads;
constexpr int64_t kMaxGridY = 65535;
constexpr unsigned kFullMask = 0xffffffffu;

#define OP "build_kv_indices"

SGL_FAILURE_PATH void fail_row(uint32_t row, int64_t req, int64_t pool_size, int64_t start,
                               int64_t seq, int64_t ext) {
  const bool req_pool_indices_in_range = req >= 0 && req < pool_size;
  SGL_DEVICE_CHECK(req_pool_indices_in_range,
                   OP ": req_pool_indices[%u] = %lld is outside [0, req_to_token.size(0) = %lld)", row,
                   (long long)req, (long long)pool_size);
  const bool kv_start_idx_non_negative = start >= 0;
  SGL_DEVICE_CHECK(kv_start_idx_non_negative, OP ": kv_start_idx[%u] = %lld is negative", row,
                   (long long)start);
  const bool seq_lens_in_int32_range = length_fits(seq);
  SGL_DEVICE_CHECK(seq_lens_in_int32_range, OP ": seq_lens[%u] = %lld is negative or does not fit int32",
                   row, (long long)seq);
  const bool extend_seq_lens_in_int32_range = length_fits(ext);
  SGL_DEVICE_CHECK(extend_seq_lens_in_int32_range,
                   OP ": extend_seq_lens[%u] = %lld is negative or does not fit int32", row, (long long)ext);
  __trap();
}

// `summed`: what the written kv_indptr sums (kv_lens_name), null for a given kv_indptr.
SGL_FAILURE_PATH void fail_indptr(uint32_t row, int64_t lo, int64_t hi, int64_t n, int64_t size,
                                  const char* summed) {
  if (summed != nullptr) {
    const bool running_sum_fits_kv_indptr = false;
    SGL_DEVICE_CHECK(running_sum_fits_kv_indptr, OP ": the running sum of %s[0..%u] = %lld does not fit kv_indptr",
                     summed, row, (long long)hi);
  }
  const bool kv_indptr_non_decreasing = lo >= 0 && hi >= lo;
  SGL_DEVICE_CHECK(kv_indptr_non_decreasing,
                   OP ": kv_indptr must be non-negative and non-decreasing, got kv_indptr[%u] = %lld, "
                      "kv_indptr[%u] = %lld",
                   row, (long long)lo, row + 1, (long long)hi);
  const bool kv_indptr_row_holds_tokens = false;
  SGL_DEVICE_CHECK(kv_indptr_row_holds_tokens,
                   OP ": row %u holds %lld tokens but kv_indptr gives it [%lld, %lld) in kv_indices "
                      "of %lld elements",
                   row, (long long)n, (long long)lo, (long long)hi, (long long)size);
  __trap();
}

SGL_FAILURE_PATH void fail_offset(uint32_t row, int64_t given, int64_t dropped, bool offsets64) {
  const bool start_fits_kv_offsets = false;
  SGL_DEVICE_CHECK(start_fits_kv_offsets,
                   OP ": row %u's start, kv_start_idx[%u] = %lld + %lld tokens before its window, does not fit "
                      "kv_offsets (%s)",
                   row, row, (long long)given, (long long)dropped, offsets64 ? "int64" : "int32");
  __trap();
}

SGL_FAILURE_PATH void fail_mask(uint32_t row, int64_t sum, int64_t q_stride, bool mask64, const char* lens) {
  const bool running_sum_fits_mask_indptr = false;
  SGL_DEVICE_CHECK(running_sum_fits_mask_indptr,
                   OP ": the running sum of q_stride * (%s + q_stride) over rows 0..%u "
                      "(%s summed: %lld, q_stride = %lld) does not fit mask_indptr (%s)",
                   lens, row, lens, (long long)sum, (long long)q_stride,
                   mask64 ? "int64" : "int32");
  __trap();
}

SGL_FAILURE_PATH void fail_id(uint32_t row, int64_t i, int err, int64_t bad) {
  const bool virtual_page_inside_v2p = err != kIdV2p;
  SGL_DEVICE_CHECK(virtual_page_inside_v2p, OP ": row %u, token %lld reads virtual page %lld, outside v2p",
                   row, (long long)i, (long long)bad);
  const bool id_inside_token_mapping = err != kIdMapping;
  SGL_DEVICE_CHECK(id_inside_token_mapping, OP ": row %u, token %lld: id %lld is outside token_mapping",
                   row, (long long)i, (long long)bad);
  const bool id_fits_kv_indices = false;
  SGL_DEVICE_CHECK(id_fits_kv_indices, OP ": row %u, token %lld: its id does not fit kv_indices", row,
                   (long long)i);
  __trap();
}

// Block-wide reductions (every thread passes a value; every thread gets the result).
template <typename F>
__device__ __forceinline__ int64_t block_reduce(int64_t v, F op, int64_t* scratch) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v = op(v, __shfl_xor_sync(kFullMask, v, d));
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // scratch may still be read by an earlier reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = op(v, scratch[w]);
  return v;
}

struct Add {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a + b; }
};
struct Max {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};
struct Min {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

// The extra block: the batch's split counts (get_num_kv_splits_triton).
__device__ void write_splits(const KvSplits& p, const KvReadSource& s, const IndexArray& extend,
                             int64_t window) {
  __shared__ int64_t scratch[kWarps];
  int64_t hi = 0, lo = INT64_MAX;
  for (int64_t b = threadIdx.x; b < s.bs; b += kThreads) {
    const int64_t len = clamped_len(kv_row_len(s, extend, window, b));
    hi = max_i64(hi, len);
    lo = min_i64(lo, len);
  }
  hi = block_reduce(hi, Max(), scratch);
  lo = block_reduce(lo, Min(), scratch);
  const KvSplitPlan plan = kv_split_plan(p, s.bs, hi, lo);
  for (int64_t b = threadIdx.x; b < s.bs; b += kThreads) {
    const int32_t v = kv_splits_of(plan, kv_row_len(s, extend, window, b));
    for (int64_t g = 0; g < p.num_group; ++g) p.num_kv_splits[b * p.num_group + g] = v;
  }
  if (threadIdx.x == 0 && p.uneven_batch != nullptr) p.uneven_batch[0] = plan.uneven ? 1 : 0;
}

__global__ void __launch_bounds__(kThreads, kBlocksPerSm)
    build_kv_indices_kernel(const __grid_constant__ KvIndicesParams p) {
  const KvReadSource& s = p.src;
  const uint32_t row = blockIdx.x;
  if (row == s.bs) {
    if (blockIdx.y == 0) write_splits(p.splits, s, p.extend_seq_lens, p.sliding_window);
    return;
  }
  const int64_t req = s.req_pool_indices[row];
  const int64_t seq = s.seq_lens[row];
  const int64_t ext = extend_at(p.extend_seq_lens, row);
  const int64_t whole = kv_len(seq, ext);
  const int64_t len = in_window(whole, p.sliding_window);
  const int64_t given_start = s.kv_start_idx.present() ? s.kv_start_idx[row] : 0;
  const int64_t start = window_start(given_start, whole - len);
  const int64_t n = kv_indices_live(p, len, start);
  const int64_t first = static_cast<int64_t>(blockIdx.y) * kThreads;
  if (blockIdx.y != 0 && first >= n) return;  // (block-uniform, as every return before the sums)
  if (req < 0 || req >= s.pool_size || given_start < 0 || !length_fits(seq) || !length_fits(ext)) {
    if (threadIdx.x == 0) fail_row(row, req, s.pool_size, given_start, seq, ext);
    return;
  }
  if (p.kv_offsets != nullptr && !offset_fits(p, given_start, whole - len)) {
    if (threadIdx.x == 0) fail_offset(row, given_start, whole - len, p.offsets64);
    return;
  }
  int64_t lo, hi, mask = 0;  // mask: mask_indptr[row + 1] (write_indptr only)
  if (p.write_indptr) {
    __shared__ int64_t scratch[kWarps];
    int64_t sum = 0;
    for (int64_t r = threadIdx.x; r < row; r += kThreads)
      sum += clamped_len(kv_row_len(s, p.extend_seq_lens, p.sliding_window, r));
    lo = block_reduce(sum, Add(), scratch);
    hi = lo + len;
    if (hi > p.indptr_max) {
      if (threadIdx.x == 0) fail_indptr(row, lo, hi, n, p.out_size, kv_lens_name(p));
      return;
    }
    if (blockIdx.y == 0 && threadIdx.x == 0) {
      if (p.mask_indptr != nullptr && !mask_indptr_of(p, int64_t{row} + 1, hi, &mask)) {
        fail_mask(row, hi, p.q_stride, p.mask64, kv_lens_name(p));
        return;
      }
      if (row == 0) store_indptr(p, 0, 0);
      store_indptr(p, row + 1, hi);
    }
  } else {
    lo = indptr_at(p, row);
    hi = indptr_at(p, row + 1);
    if (lo < 0 || hi < lo) {
      if (threadIdx.x == 0) fail_indptr(row, lo, hi, n, p.out_size, nullptr);
      return;
    }
  }
  if (blockIdx.y == 0 && threadIdx.x == 0) {  // the verify row starts, whichever are given, and the offset
    if (row == 0) store_verify_indptrs(p, 0, 0);
    store_verify_indptrs(p, int64_t{row} + 1, mask);
    if (p.kv_offsets != nullptr) store_index(p.kv_offsets, p.offsets64, row, start);
  }
  if (n > 0 && (n > hi - lo || lo > p.out_size - n)) {
    if (threadIdx.x == 0) fail_indptr(row, lo, hi, n, p.out_size, nullptr);
    return;
  }
  const int32_t* in = s.req_to_token + req * s.req_to_token_stride;
  const int64_t step = static_cast<int64_t>(gridDim.y) * kThreads;
  for (int64_t i = first + threadIdx.x; i < n; i += step) {
    int err = kIdOk;
    int64_t bad = 0;
    const int64_t id = kv_index_id(p, in, start + i, &err, &bad);
    if (err != kIdOk) {
      fail_id(row, i, err, bad);
      return;
    }
    store_id(p, lo + i, id);
  }
}

#undef OP
#define OP "build_draft_decode_kv_indices"

SGL_FAILURE_PATH void fail_draft_row(const DraftKvIndicesParams& p, uint32_t b, int err) {
  const bool req_pool_indices_in_range = err != kDraftReq;
  SGL_DEVICE_CHECK(req_pool_indices_in_range,
                   OP ": req_pool_indices[%u] = %lld is outside [0, req_to_token.size(0) = %lld)", b,
                   (long long)p.src.req_pool_indices[b], (long long)p.src.pool_size);
  const bool seq_lens_in_int32_range = err != kDraftLen;
  SGL_DEVICE_CHECK(seq_lens_in_int32_range, OP ": seq_lens[%u] = %lld is negative or does not fit int32",
                   b, (long long)p.src.seq_lens[b]);
  const bool reads_inside_req_to_token_row = err != kDraftRow;
  SGL_DEVICE_CHECK(reads_inside_req_to_token_row,
                   OP ": request %u (seq_lens = %lld) reads past its req_to_token row of %lld positions",
                   b, (long long)p.src.seq_lens[b], (long long)p.src.row_len);
  const bool ids_fit_kv_indices_row = false;
  SGL_DEVICE_CHECK(ids_fit_kv_indices_row,
                   OP ": request %u's ids of the last step end past kv_indices.size(1) = %lld", b,
                   (long long)p.out_width);
  __trap();
}

SGL_FAILURE_PATH void fail_draft_indptr(int64_t z, int64_t v, bool position) {
  const bool positions_in_int32_range = !position;
  SGL_DEVICE_CHECK(positions_in_int32_range, OP ": positions[%lld] = %lld is negative or does not fit int32",
                   (long long)z, (long long)v);
  const bool kv_indptr_fits = false;
  SGL_DEVICE_CHECK(kv_indptr_fits, OP ": kv_indptr[num_steps - 1][%lld] = %lld does not fit kv_indptr",
                   (long long)z, (long long)v);
  __trap();
}

// Positions or rows a thread takes per pass of a block-wide scan, all loaded
// before the scan: one memory round trip per kThreads * kScanItems.
constexpr int kScanItems = 4;

// The extra block: every step's kv_indptr[s][1 .. bs * topk], a scan of the
// capped positions in passes of kThreads * kScanItems.
__device__ void draft_indptr_block(const DraftKvIndicesParams& p) {
  using Scan = cub::BlockScan<int64_t, kThreads>;
  __shared__ typename Scan::TempStorage tmp;
  const int64_t n = p.src.bs * p.topk;
  int64_t carry = 0;
  for (int64_t pass = 0; pass < n; pass += kThreads * kScanItems) {
    const int64_t z0 = pass + threadIdx.x * kScanItems;
    int64_t v[kScanItems], incl[kScanItems], total;
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) v[j] = z0 + j < n ? p.positions[z0 + j] : 0;
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) incl[j] = !length_fits(v[j]) ? 0 : (p.cap > 0 ? min_i64(v[j], p.cap) : v[j]);
    Scan(tmp).InclusiveSum(incl, incl, total);
    __syncthreads();  // tmp is reused by the next pass
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t z = z0 + j;
      if (z >= n) break;
      if (!length_fits(v[j])) fail_draft_indptr(z, v[j], true);
      const int64_t base = carry + incl[j];  // positions[0..z] summed: kv_indptr[s][z + 1] - (z + 1) * it
      if (base + (z + 1) * p.num_steps > p.indptr_max) fail_draft_indptr(z + 1, base + (z + 1) * p.num_steps, false);
      for (int64_t s = 0; s < p.num_steps; ++s) store_draft_indptr(p, s, z + 1, base + (z + 1) * (s + 1));
    }
    carry += total;
  }
}

// Rows whose cumulative offsets, row pointers and read shifts a block holds
// at once; larger batches go through in chunks of this many rows.
constexpr int kDraftChunk = 1024;
// A warp copies a tile of kDraftTile prefix tokens of one row, each lane
// kDraftVec of them, all loaded before any store (enough reads in flight to
// cover the latency); the row's offsets are warp-uniform, so a token costs
// one load and one store per step and branch.
constexpr int kDraftVec = 32;
constexpr int64_t kDraftTile = int64_t{32} * kDraftVec;
// Two resident blocks per SM: 128 registers, the tile's values without
// spills; the grid is one wave of them.
constexpr int kDraftBlocksPerSm = 2;

struct DraftChunk {
  int64_t cum[kDraftChunk + 1];      // prefix tokens of the requests before each (absolute)
  int64_t tiles[kDraftChunk + 1];    // tiles of the requests before each (from the chunk's first)
  const int32_t* row[kDraftChunk];   // req_to_token row, nullptr for a request that fails its check
  int32_t shift[kDraftChunk];        // len - prefix: where the window's recent tokens start
};
static_assert(kDraftChunk == kThreads * kScanItems, "a chunk is one scan pass");

// A row's two running sums: prefix tokens and tiles.
struct DraftSums {
  int64_t cum = 0, tiles = 0;
  __device__ DraftSums& operator+=(const DraftSums& o) {
    cum += o.cum;
    tiles += o.tiles;
    return *this;
  }
};

__device__ DraftSums warp_inclusive_sum(DraftSums v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const int64_t cum = __shfl_up_sync(kFullMask, v.cum, d), tiles = __shfl_up_sync(kFullMask, v.tiles, d);
    if (lane >= d) v += DraftSums{cum, tiles};
  }
  return v;
}

// Rows [c0, c0 + n) into the chunk: a scan of their prefix lengths (from
// carry) and tile counts (from 0), each row's check; returns the running sum
// of prefix lengths past the chunk. Warp j scans rows [j * 128, j * 128 + 128),
// kScanItems per lane, loaded before any arithmetic; warps past n only wait
// (a small batch costs a warp or two, not the whole block).
__device__ int64_t load_draft_chunk(const DraftKvIndicesParams& p, DraftChunk& c, int64_t c0, int n,
                                    int64_t carry) {
  __shared__ DraftSums warp_sums[kWarps];
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) & 31;
  const int l0 = (warp * 32 + lane) * kScanItems;
  const bool active = warp * 32 * kScanItems < n;  // warp-uniform
  int64_t len[kScanItems], req[kScanItems];
  DraftSums at[kScanItems], lane_sum, lane_before;  // row j's start within the lane's rows; their sum
  if (active) {
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      len[j] = l0 + j < n ? p.src.seq_lens[c0 + l0 + j] : 0;
      req[j] = l0 + j < n ? p.src.req_pool_indices[c0 + l0 + j] : 0;
    }
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      at[j] = lane_sum;
      const int64_t term = l0 + j < n ? draft_cum_term(p, len[j]) : 0;
      lane_sum += DraftSums{term, (term + kDraftTile - 1) / kDraftTile};
    }
    const DraftSums incl = warp_inclusive_sum(lane_sum, lane);
    if (lane == 31) warp_sums[warp] = incl;
    lane_before = DraftSums{incl.cum - lane_sum.cum, incl.tiles - lane_sum.tiles};
  } else if (lane == 0) {
    warp_sums[warp] = DraftSums{};
  }
  __syncthreads();
  DraftSums total{carry, 0};
  for (int w = 0; w < kWarps; ++w) {
    if (w == warp) lane_before += total;
    total += warp_sums[w];
  }
  if (active) {
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      const int local = l0 + j;
      if (local >= n) break;
      const int64_t cum = lane_before.cum + at[j].cum;
      const bool ok = draft_row_check(p, c0 + local, req[j], len[j], cum) == kDraftOk;
      c.cum[local] = cum;
      c.tiles[local] = lane_before.tiles + at[j].tiles;
      c.row[local] = ok ? p.src.req_to_token + req[j] * p.src.req_to_token_stride : nullptr;
      c.shift[local] = ok ? static_cast<int32_t>(len[j] - draft_prefix_len(p, len[j])) : 0;
    }
  }
  if (threadIdx.x == 0) {
    c.cum[n] = total.cum;
    c.tiles[n] = total.tiles;
  }
  __syncthreads();
  return total.cum;
}

// The chunk row holding tile w (the last row whose first tile is <= w: empty
// rows before it share its start), searched from row r up.
__device__ int draft_row_of(const DraftChunk& c, int n, int r, int64_t w) {
  if (w < c.tiles[r + 1]) return r;
  int lo = r + 1, hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (c.tiles[mid] <= w) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Tile w's prefix tokens [i0, i0 + kDraftTile) of chunk row r, lane by lane:
// the lane's k-th token i0 + k * 32 + lane exists iff k * 32 < rem (r advances
// from the warp's previous tile; a failed row has rem <= 0 and reads nothing).
struct DraftTile {
  int r = 0;
  int rem = 0;
  int64_t i0 = 0;
  int32_t v[kDraftVec];
};

__device__ void load_draft_tile(const DraftKvIndicesParams& p, const DraftChunk& c, int n, int64_t w, DraftTile& t) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  t.r = draft_row_of(c, n, t.r, w);
  t.i0 = (w - c.tiles[t.r]) * kDraftTile;
  const int32_t* row = c.row[t.r];
  if (row == nullptr) {
    t.rem = 0;
    return;
  }
  t.rem = static_cast<int>(min_i64(c.cum[t.r + 1] - c.cum[t.r] - t.i0, kDraftTile)) - lane;
  const int32_t* sink = row + t.i0 + lane;  // the window's first tokens, read in place
  const int32_t* recent = sink + c.shift[t.r];
  if (t.i0 >= p.sink) {  // the whole tile past the sink (always, without a window)
#pragma unroll
    for (int k = 0; k < kDraftVec; ++k)
      if (k * 32 < t.rem) t.v[k] = recent[k * 32];
  } else {
    const int64_t left = min_i64(p.sink - t.i0 - lane, kDraftTile);  // > -32
#pragma unroll
    for (int k = 0; k < kDraftVec; ++k)
      if (k * 32 < t.rem) t.v[k] = k * 32 < left ? sink[k * 32] : recent[k * 32];
  }
}

// The tile into every step's and branch's copy of request b = c0 + t.r.
template <typename Out>
__device__ void store_draft_tile(const DraftKvIndicesParams& p, const DraftChunk& c, int64_t c0, const DraftTile& t) {
  if (c.row[t.r] == nullptr) return;
  const int64_t b = c0 + t.r, cum = c.cum[t.r], prefix = c.cum[t.r + 1] - cum;
  Out* const base = static_cast<Out*>(p.out) + t.i0 + (threadIdx.x & 31);
  for (int64_t s = 0; s < p.num_steps; ++s) {
    for (int64_t branch = 0; branch < p.topk; ++branch) {
      Out* const dst = base + s * p.out_stride + draft_offset(p, cum, b, branch, prefix, s);
#pragma unroll
      for (int k = 0; k < kDraftVec; ++k)
        if (k * 32 < t.rem) dst[k * 32] = t.v[k];
    }
  }
}

// Grid (G + 1): the batch's rows cut into tiles of kDraftTile prefix tokens,
// dealt round-robin to the G * kWarps warps, so a long request takes as many
// warps as its share of the tokens, whatever the other lengths; block x also
// writes the chains of (and checks) requests x, x + G, ... Block G scans
// positions into kv_indptr.
template <typename Out>
__global__ void __launch_bounds__(kThreads, kDraftBlocksPerSm)
    draft_kv_indices_kernel(const __grid_constant__ DraftKvIndicesParams p) {
  const int64_t blocks = gridDim.x - 1, x = blockIdx.x;
  if (x == blocks) {
    draft_indptr_block(p);
    if (p.splits.num_kv_splits != nullptr) write_splits(p.splits, p.src, IndexArray{}, 0);
    return;
  }
  __shared__ DraftChunk c;
  const int steps = static_cast<int>(p.num_steps), k2 = steps * steps;
  const int64_t warps = blocks * kWarps, warp = x * kWarps + threadIdx.x / 32;
  int64_t carry = 0, dealt = 0;  // tiles of the chunks before
  for (int64_t c0 = 0; c0 < p.src.bs; c0 += kDraftChunk) {
    const int n = static_cast<int>(min_i64(kDraftChunk, p.src.bs - c0));
    carry = load_draft_chunk(p, c, c0, n, carry);
    // This block's requests x, x + G, ...: the draft chains, entry (t, s, j)
    // for j <= s, one per thread (every row's loads out at once), or the
    // failed check. A checked row's length is its prefix plus its shift.
    const int first = static_cast<int>(((x - c0) % blocks + blocks) % blocks);
    const int64_t mine = first < n ? (n - 1 - first) / blocks + 1 : 0, per_row = p.topk * k2;
    for (int64_t k = threadIdx.x; k < mine * per_row; k += kThreads) {
      const int local = first + static_cast<int>(k / per_row * blocks);
      const int e = static_cast<int>(k % per_row), t = e / k2, s = e % k2 / steps, j = e % steps;
      const int32_t* row = c.row[local];
      const int64_t b = c0 + local, cum = c.cum[local], prefix = c.cum[local + 1] - cum;
      if (row == nullptr) {
        if (e == 0) fail_draft_row(p, static_cast<uint32_t>(b), draft_row_error(p, b, cum));
        continue;
      }
      if (j > s) continue;
      const int64_t len = prefix + c.shift[local];
      store_draft(p, s, draft_offset(p, cum, b, t, prefix, s) + prefix + j, row[draft_chain_start(p, len, t) + j]);
    }
    // The warp's tiles: w, w + warps, ... of the batch's (dealt on from the
    // chunks before), the row found from the previous tile's.
    DraftTile tile;
    for (int64_t w = ((warp - dealt) % warps + warps) % warps; w < c.tiles[n]; w += warps) {
      load_draft_tile(p, c, n, w, tile);
      store_draft_tile<Out>(p, c, c0, tile);
    }
    dealt += c.tiles[n];
    __syncthreads();  // the next chunk overwrites c
  }
}

}  // namespace

const char* build_draft_decode_kv_indices_cuda(const DraftKvIndicesParams& p, void* stream) {
  const int64_t bs = p.src.bs;
  if (bs == 0) return nullptr;
  // One wave, or fewer blocks where the largest possible batch of prefixes
  // (bs rows of at most the window or the row) fills fewer tiles.
  const int64_t wave = int64_t{current_device_sm_count(132)} * kDraftBlocksPerSm;
  const int64_t cap = p.cap > 0 ? min_i64(p.cap, p.src.row_len) : p.src.row_len;
  const int64_t tiles_per_row = (cap + kDraftTile - 1) / kDraftTile;
  int64_t blocks = wave;
  if (tiles_per_row < wave * kWarps / bs) blocks = max_i64((bs * tiles_per_row + kWarps - 1) / kWarps, 1);
  const dim3 grid(static_cast<unsigned>(blocks + 1));
  if (p.out64)
    draft_kv_indices_kernel<int64_t><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  else
    draft_kv_indices_kernel<int32_t><<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

const char* build_kv_indices_cuda(const KvIndicesParams& p, void* stream) {
  const int64_t bs = p.src.bs;
  if (bs == 0) return nullptr;
  const int64_t rows = bs + (p.splits.num_kv_splits != nullptr ? 1 : 0);
  if (rows > INT32_MAX) return "grid too large (req_pool_indices.numel() > 2^31 - 2)";
  // Positions a row can hold (its static cap; a sliding window, a host value,
  // caps it too), one thread each, but no more blocks than one wave over the batch.
  int64_t cap = p.src.translate ? p.src.row_len : p.row_positions;
  if (p.sliding_window > 0) cap = min_i64(cap, p.sliding_window);
  const int64_t needed = cap > 0 ? (cap - 1) / kThreads + 1 : 1;
  const int64_t wave = int64_t{current_device_sm_count(132)} * kBlocksPerSm;
  const int64_t spread = wave / bs > 1 ? wave / bs : 1;
  const int64_t per_row = min_i64(min_i64(needed, spread), kMaxGridY);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(per_row));
  build_kv_indices_kernel<<<grid, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
