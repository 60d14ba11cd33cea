// update_trtllm_mha_graph_metadata(_multi): the CUDA kernels (no torch headers).
//
// One launch writes N <= kMaxSetsPerLaunch destination sets. Thread blocks by
// blockIdx.x:
//   [0]                       cache_seqlens, cu_seqlens_k, cu_seqlens_q (a scan)
//   [1, 1 + bs * chunks)      one (row, column chunk) of every set's page table
//                             (+ SWA table); each slot is gathered once and
//                             written to every set whose live prefix covers it
//   [.., + swa_out_blocks)    swa_out_cache_loc translate + zero padding
// skip_page_table (or nothing but seqlens to write) launches the scan alone,
// as its own smaller kernel: one block, one row per thread when bs <= 256.
//
// Where the time goes at small sizes (a few microseconds end to end), and what
// the code does about it:
// * dependent global loads: every DRAM round trip (~0.6 us) on the critical
//   path costs more than everything else. Each block issues all the loads it
//   can before using any (a row's request index, length and per-row offset
//   together; all gathered slots of a thread; then all second-level loads),
//   and the scan loads its whole tile before scanning (no load per loop trip).
// * the scan: in block 0 of the update, bs <= 256 is one warp-shuffle scan,
//   up to 8 consecutive rows per lane (no shared memory, no barrier); larger
//   batches scan kScanItems rows per thread, one barrier per 256-row tile. The
//   seqlens-only kernel puts one row on each of 256 threads instead (coalesced
//   loads and stores, one barrier: faster there, where the scan is all the work).
// * scattered gathers per SM: the L1 serves an uncoalesced warp load one
//   cache line (wavefront) per cycle, 32 of them for 32 page slots, so a
//   block that gathers a thousand slots spends ~1000 cycles on its SM just
//   issuing them. Chunks of kPagesPerBlock columns spread a long row over
//   many SMs.
// * integer division: row/chunk from blockIdx by a host-prepared multiply-
//   high divisor, slot / page_size in 32-bit (shift for powers of two), never
//   a 64-bit divide on the hot path.
// * assert code: the printf + assert of a failed check live out of line
//   (SGL_DEVICE_CHECK_COLD, SGL_FAILURE_PATH), the hot path keeps a compare
//   and a branch.
// * length checks (params.h): each running sum is checked by its sign as it
//   is written; the lengths themselves after the scan (check_lengths), so
//   that their 64-bit values never add to the scan's registers.
//
// Cost model at large sizes: each page-table element gathers one int32 from
// its own sector of req_to_token (page boundaries are page_size * 4 bytes
// apart), so the kernel is bound by sector reads; stores are coalesced.
#include <climits>

#include "common/cuda_utils.cuh"
#include "common/fast_div.h"
#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
// Page-table columns per thread of a page block: one gather per thread puts
// every gather of a block in flight at once (on the H200 one column per
// thread is faster than two at bs 256 x 2048 pages, level at bs 1).
constexpr int kPagesPerThread = 1;
constexpr int64_t kPagesPerBlock = int64_t{kThreads} * kPagesPerThread;
constexpr int kOutPerThread = 4;
constexpr int64_t kOutPerBlock = int64_t{kThreads} * kOutPerThread;
// Rows per thread of the scan: 256 rows (the usual largest CUDA-graph batch)
// in one pass; 4 rows per thread cost the page blocks registers (the scan
// shares their kernel) for batches that are rarely captured.
constexpr int kScanItems = 2;
constexpr int64_t kScanTile = int64_t{kThreads} * kScanItems;
// Batches up to kWarpScanRows rows (every usual CUDA-graph batch) scan in one
// warp, kWarpItems consecutive rows per lane at most.
constexpr int kWarpItems = 8;
constexpr int64_t kWarpScanRows = 32 * kWarpItems;

// What the scan reads and writes (the whole parameter block of the
// seqlens-only kernel: kept small, it is copied on every launch).
template <int N>
struct ScanArgs {
  IndexArray seq_lens;
  IndexArray seqlen_offsets;
  IndexArray qlens;
  int64_t bs;
  int32_t q_stride;
  int32_t q_mode;
  int32_t* cache_seqlens[N];
  int32_t* cu_seqlens_k[N];
  int32_t* cu_seqlens_q[N];
  int32_t seqlen_offset[N];
  bool multi;  // names the op in device messages
};

