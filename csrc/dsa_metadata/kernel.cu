// fused_dsa_metadata: the CUDA kernel (no torch headers).
//
// One launch, two kinds of thread block:
//   [0, S)     scan blocks (S = 1 in DECODE, else 2). Block 0: cache_seqlens,
//              cu_seqlens_k (scan over bs), paged_mqa_ctx_lens, the checks of
//              every request index and extend length (named device asserts),
//              and in DECODE the expanded rows too (one per request). Block 1:
//              seqlens_expanded, dsa_cache_seqlens, dsa_cu_seqlens_k (scan over
//              the n expanded rows);
//   [S, S + G) page blocks: copy the live prefixes of req_to_token rows into
//              page_table_1 / real_page_table, every set, every row of the
//              request.
//
// Cost model. The page tables are a copy: each live token of a request is
// read once from req_to_token and written (rows of the request) x K times, so
// the floor is those bytes over the copy bandwidth. The grid is fixed by host
// shapes only (bs and the column bound: graph-capturable, no sync), while the
// live work depends on device lengths. So the work is cut into *units*: one
// unit is kUnitTokens consecutive columns of one request (every row and set
// it feeds); every page block computes the same per-request unit prefix sum
// (one tile of up to 256 requests per pass, L2-resident loads) and takes
// units b, b + G, b + 2G, ... of the flat unit space. Short and long requests
// alike spread over all G blocks; a block with no unit exits after one round
// of loads. G is at most a few blocks per SM (one resident wave). When every
// potential unit (bs x units of the column bound) has a block of its own, the
// blocks index units directly and skip the scans (direct_page_block).
//
// Draft-extend finds each request's first expanded row with the same block
// scan (over the extend lengths), in every block that needs it: no second
// launch and no host sync.

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "common/fast_div.h"
#include "common/sm_count.h"
#include "dsa_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 256;
constexpr int kItems = 1;                      // requests / rows per thread per tile
constexpr int kTile = kThreads * kItems;       // 256
constexpr int kVecs = 2;                       // 16-byte vectors per thread per unit
constexpr int64_t kUnitTokens = kThreads * 4 * kVecs;  // 2048 columns
constexpr int kPagesPerThread = 4;             // real-table entries per thread per unit
constexpr int kPageBlocksPerSm = 4;
constexpr int kFallbackSms = 132;

using ScanU32 = cub::BlockScan<uint32_t, kThreads>;
using ScanI64 = cub::BlockScan<int64_t, kThreads>;
using ReduceI64 = cub::BlockReduce<int64_t, kThreads>;

struct ScanSmem {
  typename ScanU32::TempStorage u32;
  typename ScanI64::TempStorage i64;
};

// One tile of requests as the page blocks see it.
struct PageSmem {
  typename ScanU32::TempStorage u32;
  typename ScanI64::TempStorage i64;
  typename ReduceI64::TempStorage reduce;
  uint32_t unit_begin[kTile];  // exclusive prefix of units over the tile
  int32_t len[kTile];          // live columns
  int32_t row_begin[kTile];
  int32_t row_count[kTile];
  int64_t req[kTile];
};

union Smem {
  ScanSmem scan;
  PageSmem page;
};

SGL_FAILURE_PATH void fail_request(const DsaGenInputs& p, int64_t r, int64_t req) {
  // The named flag puts the argument in the assert text itself.
  const bool req_pool_indices_in_range = false;
  SGL_DEVICE_CHECK(req_pool_indices_in_range,
                   "fused_dsa_metadata: req_pool_indices[%lld] = %lld is outside "
                   "[0, req_to_token.size(0) = %lld)",
                   (long long)r, (long long)req, (long long)p.pool_size);
  __trap();
}

__device__ __forceinline__ void check_request(const DsaGenInputs& p, int64_t r, int64_t req) {
  if (__builtin_expect(!(req >= 0 && req < p.pool_size), 0)) fail_request(p, r, req);
}

SGL_FAILURE_PATH void fail_extend(int64_t r, int64_t e) {
  const bool extend_seq_lens_non_negative = false;
  SGL_DEVICE_CHECK(extend_seq_lens_non_negative,
                   "fused_dsa_metadata: extend_seq_lens[%lld] = %lld is negative", (long long)r,
                   (long long)e);
  __trap();
}

// A length check that failed (params.h; SGL_FAILURE_PATH): kind kSeqLen re-reads request i's length to name the argument;
// kCuSeqlensK / kDsaCuSeqlensK: the running sum written at row i.
enum LengthCheck : int { kSeqLen, kCuSeqlensK, kDsaCuSeqlensK };

