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

SGL_FAILURE_PATH void fail_request(const DsaGenParams& p, int64_t r, int64_t req) {
  // The named flag puts the argument in the assert text itself.
  const bool req_pool_indices_in_range = false;
  SGL_DEVICE_CHECK(req_pool_indices_in_range,
                   "fused_dsa_metadata: req_pool_indices[%lld] = %lld is outside "
                   "[0, req_to_token.size(0) = %lld)",
                   (long long)r, (long long)req, (long long)p.pool_size);
  __trap();
}

__device__ __forceinline__ void check_request(const DsaGenParams& p, int64_t r, int64_t req) {
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

SGL_FAILURE_PATH void fail_length(const DsaGenParams& p, int kind, int64_t i) {
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

__device__ __forceinline__ void check_length(const DsaGenParams& p, bool ok, int kind, int64_t i) {
  if (__builtin_expect(!ok, 0)) fail_length(p, kind, i);
}

// Draft-extend: the expanded rows of a request extending by `ext` (or of
// request r), whose rows start at `start`: the exclusive prefix of extend_len
// over the requests before it (<= n after capping).
__device__ __forceinline__ int64_t draft_rows_of(const DsaGenParams& p, int64_t ext, int64_t start) {
  return start >= p.n ? 0 : min_i64(ext, p.n - start);
}
__device__ __forceinline__ int64_t draft_rows(const DsaGenParams& p, int64_t r, int64_t start) {
  return r >= p.bs ? 0 : draft_rows_of(p, extend_len(p, r), start);
}

// ---- block 0 -----------------------------------------------------------------

__device__ void write_expanded(const DsaGenParams& p, int64_t e, int32_t len, int32_t dsa,
                               uint32_t cu) {
  for (int s = 0; s < p.num_sets; ++s) {
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
__device__ __forceinline__ void check_tile(const DsaGenParams& p, int64_t base) {
  const bool check_extend = M == kDsaGenDraftExtend && p.n > 0;
#pragma unroll
  for (int i = 0; i < kItems; ++i) {
    const int64_t r = base + threadIdx.x * kItems + i;
    if (r >= p.bs) break;
    if (p.writes_pages()) check_request(p, r, p.req_pool_indices[r]);
    if (check_extend && (!p.static_extend || r == 0)) {
      const int64_t e = p.extend_seq_lens[r];
      if (__builtin_expect(e < 0, 0)) fail_extend(r, e);
    }
  }
}

// Requests: cache_seqlens, cu_seqlens_k, paged_mqa_ctx_lens; DECODE also its
// expanded rows (one per request, the same lengths).
template <int M>
__device__ void scan_requests(const DsaGenParams& p, ScanSmem& sm) {
  uint32_t carry = 0, dsa_carry = 0;
  for (int64_t base = 0; base < p.bs; base += kTile) {
    int32_t c[kItems];
    uint32_t v[kItems], dv[kItems];
    bool fits[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      const int64_t seq = r < p.bs ? p.seq_lens[r] : 0;
      fits[i] = cache_len_fits<M>(p, seq);
      c[i] = cache_len<M>(p, to_i32(seq));
      v[i] = static_cast<uint32_t>(c[i]);
      dv[i] = static_cast<uint32_t>(min_i32(c[i], p.topk));
    }
    check_tile<M>(p, base);
    uint32_t total, dsa_total;
    ScanU32(sm.u32).InclusiveSum(v, v, total);
    if (M == kDsaGenDecode) {
      __syncthreads();
      ScanU32(sm.u32).InclusiveSum(dv, dv, dsa_total);
    }
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      if (r >= p.bs) break;
      check_length(p, fits[i], kSeqLen, r);
      check_length(p, running_sum_fits(carry + v[i]), kCuSeqlensK, r);
      if (M == kDsaGenDecode)
        check_length(p, running_sum_fits(dsa_carry + dv[i]), kDsaCuSeqlensK, r);
      for (int s = 0; s < p.num_sets; ++s) {
        const DsaGenSet& d = p.set[s];
        d.cache_seqlens[r] = c[i];
        d.cu_seqlens_k[r + 1] = static_cast<int32_t>(carry + v[i]);
        if (d.paged_mqa_ctx_lens) {
          int32_t* row = d.paged_mqa_ctx_lens + r * d.paged_mqa_ctx_lens_stride;
          for (int64_t j = 0; j < p.next_n; ++j) row[j] = c[i];
        }
      }
      if (M == kDsaGenDecode)
        write_expanded(p, r, c[i], min_i32(c[i], p.topk), dsa_carry + dv[i]);
    }
    carry += total;
    if (M == kDsaGenDecode) dsa_carry += dsa_total;
    __syncthreads();  // the scan storage is reused by the next tile
  }
}

// TARGET_VERIFY: expanded row e is draft token j = e % next_n of request
// e / next_n, length seq + j + 1 (not capped).
__device__ void scan_verify_rows(const DsaGenParams& p, ScanSmem& sm) {
  const uint32_t next_n = static_cast<uint32_t>(p.next_n);
  uint32_t carry = 0;
  for (int64_t base = 0; base < p.n; base += kTile) {
    int32_t len[kItems];
    uint32_t dv[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t e = base + threadIdx.x * kItems + i;
      len[i] = 0;
      if (e < p.n) {
        const uint32_t r = static_cast<uint32_t>(e) / next_n;
        const uint32_t j = static_cast<uint32_t>(e) - r * next_n;
        len[i] = add_i32(to_i32(p.seq_lens[r]), j + 1);
      }
      dv[i] = e < p.n ? static_cast<uint32_t>(min_i32(len[i], p.topk)) : 0u;
    }
    uint32_t total;
    ScanU32(sm.u32).InclusiveSum(dv, dv, total);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t e = base + threadIdx.x * kItems + i;
      if (e >= p.n) break;
      check_length(p, running_sum_fits(carry + dv[i]), kDsaCuSeqlensK, e);
      write_expanded(p, e, len[i], min_i32(len[i], p.topk), carry + dv[i]);
    }
    carry += total;
    __syncthreads();
  }
}

// DRAFT_EXTEND: request r covers rows [start_r, start_r + count_r); row j of it
// has length max(seq - ext + j + 1, 0). One thread walks a request's rows (a
// request extends by a few tokens). Rows past every request take request 0's
// length (upstream's scan default).
__device__ void scan_draft_rows(const DsaGenParams& p, ScanSmem& sm) {
  int64_t start_carry = 0;
  uint32_t dsa_carry = 0;
  for (int64_t base = 0; base < p.bs && start_carry < p.n; base += kTile) {
    int64_t ext[kItems];
    uint32_t dsa_sum[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      ext[i] = r < p.bs ? extend_len(p, r) : 0;
    }
    int64_t start_total;
    ScanI64(sm.i64).ExclusiveSum(ext, ext, start_total);  // ext[i] := tile-local start
    int32_t seq[kItems];
    int64_t count[kItems], raw_ext[kItems];
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t r = base + threadIdx.x * kItems + i;
      const int64_t start = start_carry + ext[i];
      count[i] = draft_rows(p, r, start);
      seq[i] = count[i] > 0 ? to_i32(p.seq_lens[r]) : 0;
      raw_ext[i] = count[i] > 0 ? p.extend_seq_lens[p.static_extend ? 0 : r] : 0;
      uint32_t sum = 0;
      for (int64_t j = 0; j < count[i]; ++j)
        sum += static_cast<uint32_t>(min_i32(draft_extend_len(seq[i], raw_ext[i], j), p.topk));
      dsa_sum[i] = sum;
    }
    uint32_t dsa_total;
    ScanU32(sm.u32).ExclusiveSum(dsa_sum, dsa_sum, dsa_total);
#pragma unroll
    for (int i = 0; i < kItems; ++i) {
      const int64_t start = start_carry + ext[i];
      uint32_t cu = dsa_carry + dsa_sum[i];
      for (int64_t j = 0; j < count[i]; ++j) {
        const int32_t len = draft_extend_len(seq[i], raw_ext[i], j);
        const int32_t dsa = min_i32(len, p.topk);
        cu += static_cast<uint32_t>(dsa);
        check_length(p, running_sum_fits(cu), kDsaCuSeqlensK, start + j);
        write_expanded(p, start + j, len, dsa, cu);
      }
    }
    start_carry = min_i64(start_carry + start_total, p.n);
    dsa_carry += dsa_total;
    __syncthreads();
  }
  const int32_t len = draft_extend_len(to_i32(p.seq_lens[0]), 1, 0);
  const int32_t dsa = min_i32(len, p.topk);
  for (int64_t e = start_carry + threadIdx.x; e < p.n; e += kThreads) {
    const uint32_t k = static_cast<uint32_t>(e - start_carry + 1);
    const uint32_t cu = dsa_carry + k * static_cast<uint32_t>(dsa);
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

template <int M>
__device__ void scan_block(const DsaGenParams& p, ScanSmem& sm) {
  if (threadIdx.x < p.num_sets) {
    p.set[threadIdx.x].cu_seqlens_k[0] = 0;
    if (M == kDsaGenDecode) p.set[threadIdx.x].dsa_cu_seqlens_k[0] = 0;
  }
  if (p.bs > 0) scan_requests<M>(p, sm);
}

template <int M>
__device__ void row_block(const DsaGenParams& p, ScanSmem& sm) {
  if (threadIdx.x < p.num_sets) p.set[threadIdx.x].dsa_cu_seqlens_k[0] = 0;
  if (p.bs == 0) return;
  if (M == kDsaGenTargetVerify) scan_verify_rows(p, sm);
  if (M == kDsaGenDraftExtend) scan_draft_rows(p, sm);
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
__device__ void copy_unit(const DsaGenParams& p, const int32_t* src, int64_t begin, int64_t end,
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
  for (int s = 0; s < p.num_sets; ++s) {
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

template <int M>
__device__ void page_block(const DsaGenParams& p, PageSmem& sm, int64_t unit_tokens,
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

// One page block per unit when every potential unit has a block of its own
// (bs * units-per-row <= the grid cap): block b is column unit b % chunks of
// request b / chunks, found without the tile scans. A block past its
// request's live prefix exits after one round of loads.
template <int M>
__device__ void direct_page_block(const DsaGenParams& p, PageSmem& sm, int64_t unit_tokens,
                                  int64_t block, int64_t chunks) {
  // 32-bit: the grid holds both (a 64-bit divide is a ~70-instruction call).
  const int64_t r = static_cast<uint32_t>(block) / static_cast<uint32_t>(chunks);
  const int64_t begin = (block - r * chunks) * unit_tokens;
  const int64_t seq = p.seq_lens[r];
  const int64_t req = p.req_pool_indices[r];
  // DRAFT_EXTEND: the request's own extend length with its other scalars.
  const int64_t ext = M == kDsaGenDraftExtend ? extend_len(p, r) : 0;
  int64_t row_begin = r, row_count = 1;
  if (M == kDsaGenTargetVerify) {
    row_begin = r * p.next_n, row_count = p.next_n;
  } else if (M == kDsaGenDraftExtend) {
    int64_t start = 0;  // rows of the requests before r: the scan block's prefix
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
  const int64_t len = live_len(p, cache_len<M>(p, to_i32(seq)));
  if (begin >= len || row_count <= 0) return;
  check_request(p, r, req);
  copy_unit(p, p.req_to_token + req * p.req_to_token_stride, begin, min_i64(begin + unit_tokens, len),
            row_begin, row_count);
}

// One instantiation per mode and page-block kind: each holds only its own
// code, which keeps a launch's instruction footprint (fetched by every block
// before it can issue) small. The two scalars come before the params, beside
// the params' own scalars at the front of the parameter bank.
template <int M, bool kDirect>
__global__ void __launch_bounds__(kThreads, kPageBlocksPerSm)
    fused_dsa_metadata_kernel(int64_t unit_tokens, int64_t chunks, const __grid_constant__ DsaGenParams p) {
  __shared__ Smem smem;
  constexpr unsigned kScan = kScanBlocks<M>;
  if (blockIdx.x == 0) {
    scan_block<M>(p, smem.scan);
  } else if (kScan == 2 && blockIdx.x == 1) {
    row_block<M>(p, smem.scan);
  } else if (kDirect) {
    direct_page_block<M>(p, smem.page, unit_tokens, blockIdx.x - kScan, chunks);
  } else {
    page_block<M>(p, smem.page, unit_tokens, blockIdx.x - kScan, gridDim.x - kScan);
  }
}

template <int M>
void launch(const DsaGenParams& p, int64_t page_blocks, bool direct, int64_t unit_tokens, int64_t chunks,
            cudaStream_t s) {
  const dim3 grid(static_cast<unsigned>(kScanBlocks<M> + page_blocks));
  if (direct)
    fused_dsa_metadata_kernel<M, true><<<grid, kThreads, 0, s>>>(unit_tokens, chunks, p);
  else
    fused_dsa_metadata_kernel<M, false><<<grid, kThreads, 0, s>>>(unit_tokens, chunks, p);
}

int sm_count() { return current_device_sm_count(kFallbackSms); }

}  // namespace

const char* fused_dsa_metadata_cuda(const DsaGenParams& p, void* stream) {
  if (p.num_sets == 0) return nullptr;
  // Without page_table_1 only every page_size-th token is read: a unit then
  // spans 1024 pages (4 per thread) instead of 2048 tokens.
  int64_t unit_tokens = p.page_table_1 ? kUnitTokens : kThreads * kPagesPerThread * p.page.page_size;
  int64_t page_blocks = 0, chunks = 0;
  bool direct = false;
  if (p.writes_pages() && p.bs > 0 && p.n > 0 && p.max_cols > 0) {
    const int64_t cap = static_cast<int64_t>(sm_count()) * kPageBlocksPerSm;
    const auto units = [&](int64_t tokens) { return p.bs * ((p.max_cols - 1) / tokens + 1); };
    // A few long requests: halve the unit (down to a quarter) while every unit
    // still gets a block, so that the copy spreads over more SMs.
    for (int k = 0; k < 2 && units(unit_tokens / 2) <= cap; ++k) unit_tokens /= 2;
    chunks = (p.max_cols - 1) / unit_tokens + 1;
    const int64_t max_units = p.bs * chunks;
    direct = max_units <= cap;
    page_blocks = direct ? max_units : cap;
  }
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  if (p.mode == kDsaGenDecode)
    launch<kDsaGenDecode>(p, page_blocks, direct, unit_tokens, chunks, s);
  else if (p.mode == kDsaGenTargetVerify)
    launch<kDsaGenTargetVerify>(p, page_blocks, direct, unit_tokens, chunks, s);
  else
    launch<kDsaGenDraftExtend>(p, page_blocks, direct, unit_tokens, chunks, s);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