// What the page-table and swa_out blocks read besides the scan's inputs.
struct PageArgs {
  IndexArray req_pool_indices;
  const int32_t* req_to_token;
  int64_t req_to_token_stride;
  int64_t pool_size;
  IndexArray swa_mapping;
  int64_t swa_mapping_size;
  const int64_t* out_cache_loc;
  const int64_t* v2p;
  int64_t v2p_size;
  const int64_t* swa_v2p;
  int64_t swa_v2p_size;
  int64_t max_seq_pages;
  PageDivisor page;
  bool live_pages_only;
};

template <int N>
struct Args {
  // The page blocks' scalars first (a block finds its row from them before
  // its first load), together at the front of the parameter bank.
  FastDivU32 chunks;  // page-table blocks per row
  uint32_t page_blocks;  // bs * chunks
  int64_t out_read;  // out_cache_loc entries read: min(max swa_out_len, numel)
  ScanArgs<N> scan;
  PageArgs in;
  int32_t* page_table[N];
  int32_t* swa_page_table[N];  // all null or none
  int64_t* swa_out_cache_loc[N];
  int64_t page_table_stride[N];
  int64_t swa_page_table_stride[N];
  int64_t swa_out_len[N];
};

__device__ __forceinline__ const char* op_name(bool multi) {
  return multi ? "update_trtllm_mha_graph_metadata_multi" : "update_trtllm_mha_graph_metadata";
}

// Row i of every set: cache_seqlens = base + offset, cu_seqlens_k[i + 1] =
// (sum of bases to i) + (i + 1) * offset, all mod 2**32; `k_incl`, `q_incl`
// are inclusive prefix sums. Returns kSumBadK / kSumBadQ for the running sums
// written that do not fit int32 (running_sum_fits: the values are at hand,
// the check is a compare).
constexpr uint32_t kSumBadK = 1, kSumBadQ = 2;

template <int N>
__device__ __forceinline__ uint32_t write_scan_row(const ScanArgs<N>& a, int64_t i, uint32_t base,
                                                   uint32_t k_incl, uint32_t q_incl) {
  bool k_fits = true;
#pragma unroll
  for (int s = 0; s < N; ++s) {
    const uint32_t off = static_cast<uint32_t>(a.seqlen_offset[s]);
    const uint32_t cu_k = k_incl + static_cast<uint32_t>(i + 1) * off;
    k_fits &= running_sum_fits(cu_k);
    a.cache_seqlens[s][i] = static_cast<int32_t>(base + off);
    a.cu_seqlens_k[s][i + 1] = static_cast<int32_t>(cu_k);
    if (a.q_mode == kQModeCumsum) {
      a.cu_seqlens_q[s][i + 1] = static_cast<int32_t>(q_incl);
    } else if (a.q_mode == kQModeStrided) {
      a.cu_seqlens_q[s][i + 1] =
          static_cast<int32_t>(static_cast<uint32_t>(i + 1) * static_cast<uint32_t>(a.q_stride));
    }
  }
  const bool q_fits = a.q_mode != kQModeCumsum || running_sum_fits(q_incl);
  return (k_fits ? 0u : kSumBadK) | (q_fits ? 0u : kSumBadQ);
}

// The page blocks' row length before the set offsets (mod 2**32: the scan
// block checks the lengths, a hostile one only changes which in-bounds
// columns are written before its assert).
template <int N>
__device__ __forceinline__ uint32_t scan_base(const ScanArgs<N>& a, int64_t i) {
  uint64_t sum = static_cast<uint64_t>(a.seq_lens[i]);
  if (a.seqlen_offsets.present()) sum += static_cast<uint64_t>(a.seqlen_offsets[i]);
  return static_cast<uint32_t>(sum);
}

// The length checks of one row on the values the scan loaded (seq_lens[i],
// its per-row offset or 0, qlens[i] or 0 without CUMSUM): seq_lens and qlens
// lie in [0, 2**31 - 1] and so does every set's cache_seqlens. Sets `fits`
// and returns the row's base mod 2**32 (what the scan sums).
template <int N>
__device__ __forceinline__ uint32_t checked_base(const ScanArgs<N>& a, int64_t seq, int64_t off,
                                                 int64_t q, bool& fits) {
  const uint64_t base = static_cast<uint64_t>(seq) + static_cast<uint64_t>(off);
  fits = length_fits(seq) && length_fits(q);
#pragma unroll
  for (int s = 0; s < N; ++s) fits &= set_seqlen_fits(base, a.seqlen_offset[s]);
  return static_cast<uint32_t>(base);
}