SGL_FAILURE_PATH void fail_length(const DsaGenInputs& p, int kind, int64_t i) {
  if (kind == kSeqLen) {
    const int64_t seq = p.seq_lens[i];
    const bool seq_lens_in_int32_range = length_fits(seq);
    SGL_DEVICE_CHECK(seq_lens_in_int32_range,
                     "fused_dsa_metadata: seq_lens[%lld] = %lld is negative or does not fit int32",
                     (long long)i, (long long)seq);
    const bool cache_seqlens_in_int32_range = cache_len_fits(p, seq);
    SGL_DEVICE_CHECK(cache_seqlens_in_int32_range,
                     "fused_dsa_metadata: seq_lens[%lld] + next_n = %lld does not fit int32 "
                     "cache_seqlens",
                     (long long)i, (long long)(seq + p.next_n));
  }
  const bool cu_seqlens_k_fits_int32 = kind != kCuSeqlensK;
  SGL_DEVICE_CHECK(cu_seqlens_k_fits_int32,
                   "fused_dsa_metadata: cache_seqlens[0..%lld] summed (cu_seqlens_k[%lld]) does "
                   "not fit int32",
                   (long long)i, (long long)(i + 1));
  const bool dsa_cu_seqlens_k_fits_int32 = kind != kDsaCuSeqlensK;
  SGL_DEVICE_CHECK(dsa_cu_seqlens_k_fits_int32,
                   "fused_dsa_metadata: dsa_cache_seqlens[0..%lld] summed (dsa_cu_seqlens_k[%lld]) "
                   "does not fit int32",
                   (long long)i, (long long)(i + 1));
  __trap();
}

__device__ __forceinline__ void check_length(const DsaGenInputs& p, bool ok, int kind, int64_t i) {
  if (__builtin_expect(!ok, 0)) fail_length(p, kind, i);
}

// Draft-extend: the expanded rows of a request extending by `ext` (or of
// request r), whose rows start at `start`: the exclusive prefix of extend_len
// over the requests before it (<= n after capping).
__device__ __forceinline__ int64_t draft_rows_of(const DsaGenInputs& p, int64_t ext, int64_t start) {
  return start >= p.n ? 0 : min_i64(ext, p.n - start);
}
__device__ __forceinline__ int64_t draft_rows(const DsaGenInputs& p, int64_t r, int64_t start) {
  return r >= p.bs ? 0 : draft_rows_of(p, extend_len(p, r), start);
}

// ---- scan blocks ---------------------------------------------------------------

// The scans take one of two shapes, chosen per call from host shapes: every
// thread of the block, 256 rows per pass (cub), or (kWarp) warp 0 alone for up
// to 32 rows in one pass: no shared memory, no barrier, and only the shuffle
// steps those rows need.
constexpr int kWarpRows = 32;
static_assert(kItems == 1, "the scans take one row per thread");

template <bool kWarp>
constexpr int kPassRows = kWarp ? kWarpRows : kTile;

// Inclusive sum over a pass of `rows` rows; `total`: the pass's sum (block
// shape; the one-warp shape has a single pass and leaves it 0).
template <bool kWarp, typename T>
__device__ __forceinline__ T pass_inclusive_sum(ScanSmem& sm, T v, int64_t rows, T& total) {
  total = 0;
  if (kWarp) return warp_inclusive_sum(v, static_cast<int>(min_i64(rows, kWarpRows)));
  T out;
  if constexpr (sizeof(T) == 8)
    ScanI64(sm.i64).InclusiveSum(v, out, total);
  else
    ScanU32(sm.u32).InclusiveSum(v, out, total);
  return out;
}

template <bool kWarp>
__device__ __forceinline__ void pass_sync() {
  if (!kWarp) __syncthreads();
}

template <class P>
__device__ void write_expanded(const P& p, int64_t e, int32_t len, int32_t dsa,
                               uint32_t cu) {
  for (int s = 0; s < p.sets(); ++s) {
    const DsaGenSet& d = p.set[s];
    if (d.seqlens_expanded) d.seqlens_expanded[e] = len;
    d.dsa_cache_seqlens[e] = dsa;
    d.dsa_cu_seqlens_k[e + 1] = static_cast<int32_t>(cu);
  }
}

// Every request index is checked whatever its length (as on CPU), and every
// extend length the call reads; in the tile pass that loads the lengths, so the
// checks add no round trip. (The scans themselves never index with these
// values: page blocks check the index again before they read, and extend
// lengths enter every sum clamped at 0.)
template <int M>
__device__ __forceinline__ void check_tile(const DsaGenInputs& p, int64_t base) {
  const int64_t r = base + threadIdx.x;
  if (r >= p.bs) return;
  if (p.writes_pages()) check_request(p, r, p.req_pool_indices[r]);
  if (M == kDsaGenDraftExtend && p.n > 0 && (!p.static_extend || r == 0)) {
    const int64_t e = p.extend_seq_lens[r];
    if (__builtin_expect(e < 0, 0)) fail_extend(r, e);
  }
}