// A failed length check of the scan (SGL_FAILURE_PATH): rows first + j for
// the set bits j of `row_bad` (checked_base failed), `k_bad` and `q_bad` (the
// cu_seqlens_k / cu_seqlens_q value written at that row passed int32).
// Reports the lowest such row, re-reading its lengths to name the argument.
template <int N>
SGL_FAILURE_PATH void fail_scan_rows(const ScanArgs<N>& a, int64_t first, uint32_t row_bad,
                                     uint32_t k_bad, uint32_t q_bad) {
  const char* op = op_name(a.multi);
  const int j = __ffs(row_bad | k_bad | q_bad) - 1;
  const int64_t i = first + j;
  if ((row_bad >> j) & 1u) {
    const int64_t seq = a.seq_lens[i];
    const bool seq_lens_in_int32_range = length_fits(seq);
    SGL_DEVICE_CHECK(seq_lens_in_int32_range,
                     "%s: seq_lens[%lld] = %lld is negative or does not fit int32 cache_seqlens",
                     op, (long long)i, (long long)seq);
    const int64_t q = a.q_mode == kQModeCumsum ? a.qlens[i] : 0;
    const bool qlens_in_int32_range = length_fits(q);
    SGL_DEVICE_CHECK(qlens_in_int32_range,
                     "%s: qlens[%lld] = %lld is negative or does not fit int32 cu_seqlens_q", op,
                     (long long)i, (long long)q);
    const int64_t off = a.seqlen_offsets.present() ? a.seqlen_offsets[i] : 0;
    const uint64_t base = static_cast<uint64_t>(seq) + static_cast<uint64_t>(off);
    for (int s = 0; s < N; ++s) {
      const bool cache_seqlens_in_int32_range = set_seqlen_fits(base, a.seqlen_offset[s]);
      SGL_DEVICE_CHECK(cache_seqlens_in_int32_range,
                       "%s: seq_lens[%lld] + seqlen_offsets[%lld] (%lld) + seqlen_offset (set %d: "
                       "%d) = %lld is negative or does not fit int32 cache_seqlens",
                       op, (long long)i, (long long)i, (long long)off, s, a.seqlen_offset[s],
                       (long long)(base + static_cast<uint64_t>(int64_t{a.seqlen_offset[s]})));
    }
  }
  const bool cu_seqlens_k_fits_int32 = !((k_bad >> j) & 1u);
  SGL_DEVICE_CHECK(cu_seqlens_k_fits_int32,
                   "%s: cache_seqlens[0..%lld] summed (cu_seqlens_k[%lld]) does not fit int32", op,
                   (long long)i, (long long)(i + 1));
  const bool cu_seqlens_q_fits_int32 = !((q_bad >> j) & 1u);
  SGL_DEVICE_CHECK(cu_seqlens_q_fits_int32,
                   "%s: qlens[0..%lld] summed (cu_seqlens_q[%lld]) does not fit int32", op,
                   (long long)i, (long long)(i + 1));
  __trap();
}

// One-row form (a thread that scans one row per pass).
template <int N>
__device__ __forceinline__ void check_scan_row(const ScanArgs<N>& a, int64_t i, bool row_fits,
                                               uint32_t sum_bad) {
  if (__builtin_expect(!row_fits || sum_bad != 0, 0))
    fail_scan_rows(a, i, row_fits ? 0u : 1u, sum_bad & kSumBadK, (sum_bad & kSumBadQ) >> 1);
}

template <int N>
__device__ __forceinline__ void write_scan_zeros(const ScanArgs<N>& a) {
  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < N; ++s) {
      a.cu_seqlens_k[s][0] = 0;
      if (a.q_mode != kQModeNone) a.cu_seqlens_q[s][0] = 0;
    }
  }
}