// Requests: cache_seqlens, cu_seqlens_k, paged_mqa_ctx_lens; DECODE also its
// expanded rows (one per request, the same lengths).
template <int M, bool kWarp, class P>
__device__ void scan_requests(const P& p, ScanSmem& sm) {
  uint32_t carry = 0, dsa_carry = 0;
  for (int64_t base = 0; base < p.bs; base += kPassRows<kWarp>) {
    const int64_t r = base + threadIdx.x;
    const int64_t seq = r < p.bs ? p.seq_lens[r] : 0;
    const bool fits = cache_len_fits<M>(p, seq);
    const int32_t c = cache_len<M>(p, to_i32(seq));
    check_tile<M>(p, base);
    uint32_t total, dsa_total = 0;
    const uint32_t v = pass_inclusive_sum<kWarp>(sm, static_cast<uint32_t>(c), p.bs - base, total);
    uint32_t dv = 0;
    if (M == kDsaGenDecode) {
      pass_sync<kWarp>();
      dv = pass_inclusive_sum<kWarp>(sm, static_cast<uint32_t>(min_i32(c, p.topk)), p.bs - base,
                                     dsa_total);
    }
    if (r < p.bs) {
      check_length(p, fits, kSeqLen, r);
      check_length(p, running_sum_fits(carry + v), kCuSeqlensK, r);
      if (M == kDsaGenDecode) check_length(p, running_sum_fits(dsa_carry + dv), kDsaCuSeqlensK, r);
      for (int s = 0; s < p.sets(); ++s) {
        const DsaGenSet& d = p.set[s];
        d.cache_seqlens[r] = c;
        d.cu_seqlens_k[r + 1] = static_cast<int32_t>(carry + v);
        if (d.paged_mqa_ctx_lens) {
          int32_t* row = d.paged_mqa_ctx_lens + r * d.paged_mqa_ctx_lens_stride;
          for (int64_t j = 0; j < p.next_n; ++j) row[j] = c;
        }
      }
      if (M == kDsaGenDecode) write_expanded(p, r, c, min_i32(c, p.topk), dsa_carry + dv);
    }
    carry += total;
    dsa_carry += dsa_total;
    pass_sync<kWarp>();  // the scan storage is reused by the next pass
  }
}

// TARGET_VERIFY: expanded row e is draft token j = e % next_n of request
// e / next_n, length seq + j + 1 (not capped).
template <bool kWarp, class P>
__device__ void scan_verify_rows(const P& p, ScanSmem& sm) {
  const uint32_t next_n = static_cast<uint32_t>(p.next_n);
  uint32_t carry = 0;
  for (int64_t base = 0; base < p.n; base += kPassRows<kWarp>) {
    const int64_t e = base + threadIdx.x;
    int32_t len = 0;
    if (e < p.n) {
      const uint32_t r = static_cast<uint32_t>(e) / next_n;
      const uint32_t j = static_cast<uint32_t>(e) - r * next_n;
      len = add_i32(to_i32(p.seq_lens[r]), j + 1);
    }
    const uint32_t dv0 = e < p.n ? static_cast<uint32_t>(min_i32(len, p.topk)) : 0u;
    uint32_t total;
    const uint32_t dv = pass_inclusive_sum<kWarp>(sm, dv0, p.n - base, total);
    if (e < p.n) {
      check_length(p, running_sum_fits(carry + dv), kDsaCuSeqlensK, e);
      write_expanded(p, e, len, min_i32(len, p.topk), carry + dv);
    }
    carry += total;
    pass_sync<kWarp>();
  }
}

// DRAFT_EXTEND: request r covers rows [start_r, start_r + count_r); row j of it
// has length max(seq - ext + j + 1, 0). One thread walks a request's rows (a
// request extends by a few tokens). Rows past every request take request 0's
// length (upstream's scan default). Every length is loaded before the first
// scan: one memory round trip.
template <bool kWarp, class P>
__device__ void scan_draft_rows(const P& p, ScanSmem& sm) {
  const int32_t seq0 = to_i32(p.seq_lens[0]);
  int64_t start_carry = 0;
  uint32_t dsa_carry = 0;
  for (int64_t base = 0; base < p.bs && start_carry < p.n; base += kPassRows<kWarp>) {
    const int64_t r = base + threadIdx.x;
    const bool in = r < p.bs;
    const int64_t raw_ext = in ? p.extend_seq_lens[p.static_extend ? 0 : r] : 0;
    const int32_t seq = in ? to_i32(p.seq_lens[r]) : 0;
    const int64_t ext = in ? extend_len_of(p, raw_ext) : 0;
    int64_t start_total;
    const int64_t start = start_carry + pass_inclusive_sum<kWarp>(sm, ext, p.bs - base, start_total) - ext;
    const int64_t count = draft_rows_of(p, ext, start);
    uint32_t sum = 0;
    for (int64_t j = 0; j < count; ++j)
      sum += static_cast<uint32_t>(min_i32(draft_extend_len(seq, raw_ext, j), p.topk));
    uint32_t dsa_total;  // (the two sums use separate scan storage)
    uint32_t cu = dsa_carry + pass_inclusive_sum<kWarp>(sm, sum, p.bs - base, dsa_total) - sum;
    for (int64_t j = 0; j < count; ++j) {
      const int32_t len = draft_extend_len(seq, raw_ext, j);
      const int32_t dsa = min_i32(len, p.topk);
      cu += static_cast<uint32_t>(dsa);
      check_length(p, running_sum_fits(cu), kDsaCuSeqlensK, start + j);
      write_expanded(p, start + j, len, dsa, cu);
    }
    if (kWarp) {  // one pass: the last live lane's sums are the totals
      const int last = static_cast<int>(min_i64(p.bs - base, kWarpRows)) - 1;
      start_total = __shfl_sync(0xffffffffu, start - start_carry + ext, last);
      dsa_total = __shfl_sync(0xffffffffu, cu - dsa_carry, last);
    }
    start_carry = min_i64(start_carry + start_total, p.n);
    dsa_carry += dsa_total;
    pass_sync<kWarp>();
  }
  const int32_t len = draft_extend_len(seq0, 1, 0);
  const int32_t dsa = min_i32(len, p.topk);
  for (int64_t e = start_carry + threadIdx.x; e < p.n; e += kPassRows<kWarp>) {
    const uint32_t k = static_cast<uint32_t>(e - start_carry + 1);
    const uint32_t cu = dsa_carry + k * static_cast<uint32_t>(dsa);
    check_length(p, running_sum_fits(cu), kDsaCuSeqlensK, e);
    write_expanded(p, e, len, dsa, cu);
  }
}

// DRAFT_EXTEND with up to 32 requests and 32 expanded rows (a small batch's
// draft extend): warp 0, lane e holding expanded row e instead of one lane
// walking each request's rows, so that a row's path is one scan long. Lane r
// loads request r's lengths; row e finds its request (the last one starting at
// or before e) by a binary search over the lanes' starts.
template <class P>
__device__ void scan_draft_rows_by_row(const P& p) {
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = static_cast<int>(threadIdx.x);
  const int bs = static_cast<int>(p.bs);
  const bool in = lane < bs;
  const int64_t raw_ext = in ? p.extend_seq_lens[p.static_extend ? 0 : lane] : 0;
  const int32_t seq = in ? to_i32(p.seq_lens[lane]) : 0;
  const int64_t ext = in ? extend_len_of(p, raw_ext) : 0;
  const int64_t start = warp_inclusive_sum(ext, bs) - ext;
  int req = 0;
#pragma unroll
  for (int step = 16; step >= 1; step >>= 1) {
    if (step >= bs) continue;  // warp-uniform
    const int k = req + step;
    const int64_t sk = __shfl_sync(kAll, start, k & 31);
    if (k < bs && sk <= lane) req = k;
  }
  const int64_t s = __shfl_sync(kAll, start, req);
  const int64_t count = __shfl_sync(kAll, ext, req);
  const int32_t sq = __shfl_sync(kAll, seq, req);
  const int64_t rx = __shfl_sync(kAll, raw_ext, req);
  const int32_t seq0 = __shfl_sync(kAll, seq, 0);
  const int64_t e = lane;
  // Rows past every request take request 0's length (upstream's scan default).
  const int32_t len = e - s < count ? draft_extend_len(sq, rx, e - s) : draft_extend_len(seq0, 1, 0);
  const int32_t dsa = min_i32(len, p.topk);
  const uint32_t cu = warp_inclusive_sum(e < p.n ? static_cast<uint32_t>(dsa) : 0u, static_cast<int>(p.n));
  if (e < p.n) {
    check_length(p, running_sum_fits(cu), kDsaCuSeqlensK, e);
    write_expanded(p, e, len, dsa, cu);
  }
}

// Scan blocks before the page blocks: DECODE's expanded rows are its requests
// (one block); TARGET_VERIFY and DRAFT_EXTEND scan their expanded rows in a
// second block, beside the requests' (neither reads what the other writes), so
// that each block's serial path is one scan's.
template <int M>
constexpr int kScanBlocks = M == kDsaGenDecode ? 1 : 2;

template <int M, class P>
__device__ void scan_block(const P& p, ScanSmem& sm) {
  if (threadIdx.x < p.sets()) {
    p.set[threadIdx.x].cu_seqlens_k[0] = 0;
    if (M == kDsaGenDecode) p.set[threadIdx.x].dsa_cu_seqlens_k[0] = 0;
  }
  if (p.bs == 0) return;
  if (p.bs > kWarpRows)
    scan_requests<M, false>(p, sm);
  else if (threadIdx.x < kWarpRows)
    scan_requests<M, true>(p, sm);
}