// bs <= 32 * kItems: one warp, shuffles only, no shared memory, no barrier.
// Lane l scans rows [l * R, l * R + R), R = ceil(bs / 32) <= kItems, with
// every load issued before the scan; one warp scan of the lane totals then
// gives each lane its offset. (A block-wide scan costs a barrier and shared
// memory round trips that the small batches of CUDA graphs do not need.)
// kItems = 1 (bs <= 32) keeps the smallest batches on the shortest code.
// Rows [first, first + kItems) of an index array into `v` (0 past `live`
// rows), every load issued before any is used; the dtype is resolved once for
// the whole run, not per row (per-row branches multiplied the code).
template <int kItems>
__device__ __forceinline__ void load_rows(const IndexArray& x, int64_t first, int live,
                                          uint32_t (&v)[kItems]) {
  if (x.is64) {
    const int64_t* p = static_cast<const int64_t*>(x.data) + first;
#pragma unroll
    for (int j = 0; j < kItems; ++j) v[j] = j < live ? static_cast<uint32_t>(p[j]) : 0u;
  } else {
    const int32_t* p = static_cast<const int32_t*>(x.data) + first;
#pragma unroll
    for (int j = 0; j < kItems; ++j) v[j] = j < live ? static_cast<uint32_t>(p[j]) : 0u;
  }
}

template <int N, int kItems>
__device__ __forceinline__ void scan_rows_warp(const ScanArgs<N>& a) {
  write_scan_zeros(a);
  if (threadIdx.x >= 32) return;
  const int per_lane = kItems == 1 ? 1 : static_cast<int>((a.bs + 31) / 32);
  const int64_t first = int64_t{threadIdx.x} * per_lane;
  const int live = static_cast<int>(min_i64(per_lane, max_i64(a.bs - first, 0)));
  uint32_t base[kItems], off[kItems], q[kItems];
  load_rows<kItems>(a.seq_lens, first, live, base);
  const bool offsets = a.seqlen_offsets.present();
  if (offsets) load_rows<kItems>(a.seqlen_offsets, first, live, off);
  const bool cumsum = a.q_mode == kQModeCumsum;
  if (cumsum) load_rows<kItems>(a.qlens, first, live, q);
  uint32_t k_run = 0, q_run = 0;
  uint32_t k_pre[kItems];
  uint32_t k_bad = 0, q_bad = 0;  // bit j: a running sum of row first + j passed int32
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    if (offsets) base[j] += off[j];  // mod 2**32, as scan_base
    k_run += base[j];
    k_pre[j] = k_run;
    if (cumsum) {
      q_run += q[j];
      q[j] = q_run;
    }
  }
  const uint32_t k_off = warp_inclusive_sum(k_run) - k_run;
  const uint32_t q_off = cumsum ? warp_inclusive_sum(q_run) - q_run : 0u;
  // Row i of every set (write_scan_row, one field at a time).
#pragma unroll
  for (int s = 0; s < N; ++s) {
    const uint32_t so = static_cast<uint32_t>(a.seqlen_offset[s]);
    int32_t* cache = a.cache_seqlens[s] + first;
    int32_t* cu_k = a.cu_seqlens_k[s] + first + 1;
#pragma unroll
    for (int j = 0; j < kItems; ++j) {
      if (j >= live) break;
      const uint32_t k = k_off + k_pre[j] + static_cast<uint32_t>(first + j + 1) * so;
      if (!running_sum_fits(k)) k_bad |= 1u << j;
      cache[j] = static_cast<int32_t>(base[j] + so);
      cu_k[j] = static_cast<int32_t>(k);
    }
    if (cumsum) {
      int32_t* cu_q = a.cu_seqlens_q[s] + first + 1;
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if (j >= live) break;
        if (!running_sum_fits(q_off + q[j])) q_bad |= 1u << j;
        cu_q[j] = static_cast<int32_t>(q_off + q[j]);
      }
    } else if (a.q_mode == kQModeStrided) {
      int32_t* cu_q = a.cu_seqlens_q[s] + first + 1;
      const uint32_t qs = static_cast<uint32_t>(a.q_stride);
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        if (j >= live) break;
        cu_q[j] = static_cast<int32_t>(static_cast<uint32_t>(first + j + 1) * qs);
      }
    }
  }
  if (__builtin_expect((k_bad | q_bad) != 0, 0)) fail_scan_rows(a, first, 0u, k_bad, q_bad);
}

template <int N>
__device__ void scan_rows_tiles(const ScanArgs<N>& a);