template <int M, class P>
__device__ void row_block(const P& p, ScanSmem& sm) {
  if (threadIdx.x < p.sets()) p.set[threadIdx.x].dsa_cu_seqlens_k[0] = 0;
  if (p.bs == 0) return;
  // Verify scans its n expanded rows, draft-extend its bs requests.
  const int64_t rows = M == kDsaGenTargetVerify ? p.n : p.bs;
  const bool warp = rows <= kWarpRows;
  if (!warp || threadIdx.x < kWarpRows) {
    if (M == kDsaGenTargetVerify) warp ? scan_verify_rows<true>(p, sm) : scan_verify_rows<false>(p, sm);
    if (M == kDsaGenDraftExtend) {
      if (warp && p.n <= kWarpRows)
        scan_draft_rows_by_row(p);
      else
        warp ? scan_draft_rows<true>(p, sm) : scan_draft_rows<false>(p, sm);
    }
  }
}

// ---- page blocks ---------------------------------------------------------------

__device__ __forceinline__ void load_vec(const int32_t* s, int nel, bool vec, int32_t (&v)[4]) {
  if (nel == 4 && vec) {
    const int4 x = __ldg(reinterpret_cast<const int4*>(s));
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < nel) v[e] = __ldg(s + e);
  }
}

__device__ __forceinline__ void store_vec(int32_t* t, int nel, bool vec, const int32_t (&v)[4]) {
  if (nel == 4 && vec) {
    *reinterpret_cast<int4*>(t) = make_int4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < nel) t[e] = v[e];
  }
}

// Columns [begin, end) of one request's live prefix into every row and set.
// Both tables' loads are issued before the first store (a store could alias a
// later load, so the compiler keeps that order as written).
template <class P>
__device__ void copy_unit(const P& p, const int32_t* src, int64_t begin, int64_t end,
                          int64_t row_begin, int64_t row_count) {
  int32_t v[kVecs][4];
  int64_t col[kVecs];
  int nel[kVecs];
  if (p.page_table_1) {
#pragma unroll
    for (int k = 0; k < kVecs; ++k) {
      col[k] = begin + 4 * (k * kThreads + static_cast<int64_t>(threadIdx.x));
      nel[k] = static_cast<int>(min_i64(max_i64(end - col[k], 0), 4));
      load_vec(src + col[k], nel[k], p.vec_load, v[k]);
    }
  }
  // Pages whose first token lies in [begin, end): at most 1024 per unit. Every
  // slot is loaded before any is divided (the division branches on the page
  // size, and a load after a branch waits for it).
  const int64_t q0 = p.page.ceil_div(begin), q1 = p.page.ceil_div(end);
  int32_t page[kPagesPerThread];
  bool has_page[kPagesPerThread];
  if (p.real_page_table) {
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) {
      const int64_t q = q0 + k * kThreads + threadIdx.x;
      has_page[k] = q < q1;
      page[k] = has_page[k] ? __ldg(src + q * p.page.page_size) : 0;
    }
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) page[k] = static_cast<int32_t>(p.page.div(page[k]));
  }
  // The stores: each row's pointers one stride past the previous row's, and
  // what decides each store (full vector or not, page or not) computed once.
  bool full[kVecs];
#pragma unroll
  for (int k = 0; k < kVecs; ++k) full[k] = p.page_table_1 && nel[k] == 4 && p.vec_store;
  for (int s = 0; s < p.sets(); ++s) {
    const DsaGenSet& d = p.set[s];
    if (p.page_table_1) {
      int32_t* out = d.page_table_1 + row_begin * d.page_table_1_stride;
      for (int64_t row = 0; row < row_count; ++row, out += d.page_table_1_stride) {
#pragma unroll
        for (int k = 0; k < kVecs; ++k) {
          if (full[k])
            *reinterpret_cast<int4*>(out + col[k]) = make_int4(v[k][0], v[k][1], v[k][2], v[k][3]);
          else
            store_vec(out + col[k], nel[k], false, v[k]);
        }
      }
    }
    if (p.real_page_table) {
      int32_t* out = d.real_page_table + row_begin * d.real_page_table_stride + q0 + threadIdx.x;
      for (int64_t row = 0; row < row_count; ++row, out += d.real_page_table_stride) {
#pragma unroll
        for (int k = 0; k < kPagesPerThread; ++k)
          if (has_page[k]) out[k * kThreads] = page[k];
      }
    }
  }
}

template <int M, class P>
__device__ void page_block(const P& p, PageSmem& sm, int64_t unit_tokens,
                           int64_t block, int64_t blocks) {
  int64_t unit_carry = 0;   // units of the tiles before this one
  int64_t start_carry = 0;  // DRAFT_EXTEND: rows of the requests before this tile
  for (int64_t base = 0; base < p.bs; base += kTile) {
    // Every per-request load first (one round trip), then the scans. (A
    // thread's own entries of the shared arrays need no barrier.)
    int64_t start[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      const int t = threadIdx.x * kItems + i;
      const bool in = r < p.bs;
      start[i] = (M == kDsaGenDraftExtend && in && p.n > 0) ? extend_len(p, r) : 0;
      sm.len[t] = in ? static_cast<int32_t>(live_len(p, cache_len<M>(p, to_i32(p.seq_lens[r])))) : 0;
      sm.req[t] = in ? p.req_pool_indices[r] : 0;
    }
    int64_t start_total = 0;
    if (M == kDsaGenDraftExtend) ScanI64(sm.i64).ExclusiveSum(start, start, start_total);
    uint32_t units[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      const int t = threadIdx.x * kItems + i;
      int64_t row_begin = 0, row_count = 0;
      if (r < p.bs) {
        if (M == kDsaGenDecode) {
          row_begin = r, row_count = 1;
        } else if (M == kDsaGenTargetVerify) {
          row_begin = r * p.next_n, row_count = p.next_n;
        } else {
          row_begin = start_carry + start[i];
          row_count = draft_rows(p, r, row_begin);
        }
      }
      const int64_t len = sm.len[t];
      units[i] = len > 0 && row_count > 0 ? static_cast<uint32_t>((len - 1) / unit_tokens + 1) : 0u;
      sm.row_begin[t] = static_cast<int32_t>(row_begin);
      sm.row_count[t] = static_cast<int32_t>(row_count);
    }
    uint32_t tile_units;
    ScanU32(sm.u32).ExclusiveSum(units, units, tile_units);
#pragma unroll
    for (int i = 0; i < kItems; ++i) sm.unit_begin[threadIdx.x * kItems + i] = units[i];
    __syncthreads();

    // This block's units of the tile: global ids u == block (mod blocks).
    const int64_t first = unit_carry + ((block - unit_carry % blocks) + blocks) % blocks;
    for (int64_t u = first; u < unit_carry + tile_units; u += blocks) {
      const uint32_t local = static_cast<uint32_t>(u - unit_carry);
      int lo = 0, hi = kTile - 1;  // last request whose units start at or before `local`
      while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (sm.unit_begin[mid] <= local) lo = mid; else hi = mid - 1;
      }
      const int64_t req = sm.req[lo];
      check_request(p, base + lo, req);
      const int64_t begin = static_cast<int64_t>(local - sm.unit_begin[lo]) * unit_tokens;
      const int64_t end = min_i64(begin + unit_tokens, sm.len[lo]);
      copy_unit(p, p.req_to_token + req * p.req_to_token_stride, begin, end, sm.row_begin[lo],
                sm.row_count[lo]);
    }
    unit_carry += tile_units;
    start_carry = min_i64(start_carry + start_total, p.n);
    __syncthreads();  // the tile's shared arrays are rewritten next
  }
}

// A request's page-table rows: DECODE row r, TARGET_VERIFY next_n rows from
// r * next_n, DRAFT_EXTEND `ext` rows after those of the requests before it:
// the scan block's prefix, summed here by the whole block (every thread of the
// block calls this).
template <int M>
__device__ __forceinline__ void request_rows(const DsaGenInputs& p, PageSmem& sm, int64_t r, int64_t ext,
                                             int64_t& row_begin, int64_t& row_count) {
  row_begin = r, row_count = 1;
  if (M == kDsaGenTargetVerify) {
    row_begin = r * p.next_n, row_count = p.next_n;
  } else if (M == kDsaGenDraftExtend) {
    int64_t start = 0;
    if (p.static_extend) {
      start = r * ext;
    } else if (r > 0) {  // (block-uniform: request 0's blocks skip the reduction)
      int64_t part = 0;
      for (int64_t i = threadIdx.x; i < r; i += kThreads) part += extend_len(p, i);
      start = ReduceI64(sm.reduce).Sum(part);  // valid in thread 0
      if (threadIdx.x == 0) sm.row_begin[0] = static_cast<int32_t>(min_i64(start, p.n));
      __syncthreads();
      start = sm.row_begin[0];
    }
    row_begin = start;
    row_count = draft_rows_of(p, ext, start);
  }
}

// One page block per unit when every potential unit has a block of its own
// (bs * units-per-row <= the grid cap): block b is column unit b % chunks of
// request b / chunks, found without the tile scans. A block past its
// request's live prefix exits after one round of loads.
template <int M, class P>
__device__ void direct_page_block(const P& p, PageSmem& sm, int64_t unit_tokens,
                                  uint32_t block, FastDivU32 chunks) {
  const uint32_t r = chunks.div(block);
  const int64_t begin = static_cast<int64_t>(block - r * chunks.divisor) * unit_tokens;
  const int64_t seq = p.seq_lens[r];
  const int64_t req = p.req_pool_indices[r];
  // DRAFT_EXTEND: the request's own extend length with its other scalars.
  const int64_t ext = M == kDsaGenDraftExtend ? extend_len(p, r) : 0;
  int64_t row_begin, row_count;
  request_rows<M>(p, sm, r, ext, row_begin, row_count);
  const int64_t len = live_len(p, cache_len<M>(p, to_i32(seq)));
  if (begin >= len || row_count <= 0) return;
  check_request(p, r, req);
  copy_unit(p, p.req_to_token + req * p.req_to_token_stride, begin, min_i64(begin + unit_tokens, len),
            row_begin, row_count);
}