// The lengths' own checks (checked_base) on their 64-bit values, after a
// scan that loaded only their low words: read again (cache hits), one row per
// thread and trip. Inside the scans they would double the registers of its
// loads in flight, more than the page blocks that share the update's kernel
// use, and cost those blocks occupancy.
template <int N>
__device__ __forceinline__ void check_lengths(const ScanArgs<N>& a) {
  const bool offsets = a.seqlen_offsets.present();
  const bool cumsum = a.q_mode == kQModeCumsum;
#pragma unroll 1
  for (int64_t i = threadIdx.x; i < a.bs; i += blockDim.x) {
    bool fits;
    checked_base(a, a.seq_lens[i], offsets ? a.seqlen_offsets[i] : 0, cumsum ? a.qlens[i] : 0, fits);
    if (__builtin_expect(!fits, 0)) fail_scan_rows(a, i, 1u, 0u, 0u);
  }
}

template <int N>
__device__ void scan_rows(const ScanArgs<N>& a) {
  if (a.bs <= 32)
    scan_rows_warp<N, 1>(a);
  else if (a.bs <= kWarpScanRows)
    scan_rows_warp<N, kWarpItems>(a);
  else
    scan_rows_tiles(a);
  check_lengths(a);
}

// bs > kWarpScanRows: kScanItems consecutive rows per thread and tile.
template <int N>
__device__ void scan_rows_tiles(const ScanArgs<N>& a) {
  write_scan_zeros(a);
  const bool cumsum = a.q_mode == kQModeCumsum;

  // kScanItems consecutive rows per thread, every load of the tile issued
  // before the scan; one barrier per tile for the warp totals.
  __shared__ uint32_t warp_k[kWarps], warp_q[kWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint32_t k_carry = 0, q_carry = 0;
  for (int64_t tile = 0; tile < a.bs; tile += kScanTile) {
    const int64_t first = tile + int64_t{threadIdx.x} * kScanItems;
    uint32_t base[kScanItems], k_pre[kScanItems], q_pre[kScanItems];
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t i = first + j;
      base[j] = i < a.bs ? scan_base(a, i) : 0u;
      q_pre[j] = i < a.bs && cumsum ? static_cast<uint32_t>(a.qlens[i]) : 0u;
    }
    uint32_t k_run = 0, q_run = 0;
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      k_run += base[j];
      k_pre[j] = k_run;
      q_run += q_pre[j];
      q_pre[j] = q_run;
    }
    const uint32_t k_warp = warp_inclusive_sum(k_run);
    const uint32_t q_warp = cumsum ? warp_inclusive_sum(q_run) : 0u;
    if (lane == 31) {
      warp_k[warp] = k_warp;
      warp_q[warp] = q_warp;
    }
    __syncthreads();
    uint32_t k_off = k_carry + k_warp - k_run, q_off = q_carry + q_warp - q_run;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      if (w < warp) {
        k_off += warp_k[w];
        q_off += warp_q[w];
      }
      k_carry += warp_k[w];
      q_carry += warp_q[w];
    }
#pragma unroll
    for (int j = 0; j < kScanItems; ++j) {
      const int64_t i = first + j;
      if (i < a.bs)
        check_scan_row(a, i, true, write_scan_row(a, i, base[j], k_off + k_pre[j], q_off + q_pre[j]));
    }
    __syncthreads();  // warp_k / warp_q are rewritten by the next tile
  }
}

// kPlain: no SWA table, no v2p, no swa_out_cache_loc (a static pool without a
// sliding window, the common decode graph): those paths are compiled out, so
// a block runs (and fetches) a short straight-line path. With cold caches the
// instruction fetch of a longer path costs DRAM round trips of its own.
template <int N, bool kPlain>
__device__ void page_block(const Args<N>& a, uint32_t row, uint32_t chunk) {
  const PageArgs& in = a.in;
  // Every row scalar is loaded before any is used: one memory latency.
  const int64_t req = in.req_pool_indices[row];
  const uint32_t base = scan_base(a.scan, row);
  SGL_DEVICE_CHECK_COLD(req >= 0 && req < in.pool_size,
                        "%s: req_pool_indices[%u] = %lld is outside [0, req_to_token.size(0) "
                        "= %lld)",
                        op_name(a.scan.multi), row, (long long)req, (long long)in.pool_size);
  int64_t cols[N];
  int64_t cols_max = 0;
#pragma unroll
  for (int s = 0; s < N; ++s) {
    cols[s] = columns_to_write(in, set_seqlen(base, a.scan.seqlen_offset[s]));
    cols_max = max_i64(cols_max, cols[s]);
  }
  const int64_t first = int64_t{chunk} * kPagesPerBlock;
  if (first >= cols_max) return;

  const int64_t c0 = first + threadIdx.x;
  const int32_t* row_in = in.req_to_token + req * in.req_to_token_stride;
  const int64_t step = in.page.page_size;
  int32_t slot[kPagesPerThread];
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    // Evict-first: each slot is read once; the v2p entries (4 to a sector)
    // that a unified-pool update reads next are what L2 should keep.
    slot[k] = c < cols_max ? load_once(row_in + c * step) : 0;
  }

  // Second-level loads of both tables (v2p, swa_v2p, the SWA mapping), all
  // issued before any store.
  const bool swa = !kPlain && a.swa_page_table[0] != nullptr;
  const bool translate = !kPlain && in.v2p != nullptr;
  int64_t full[kPagesPerThread], swa_val[kPagesPerThread];
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    const bool live = c < cols_max;
    const int64_t vpage = virtual_page(in, slot[k]);
    if (translate) {
      SGL_DEVICE_CHECK_COLD(!live || vpage < in.v2p_size,
                            "%s: virtual page %lld (req_to_token slot %d // page_size, row %u, "
                            "page %lld) is outside v2p [0, %lld)",
                            op_name(a.scan.multi), (long long)vpage, slot[k], row, (long long)c,
                            (long long)in.v2p_size);
      full[k] = live ? load_ro(in.v2p + vpage) : 0;
    } else {
      full[k] = in.page.div32(slot[k]);
    }
    swa_val[k] = -1;
    if (!swa || !live) continue;
    if (in.swa_v2p != nullptr) {
      SGL_DEVICE_CHECK_COLD(vpage < in.swa_v2p_size,
                            "%s: virtual page %lld (req_to_token slot %d // page_size, row %u, "
                            "page %lld) is outside swa_v2p [0, %lld)",
                            op_name(a.scan.multi), (long long)vpage, slot[k], row, (long long)c,
                            (long long)in.swa_v2p_size);
      swa_val[k] = load_ro(in.swa_v2p + vpage);
    } else if (slot[k] >= 0) {
      // -1 sentinels for negative slots and for slots the SWA pool lacks.
      SGL_DEVICE_CHECK_COLD(slot[k] < in.swa_mapping_size,
                            "%s: req_to_token slot %d (row %u, page %lld) is outside "
                            "swa_mapping [0, %lld)",
                            op_name(a.scan.multi), slot[k], row, (long long)c,
                            (long long)in.swa_mapping_size);
      swa_val[k] = in.swa_mapping.ldg(slot[k]);
    }
  }
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    if (translate) full[k] = max_i64(full[k], 0);
    if (!swa) continue;
    if (in.swa_v2p != nullptr) {
      swa_val[k] = max_i64(swa_val[k], 0);
    } else if (swa_val[k] >= 0) {
      swa_val[k] = in.page.div(swa_val[k]);
    } else {
      swa_val[k] = -1;
    }
  }

#pragma unroll
  for (int s = 0; s < N; ++s) {
    int32_t* out = a.page_table[s] + row * a.page_table_stride[s];
    int32_t* swa_out = swa ? a.swa_page_table[s] + row * a.swa_page_table_stride[s] : nullptr;
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) {
      const int64_t c = c0 + k * kThreads;
      if (c >= cols[s]) continue;
      out[c] = static_cast<int32_t>(full[k]);
      if (swa) swa_out[c] = static_cast<int32_t>(swa_val[k]);
    }
  }
}

template <int N>
__device__ void swa_out_block(const Args<N>& a, int64_t block) {
  const PageArgs& in = a.in;
  const int64_t first = block * kOutPerBlock + threadIdx.x;
  int64_t loc[kOutPerThread];
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int64_t i = first + k * kThreads;
    loc[k] = i < a.out_read ? in.out_cache_loc[i] : 0;
  }
  int64_t v[kOutPerThread];
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int64_t i = first + k * kThreads;
    v[k] = 0;  // the padded tail
    if (i >= a.out_read) continue;
    if (loc[k] < 0) {
      v[k] = -1;
      continue;
    }
    SGL_DEVICE_CHECK_COLD(loc[k] < in.swa_mapping_size,
                          "%s: out_cache_loc[%lld] = %lld is outside swa_mapping [0, %lld)",
                          op_name(a.scan.multi), (long long)i, (long long)loc[k],
                          (long long)in.swa_mapping_size);
    v[k] = in.swa_mapping.ldg(loc[k]);
  }