// The direct block's common case in fewer instructions (small batches: the
// block's serial path is the kernel's time): 16-byte aligned rows, a
// power-of-two page size of at least 4 (or no real table) and columns that fit
// 32 bits. A thread holds one 16-byte vector of the unit, and a page's entry
// comes from the vector that holds its first token (page starts and vectors
// both lie at multiples of 4). Without page_table_1 a thread holds one page.
template <int M, class P>
__device__ void lean_page_block(const P& p, PageSmem& sm, uint32_t unit_tokens,
                                uint32_t block, FastDivU32 chunks) {
  const uint32_t r = chunks.div(block);
  const uint32_t begin = (block - r * chunks.divisor) * unit_tokens;
  const int64_t seq = p.seq_lens[r];
  const int64_t req = p.req_pool_indices[r];
  const int64_t ext = M == kDsaGenDraftExtend ? extend_len(p, r) : 0;
  int64_t row_begin, row_count;
  request_rows<M>(p, sm, r, ext, row_begin, row_count);
  const uint32_t len = static_cast<uint32_t>(live_len(p, cache_len<M>(p, to_i32(seq))));
  const bool tokens = p.page_table_1;
  const int shift = p.real_page_table ? p.page.shift : 0;
  const uint32_t offset = tokens ? 4u * threadIdx.x : threadIdx.x << shift;
  const uint32_t c = begin + offset;
  if (offset >= unit_tokens || c >= len || row_count <= 0) return;
  check_request(p, r, req);
  const int32_t* src = p.req_to_token + req * p.req_to_token_stride + c;
  const uint32_t nel = tokens ? min(len - c, 4u) : 1u;
  int32_t v[4];
  if (nel == 4) {
    const int4 x = __ldg(reinterpret_cast<const int4*>(src));
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
#pragma unroll
    for (uint32_t e = 0; e < 4; ++e)
      if (e < nel) v[e] = __ldg(src + e);
  }
  const bool has_page = p.real_page_table && (c & ((1u << shift) - 1)) == 0;
  const int32_t entry = v[0] >> shift;  // floor division, negative slots included
  const uint32_t q = c >> shift;
  for (int s = 0; s < p.sets(); ++s) {
    const DsaGenSet& d = p.set[s];
    int32_t* t1 = tokens ? d.page_table_1 + row_begin * d.page_table_1_stride + c : nullptr;
    int32_t* tr = has_page ? d.real_page_table + row_begin * d.real_page_table_stride + q : nullptr;
    for (int64_t row = 0; row < row_count; ++row) {
      if (tokens) {
        store_vec(t1, static_cast<int>(nel), true, v);
        t1 += d.page_table_1_stride;
      }
      if (has_page) {
        *tr = entry;
        tr += d.real_page_table_stride;
      }
    }
  }
}

// One instantiation per mode and page-block kind: each holds only its own
// code, which keeps a launch's instruction footprint (fetched by every block
// before it can issue) small; and per set-table capacity (params.h). The two
// scalars come before the params, beside the params' own scalars at the front
// of the parameter bank.
enum PageKind : int { kTiledPages, kDirectPages, kLeanPages };

template <int M, int kKind, int kSlots>
__global__ void __launch_bounds__(kThreads, kPageBlocksPerSm)
    fused_dsa_metadata_kernel(int64_t unit_tokens, FastDivU32 chunks, const __grid_constant__ DsaGenArgs<kSlots> p) {
  extern __shared__ __align__(16) unsigned char smem_bytes[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_bytes);
  constexpr unsigned kScan = kScanBlocks<M>;
  // The page blocks' path is the fall-through of the first branch, so that it
  // lies next to the kernel entry and the scan code after it: a page block's
  // first warp then fetches its instructions without a miss (at bs 1 the page
  // blocks' chain is the launch).
  if (blockIdx.x < kScan) {
    if (blockIdx.x == 0)
      scan_block<M>(p, smem.scan);
    else if (kScan == 2)
      row_block<M>(p, smem.scan);
  } else if (kKind == kLeanPages) {
    lean_page_block<M>(p, smem.page, static_cast<uint32_t>(unit_tokens), blockIdx.x - kScan, chunks);
  } else if (kKind == kDirectPages) {
    direct_page_block<M>(p, smem.page, unit_tokens, blockIdx.x - kScan, chunks);
  } else {
    page_block<M>(p, smem.page, unit_tokens, blockIdx.x - kScan, gridDim.x - kScan);
  }
}

// Shared memory is given at launch only to calls that touch it: the block-wide
// scans (more than 32 requests or, in TARGET_VERIFY, expanded rows), the tiled
// page blocks, and a direct or lean page block's reduction over the extend
// lengths before its request (DRAFT_EXTEND, per-request lengths, bs > 1). A
// launch without it leaves the SM's L1 / shared split as the kernels around it
// set it.
template <int M>
bool uses_smem(const DsaGenInputs& p, int kind) {
  if (kind == kTiledPages || p.bs > kWarpRows) return true;
  if (M == kDsaGenTargetVerify) return p.n > kWarpRows;
  if (M == kDsaGenDraftExtend) return !p.static_extend && p.bs > 1;
  return false;
}

template <int M, int kSlots>
void launch_with(const DsaGenArgs<kSlots>& p, int64_t page_blocks, int kind, int64_t unit_tokens,
                 int64_t chunks, cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(kScanBlocks<M> + page_blocks));
  const FastDivU32 div = FastDivU32::make(static_cast<uint32_t>(chunks > 0 ? chunks : 1));
  const size_t smem = uses_smem<M>(p, kind) ? sizeof(Smem) : 0;
  if (kind == kLeanPages)
    fused_dsa_metadata_kernel<M, kLeanPages, kSlots><<<grid, kThreads, smem, s>>>(unit_tokens, div, p);
  else if (kind == kDirectPages)
    fused_dsa_metadata_kernel<M, kDirectPages, kSlots><<<grid, kThreads, smem, s>>>(unit_tokens, div, p);
  else
    fused_dsa_metadata_kernel<M, kTiledPages, kSlots><<<grid, kThreads, smem, s>>>(unit_tokens, div, p);
}

template <int M>
void launch(const DsaGenParams& p, int64_t page_blocks, int kind, int64_t unit_tokens, int64_t chunks,
            cudaStream_t s) {
  if (p.num_sets > 1) {
    launch_with<M>(p, page_blocks, kind, unit_tokens, chunks, s);
    return;
  }
  DsaGenArgs<1> one;
  static_cast<DsaGenInputs&>(one) = p;
  one.set[0] = p.set[0];
  launch_with<M>(one, page_blocks, kind, unit_tokens, chunks, s);
}

int sm_count() { return current_device_sm_count(kFallbackSms); }

// The lean page block's unit (0: not applicable): one 16-byte vector per
// thread with page_table_1, else one page per thread.
int64_t lean_unit(const DsaGenInputs& p) {
  const int shift = p.page.shift;
  if (p.page_table_1) {
    if (!p.vec_load || !p.vec_store || (p.real_page_table && shift < 2)) return 0;
    return int64_t{kThreads} * 4;
  }
  return shift >= 0 && shift <= 20 ? int64_t{kThreads} << shift : 0;
}

}  // namespace

const char* fused_dsa_metadata_cuda(const DsaGenParams& p, void* stream) {
  if (p.num_sets == 0) return nullptr;
  // Without page_table_1 only every page_size-th token is read: a unit then
  // spans 1024 pages (4 per thread) instead of 2048 tokens.
  int64_t unit_tokens = p.page_table_1 ? kUnitTokens : kThreads * kPagesPerThread * p.page.page_size;
  int64_t page_blocks = 0, chunks = 0;
  int kind = kTiledPages;
  if (p.writes_pages() && p.bs > 0 && p.n > 0 && p.max_cols > 0) {
    const int64_t cap = static_cast<int64_t>(sm_count()) * kPageBlocksPerSm;
    const auto units = [&](int64_t tokens) { return p.bs * ((p.max_cols - 1) / tokens + 1); };
    const int64_t lean = lean_unit(p);
    if (lean > 0 && p.max_cols <= INT32_MAX - lean && units(lean) <= cap) {
      unit_tokens = lean;
      kind = kLeanPages;
    } else {
      // A few long requests: halve the unit (down to a quarter) while every
      // unit still gets a block, so that the copy spreads over more SMs.
      for (int k = 0; k < 2 && units(unit_tokens / 2) <= cap; ++k) unit_tokens /= 2;
      kind = units(unit_tokens) <= cap ? kDirectPages : kTiledPages;
    }
    chunks = (p.max_cols - 1) / unit_tokens + 1;
    page_blocks = kind == kTiledPages ? cap : p.bs * chunks;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (p.mode == kDsaGenDecode)
    launch<kDsaGenDecode>(p, page_blocks, kind, unit_tokens, chunks, s);
  else if (p.mode == kDsaGenTargetVerify)
    launch<kDsaGenTargetVerify>(p, page_blocks, kind, unit_tokens, chunks, s);
  else
    launch<kDsaGenDraftExtend>(p, page_blocks, kind, unit_tokens, chunks, s);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