#pragma unroll
  for (int s = 0; s < N; ++s) {
    if (a.swa_out_cache_loc[s] == nullptr) continue;
#pragma unroll
    for (int k = 0; k < kOutPerThread; ++k) {
      const int64_t i = first + k * kThreads;
      if (i < a.swa_out_len[s]) a.swa_out_cache_loc[s][i] = v[k];
    }
  }
}

// At least 8 blocks per SM (<= 64 registers): the page blocks are bound by
// gathers in flight, which occupancy provides.
template <int N, bool kPlain>
__global__ void __launch_bounds__(kThreads, 8)
    metadata_kernel(const __grid_constant__ Args<N> a) {
  const uint32_t b = blockIdx.x;
  if (b == 0) {
    scan_rows(a.scan);
    return;
  }
  if (b - 1 < a.page_blocks) {
    const uint32_t row = a.chunks.div(b - 1);
    page_block<N, kPlain>(a, row, b - 1 - row * a.chunks.divisor);
  } else if (!kPlain) {
    swa_out_block(a, int64_t{b} - 1 - a.page_blocks);
  }
}

// Seqlen metadata only (skip_page_table / no table): kernels of their own
// rather than a branch of the page-table kernel, so a small batch runs a short
// straight-line kernel whose code is fetched from its start.
template <int N>
__global__ void __launch_bounds__(kThreads) seqlens_kernel(const __grid_constant__ ScanArgs<N> a) {
  scan_rows_tiles(a);
  check_lengths(a);
}

// bs <= kRowScanRows: one row per thread. Every load and store of a warp
// covers consecutive elements (the one-warp scan's lane-contiguous rows made
// each of its 8-row loads and stores touch 32 sectors), one warp-shuffle scan
// per warp, the warp totals through shared memory, one barrier. Where the
// scan is all the work this layout beats the one-warp scan: its launch costs
// little more than a one-element fill kernel's.
constexpr int kRowScanRows = 256;
constexpr int kRowScanWarps = kRowScanRows / 32;

template <int N>
__global__ void __launch_bounds__(kRowScanRows)
    seqlens_rows_kernel(const __grid_constant__ ScanArgs<N> a) {
  __shared__ uint32_t warp_k[kRowScanWarps], warp_q[kRowScanWarps];
  const int i = threadIdx.x, warp = i / 32, lane = i % 32;
  const bool live = i < a.bs;
  const bool cumsum = a.q_mode == kQModeCumsum;
  // Every load issued before any is used.
  const int64_t seq = live ? a.seq_lens[i] : 0;
  const int64_t off = live && a.seqlen_offsets.present() ? a.seqlen_offsets[i] : 0;
  const int64_t q64 = live && cumsum ? a.qlens[i] : 0;
  bool fits;
  const uint32_t base = checked_base(a, seq, off, q64, fits);
  const uint32_t q = static_cast<uint32_t>(q64);
  const uint32_t k_incl = warp_inclusive_sum(base);
  const uint32_t q_incl = cumsum ? warp_inclusive_sum(q) : 0u;
  if (lane == 31) {
    warp_k[warp] = k_incl;
    warp_q[warp] = q_incl;
  }
  write_scan_zeros(a);
  __syncthreads();
  uint32_t k_off = 0, q_off = 0;
#pragma unroll
  for (int w = 0; w < kRowScanWarps; ++w) {
    if (w < warp) {
      k_off += warp_k[w];
      q_off += warp_q[w];
    }
  }
  if (live) check_scan_row(a, i, fits, write_scan_row(a, i, base, k_off + k_incl, q_off + q_incl));
}

template <int N>
const char* launch(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets, bool multi,
                   cudaStream_t stream) {
  Args<N> a{};
  a.scan.seq_lens = in.seq_lens;
  a.scan.seqlen_offsets = in.seqlen_offsets;
  a.scan.qlens = in.qlens;
  a.scan.bs = in.bs;
  a.scan.q_stride = in.q_stride;
  a.scan.q_mode = in.q_mode;
  int64_t out_len_max = 0;
  for (int s = 0; s < N; ++s) {
    const TrtllmMhaDest& d = sets[s];
    a.scan.cache_seqlens[s] = d.cache_seqlens;
    a.scan.cu_seqlens_k[s] = d.cu_seqlens_k;
    a.scan.cu_seqlens_q[s] = d.cu_seqlens_q;
    a.scan.seqlen_offset[s] = d.seqlen_offset;
    a.page_table[s] = d.page_table;
    a.page_table_stride[s] = d.page_table_stride;
    a.swa_page_table[s] = d.swa_page_table;
    a.swa_page_table_stride[s] = d.swa_page_table_stride;
    a.swa_out_cache_loc[s] = d.swa_out_cache_loc;
    a.swa_out_len[s] = d.swa_out_cache_loc ? d.swa_out_len : 0;
    out_len_max = max_i64(out_len_max, a.swa_out_len[s]);
  }
  const int64_t chunks = in.skip_page_table || in.max_seq_pages == 0
                             ? 0
                             : (in.max_seq_pages + kPagesPerBlock - 1) / kPagesPerBlock;
  if (in.skip_page_table) out_len_max = 0;
  const int64_t out_blocks = (out_len_max + kOutPerBlock - 1) / kOutPerBlock;
  if (chunks == 0 && out_blocks == 0) {
    // Seqlen metadata only: the scan alone, one row per thread when it fits.
    if (in.bs <= kRowScanRows)
      seqlens_rows_kernel<N><<<1, kRowScanRows, 0, stream>>>(a.scan);
    else
      seqlens_kernel<N><<<1, kThreads, 0, stream>>>(a.scan);
    return nullptr;
  }
  if (chunks > 0 && in.bs > (INT32_MAX - 1) / chunks)
    return "grid too large (bs * max_seq_pages out of range)";
  const int64_t page_blocks = in.bs * chunks;
  if (out_blocks > INT32_MAX - 1 - page_blocks)
    return "grid too large (swa_out_cache_loc too long)";
  a.in.req_pool_indices = in.req_pool_indices;
  a.in.req_to_token = in.req_to_token;
  a.in.req_to_token_stride = in.req_to_token_stride;
  a.in.pool_size = in.pool_size;
  a.in.swa_mapping = in.swa_mapping;
  a.in.swa_mapping_size = in.swa_mapping_size;
  a.in.out_cache_loc = in.out_cache_loc;
  a.in.v2p = in.v2p;
  a.in.v2p_size = in.v2p_size;
  a.in.swa_v2p = in.swa_v2p;
  a.in.swa_v2p_size = in.swa_v2p_size;
  a.in.max_seq_pages = in.max_seq_pages;
  a.in.page = in.page;
  a.in.live_pages_only = in.live_pages_only;
  a.out_read = min_i64(out_len_max, in.out_cache_loc != nullptr ? in.out_cache_loc_size : 0);
  a.chunks = FastDivU32::make(static_cast<uint32_t>(chunks > 0 ? chunks : 1));
  a.page_blocks = static_cast<uint32_t>(page_blocks);
  a.scan.multi = multi;
  const unsigned grid = static_cast<unsigned>(1 + page_blocks + out_blocks);
  const bool plain = a.swa_page_table[0] == nullptr && in.v2p == nullptr && out_blocks == 0;
  if (plain)
    metadata_kernel<N, true><<<grid, kThreads, 0, stream>>>(a);
  else
    metadata_kernel<N, false><<<grid, kThreads, 0, stream>>>(a);
  return nullptr;
}

}  // namespace

const char* update_trtllm_mha_metadata_cuda(const TrtllmMhaInputs& in,
                                            const TrtllmMhaDest* sets, int num_sets,
                                            void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const bool multi = in.multi;
  for (int first = 0; first < num_sets; first += kMaxSetsPerLaunch) {
    const int n = num_sets - first < kMaxSetsPerLaunch ? num_sets - first : kMaxSetsPerLaunch;
    const TrtllmMhaDest* part = sets + first;
    const char* err = n == 1   ? launch<1>(in, part, multi, stream)
                      : n == 2 ? launch<2>(in, part, multi, stream)
                      : n == 3 ? launch<3>(in, part, multi, stream)
                               : launch<4>(in, part, multi, stream);
    if (err != nullptr) return err;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cudaGetErrorString(e);
  }
  return nullptr;
}

}  // namespace sgl_meta
