// kv_read_page_table / kv_read_token_stream: the CUDA kernels (no torch headers).
//
// Both grids are sized from host-known shapes only (bs and a static cap: the
// table width, or the req_to_token row), never from device lengths: nothing is
// synchronised and a CUDA graph replays them with any new lengths. A block
// reads its row's scalars and its threads (page table) or warps (token stream)
// leave when their share of the row lies past the row's live length, so short
// rows cost little however wide the cap; the grid stops growing at one wave of
// resident blocks.
//
// Cost model. Every page costs one scattered int32 read of req_to_token (its
// first slot; page boundaries are page_size * 4 bytes apart) and, with v2p,
// one more scattered int64 read that depends on the first: two DRAM latencies
// in a chain, each a separate 64-byte DRAM access. The kernels are bound by
// how many such chains are in flight, so every thread (page table) or lane
// (token stream) issues all its first-level loads, then all its second-level
// loads, before it uses any of them. The first-level loads are evict-first
// (load_once): each req_to_token sector is read once, while a v2p sector (4
// entries) is read by several pages, so v2p is what L2 should keep.
//
// Page table: 256-thread blocks, one column per thread and block step (see
// kColsPerThread), so a warp's stores cover 32 consecutive columns; a 2-D
// grid (row = blockIdx.x, share = blockIdx.y) so no block divides its index.
//
// Block order (both forms): the row is the fastest-varying part of the block
// index. The first wave hands SM j the blocks j, j + #SMs, j + 2 #SMs, ...;
// with the share fastest and #SMs a multiple of the shares per row, every
// block of an SM would get the same share, and the SMs holding share 0 (live
// in every row) would do most of the gathering while the others idle. Row
// fastest spreads each share over all SMs. (The TRT-LLM update and page-table
// builder keep the share fastest: their full-width rows favour it.)
// Token stream: one warp per chunk of 32 pages: lane j gathers and translates
// page j of the chunk, then the warp writes the chunk's ids (page_size per
// page, contiguous in out) with 16-byte vector stores, each id taking its
// page's entry from the owning lane by a shuffle.
#include <climits>
#include <type_traits>

#include "common/cuda_utils.cuh"
#include "common/sm_count.h"
#include "kv_read_table/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;  // token stream
// Page table: 256-thread blocks of one column per thread. 256 threads halve
// the blocks of short rows against 128, each of which pays the row's scalar
// loads and checks before it finds nothing to do (at short rows under a wide
// table the instruction issue of those blocks, not DRAM, sets the time); one
// column per thread puts every gather in flight at once: the more threads
// hold one gather each, the sooner all are in flight.
constexpr int kPageThreads = 256;
constexpr int kColsPerThread = 1;
constexpr int64_t kColsPerBlock = kPageThreads * kColsPerThread;
// Grid x = the row (up to 2^31 - 1 rows), y = a block's share of its row.
constexpr int64_t kMaxGridRows = INT32_MAX;
// Page table: columns are 32-bit. A block step covers kColsPerBlock columns,
// so with at most kMaxShares blocks a row one loop trip advances at most
// kMaxShares * kColsPerBlock (<= 2^20) columns, and every column index the
// loop forms stays below 2^31 (the documented limit is 2^31 - 1 - 2^20).
constexpr int64_t kMaxShares = 2048;
constexpr int64_t kMaxTrip = int64_t{1} << 20;
static_assert(kMaxShares * kColsPerBlock <= kMaxTrip, "one loop trip must stay below 2^20 columns");
constexpr int64_t kMaxColumns = INT32_MAX - kMaxTrip;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kPagesPerChunk = 32;  // token stream: one page per lane
// The grid stops growing at one wave of resident blocks (SMs x blocks per
// SM, the latter fixed by __launch_bounds__: at most 32 registers a thread);
// past it a block loops over several steps of its row. The grid is sized from
// the static width, so at short rows most blocks are launched only to leave:
// one wave bounds them, while one wave of gathers already keeps DRAM busy
// (SGLang's Triton kernel caps its grid at 1024 programs for the same reason).
constexpr int kPageBlocksPerSm = 2048 / kPageThreads;
constexpr int kStreamBlocksPerSm = 2048 / kThreads;  // the 32-bit (kSmall) kernels
constexpr unsigned kFullMask = 0xffffffffu;
// Token stream: a chunk of 32 pages spans 32 * page_size positions; up to this
// page size they (plus a vector's overhang) fit int32.
constexpr int64_t kSmallPage = (INT32_MAX - 1024) / kPagesPerChunk;

#define PAGE_OP "kv_read_page_table"
#define STREAM_OP "kv_read_token_stream"

// Failure paths, out of line and each followed by a return: a call that the
// hot code survives would keep every value live across it (callee-saved
// registers, stack) and cost the common path occupancy; one after which the
// thread only returns keeps nothing. They run only once a check has failed
// (the named flags are false), print the value and trip the assert.
template <bool kStream>
__device__ __noinline__ void fail_row(const KvReadSource& s, uint32_t row, int64_t req,
                                      int64_t start, int64_t seq) {
  const bool req_pool_indices_in_range = req >= 0 && req < s.pool_size;
  const bool kv_start_idx_non_negative = start >= 0;
  if (kStream) {
    SGL_DEVICE_CHECK(req_pool_indices_in_range,
                     STREAM_OP ": req_pool_indices[%u] = %lld is outside [0, "
                               "req_to_token.size(0) = %lld)",
                     row, (long long)req, (long long)s.pool_size);
    SGL_DEVICE_CHECK(kv_start_idx_non_negative, STREAM_OP ": kv_start_idx[%u] = %lld is negative",
                     row, (long long)start);
  } else {
    SGL_DEVICE_CHECK(req_pool_indices_in_range,
                     PAGE_OP ": req_pool_indices[%u] = %lld is outside [0, "
                             "req_to_token.size(0) = %lld)",
                     row, (long long)req, (long long)s.pool_size);
    SGL_DEVICE_CHECK(kv_start_idx_non_negative, PAGE_OP ": kv_start_idx[%u] = %lld is negative",
                     row, (long long)start);
  }
  const char* op = kStream ? STREAM_OP : PAGE_OP;
  const bool seq_lens_in_int32_range = length_fits(seq);
  SGL_DEVICE_CHECK(seq_lens_in_int32_range, "%s: seq_lens[%u] = %lld is negative or does not fit int32",
                   op, row, (long long)seq);
  const int64_t len = window_len(s, seq);
  const bool window_length_in_int32_range = length_fits(len);
  SGL_DEVICE_CHECK(window_length_in_int32_range,
                   "%s: seq_lens[%u] + seq_len_delta = %lld is negative or does not fit int32", op, row,
                   (long long)len);
}

template <bool kStream>
__device__ __noinline__ void fail_v2p(const KvReadSource& s, int64_t req, int64_t col,
                                      int32_t slot, int64_t vpage, uint32_t row) {
  const bool virtual_page_inside_v2p = vpage < s.v2p_size;
  if (kStream) {
    SGL_DEVICE_CHECK(virtual_page_inside_v2p,
                     STREAM_OP ": req_to_token[%lld, %lld] = %d (row %u) reads virtual page "
                               "%lld, outside v2p (v2p.numel() = %lld)",
                     (long long)req, (long long)col, slot, row, (long long)vpage,
                     (long long)s.v2p_size);
  } else {
    SGL_DEVICE_CHECK(virtual_page_inside_v2p,
                     PAGE_OP ": req_to_token[%lld, %lld] = %d (row %u) reads virtual page "
                             "%lld, outside v2p (v2p.numel() = %lld)",
                     (long long)req, (long long)col, slot, row, (long long)vpage,
                     (long long)s.v2p_size);
  }
}

// ---- page table ---------------------------------------------------------------

// Column `c` of row `row` failed a check: find out which and report it.
__device__ __noinline__ void fail_page_column(const KvReadPageTableParams& p, uint32_t row,
                                              int64_t req, int64_t start, int64_t c) {
  const KvReadSource& s = p.src;
  const int64_t col = start + c * s.page_size;
  const int32_t slot = s.req_to_token[req * s.req_to_token_stride + col];
  const int64_t vpage = virtual_page(s, slot);
  if (vpage >= s.v2p_size) {
    fail_v2p<false>(s, req, col, slot, vpage, row);
    return;
  }
  const int64_t entry = max_i64(s.v2p[vpage], 0);
  const bool v2p_entry_fits_int32_out = entry <= INT32_MAX;
  SGL_DEVICE_CHECK(v2p_entry_fits_int32_out,
                   PAGE_OP ": v2p[%lld] = %lld does not fit the int32 out (row %u, column %lld)",
                   (long long)vpage, (long long)entry, row, (long long)c);
}

// One thread's columns c, c + 256, ... (kColsPerThread of them) of a block
// step: `src` points at column c's first slot in req_to_token (the next
// column's is `col_step` slots on), `dst` at out[c]. Columns below `n` get
// their entry, the rest below `limit` (zero_tail) the sink 0. Returns k of the
// first column that failed a check (its virtual page outside v2p: never
// loaded; or an entry past int32), else -1. Columns are 32-bit (the launcher
// caps them) and the pointers advance by increments: 64-bit column math at
// the 32-register cap makes the loop re-read its parameters and recompute the
// row's addresses on every trip.
// kShift: a power-of-two page of at most 2^30 (the slot's page is a shift).
template <bool kShift>
__device__ __forceinline__ int page_step(const KvReadSource& s, const int32_t* src,
                                         int64_t col_step, int32_t* dst, int32_t c, int32_t n,
                                         int32_t limit) {
  int32_t slot[kColsPerThread];
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k)
    slot[k] = c + k * kPageThreads < n ? load_once(src + k * col_step) : 0;
  // A column past n reads slot 0, page 0, and keeps entry 0: the zero_tail sink.
  int64_t entry[kColsPerThread];
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k)
    entry[k] = kShift ? (slot[k] < 0 ? 0 : slot[k] >> s.div.page.shift) : virtual_page(s, slot[k]);
  if (s.translate) {
    // Second-level gather, issued for all columns before any is used; the
    // checks fold into one flag, and only a failure looks for its column.
    bool inside[kColsPerThread];
    bool ok = true;
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) {
      const bool live = c + k * kPageThreads < n;
      inside[k] = entry[k] < s.v2p_size;
      ok &= !live || inside[k];
      entry[k] = live && inside[k] ? max_i64(load_ro(s.v2p + entry[k]), 0) : 0;
    }
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) ok &= entry[k] <= INT32_MAX;
    if (!ok) {
#pragma unroll
      for (int k = 0; k < kColsPerThread; ++k)
        if (c + k * kPageThreads < n && (!inside[k] || entry[k] > INT32_MAX)) return k;
    }
  }
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k)
    if (c + k * kPageThreads < limit) dst[k * kPageThreads] = static_cast<int32_t>(entry[k]);
  return -1;
}

// One row's share [first_step, ...) of block steps. kFast: no kv_start_idx
// and a power-of-two page of at most 2^30 in rows shorter than 2^31 (the
// launcher picks it, and the dtypes kReq64 / kSeq64 of req_pool_indices and
// seq_lens); the general path is then compiled out of the kernel, not
// branched around: the fast kernel's short path (typed loads, the live-column
// math below) is what keeps short rows near the bare gather's cost.
template <bool kFast, bool kReq64, bool kSeq64>
__device__ __forceinline__ void page_row(const KvReadPageTableParams& p, uint32_t row,
                                         uint32_t first_step, uint32_t steps) {
  const KvReadSource& s = p.src;
  // Every thread loads the row's scalars (one broadcast load per warp, all
  // issued before any is used: one latency) and derives the live columns:
  // no barrier or shared-memory round trip stands before the gathers.
  // (The fast kernels know the dtypes: one plain load each, where the
  // run-time dtype costs two predicated loads and their addresses.)
  const int64_t req = kFast ? s.req_pool_indices.at<kReq64>(row) : s.req_pool_indices[row];
  const int64_t seq = kFast ? s.seq_lens.at<kSeq64>(row) : s.seq_lens[row];
  const int64_t start = !kFast && s.kv_start_idx.present() ? s.kv_start_idx[row] : 0;
  int64_t n;
  if (kFast) {
    // live_columns in a few instructions where the general path (a window,
    // any page size) takes several times as many, in a chain that every
    // thread runs before it can leave: at short rows under a wide table most
    // threads only run this prologue and leave, so its length, not DRAM, sets
    // the time. (The checks cost nothing measurable next to it.)
    // seq + delta is formed only where it lies in (0, row_len) (|delta| <
    // 2^31, row_len < 2^31: no overflow for any int64 seq); past the row, the
    // row caps the tokens.
    const int64_t delta = s.seq_len_delta;
    const int32_t tokens = static_cast<int32_t>(seq < s.row_len - delta ? seq + delta : s.row_len);
    const auto cap = static_cast<int32_t>(min_i64(p.max_pages, INT32_MAX));
    n = seq <= -delta ? 0 : min(((tokens - 1) >> s.div.page.shift) + 1, cap);
  } else {
    n = live_columns(p, seq, start);
  }
  if (req < 0 || req >= s.pool_size || (!kFast && start < 0) || !window_fits(s, seq)) {
    // every block checks its row, whatever the lengths (as on the CPU)
    if (threadIdx.x == 0) fail_row<false>(s, row, req, start, seq);
    return;
  }
  // Both fit int32: n <= limit <= the launch's columns <= kMaxColumns.
  const auto n32 = static_cast<int32_t>(n);
  const auto limit = static_cast<int32_t>(p.zero_tail ? p.max_pages : n);
  int32_t c = static_cast<int32_t>(first_step * kColsPerBlock + threadIdx.x);
  if (c >= limit) return;  // nothing of this row for this thread
  const int64_t step = s.page_size;
  const int32_t trip = static_cast<int32_t>(steps * kColsPerBlock);
  const int32_t* src = s.req_to_token + req * s.req_to_token_stride + start + c * step;
  int32_t* dst = p.out + row * p.out_stride + c;
  for (; c < limit; c += trip, src += trip * step, dst += trip) {
    const int bad = page_step<kFast>(s, src, kPageThreads * step, dst, c, n32, limit);
    if (bad >= 0) {
      fail_page_column(p, row, req, start, c + int64_t{bad} * kPageThreads);
      return;
    }
  }
}

template <bool kFast, bool kReq64 = false, bool kSeq64 = false>
__global__ void __launch_bounds__(kPageThreads, kPageBlocksPerSm)
    kv_read_page_table_kernel(const __grid_constant__ KvReadPageTableParams p) {
  page_row<kFast, kReq64, kSeq64>(p, blockIdx.x, blockIdx.y, gridDim.y);
}

// ---- token stream ---------------------------------------------------------------

template <typename T>
struct Vec;  // 16 bytes of T
template <>
struct Vec<int32_t> {
  static constexpr int kN = 4;
  using type = int4;
};
template <>
struct Vec<int64_t> {
  static constexpr int kN = 2;
  using type = longlong2;
};

__device__ __noinline__ void fail_csr(const KvReadTokenStreamParams& p, uint32_t row, int64_t lo,
                                      int64_t hi, int64_t n) {
  const bool indptr_non_decreasing = lo >= 0 && hi >= lo;
  SGL_DEVICE_CHECK(indptr_non_decreasing,
                   STREAM_OP ": indptr must be non-negative and non-decreasing, got "
                             "indptr[%u] = %lld, indptr[%u] = %lld",
                   row, (long long)lo, row + 1, (long long)hi);
  const bool indptr_row_holds_tokens = n == 0 || (n <= hi - lo && lo <= p.out_size - n);
  SGL_DEVICE_CHECK(indptr_row_holds_tokens,
                   STREAM_OP ": row %u holds %lld tokens but indptr gives it [%lld, %lld) "
                             "in out of %lld elements",
                   row, (long long)n, (long long)lo, (long long)hi, (long long)p.out_size);
}

// entry * page_size + off <= out_max, without overflow and without a divide.
__device__ __forceinline__ bool id_fits(int64_t entry, int64_t page_size, int64_t off,
                                        int64_t out_max) {
  if (off > out_max) return false;
  const auto e = static_cast<unsigned long long>(entry);
  const auto ps = static_cast<unsigned long long>(page_size);
  return __umul64hi(e, ps) == 0 &&
         e * ps <= static_cast<unsigned long long>(out_max - off);
}

// Page `pg` of row `row` failed a check: its virtual page lies outside v2p, or
// an id of it (entry * page_size + off_max at most) does not fit out.
__device__ __noinline__ void fail_stream_page(const KvReadTokenStreamParams& p, uint32_t row,
                                              int64_t req, int64_t pg, int32_t slot,
                                              int64_t entry, int64_t off_max) {
  const KvReadSource& s = p.src;
  const int64_t vpage = virtual_page(s, slot);
  if (s.translate && vpage >= s.v2p_size) {
    fail_v2p<true>(s, req, pg * s.page_size, slot, vpage, row);
    return;
  }
  const bool token_id_fits_out = id_fits(entry, s.page_size, off_max, p.out_max);
  SGL_DEVICE_CHECK(token_id_fits_out,
                   STREAM_OP ": page entry %lld of row %u: %lld * page_size + %lld does not "
                             "fit out (%s)",
                   (long long)entry, row, (long long)entry, (long long)off_max,
                   p.out64 ? "int64" : "int32");
}

// Writes one chunk's ids: in-chunk offsets rel in [rel_begin, rel_end)
// (position pg0 * page_size + rel) go to out[e_chunk0 + rel]. The id of rel is
// (the entry of page rel / page_size) * page_size + rel % page_size, the entry
// times page_size (`base`) taken from the lane that gathered that page by a
// shuffle. 16-byte vector stores where a whole vector lies inside the range,
// element stores at its two ends. Every lane runs the same trips (the
// shuffles need the full warp).
//
// kSmall: offsets fit int32 (32 * page_size does), so the loop runs on 32-bit
// offsets with the divide-free FastDivU32, and int32 ids shuffle one word.
// kPow2 (implies kSmall): a power-of-two page, so the page of an offset is a
// shift and its place in the page a mask (1 instruction each where FastDivU32
// takes 3 and the remainder a multiply-subtract: per id, in a loop that at
// short rows runs on few warps per SM and so is issue-bound).
template <typename OutT, bool kSmall, bool kPow2>
__device__ __forceinline__ void write_chunk(OutT* out, int64_t align, int64_t e_chunk0,
                                            int64_t rel_begin, int64_t rel_end, int64_t base,
                                            const KvReadSource& s, int lane) {
  constexpr int V = Vec<OutT>::kN;
  using VecT = typename Vec<OutT>::type;
  using Off = typename std::conditional<kSmall, int32_t, int64_t>::type;
  // Narrow ids shuffle one 32-bit word: an id that fits out has a base that does.
  using Base = typename std::conditional<kSmall && sizeof(OutT) == 4, int32_t, long long>::type;
  const Base my_base = static_cast<Base>(base);
  // First vector-aligned offset at or below rel_begin: out[e] starts a vector
  // iff (e + align) % V == 0.
  const Off first = static_cast<Off>(rel_begin - (e_chunk0 + rel_begin + align) % V);
  const Off end = static_cast<Off>(rel_end);
  const Off lo = static_cast<Off>(rel_begin);
  const int shift = kPow2 ? s.div.page.shift : 0;
  const Off mask = kPow2 ? static_cast<Off>(s.page_size - 1) : 0;
  for (Off vb = first; vb < end; vb += 32 * V) {  // warp-uniform trips
    const Off r0 = vb + lane * V;
    OutT vals[V];
    bool all_in = true;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const Off r = r0 + k;
      const bool in = r >= lo && r < end;
      all_in &= in;
      Off q, rem;
      if (kPow2) {
        q = in ? (r >> shift) : 0;
        rem = r & mask;
      } else {
        if (kSmall)
          q = in ? static_cast<Off>(s.div.fast.div(static_cast<uint32_t>(r))) : 0;
        else
          q = in ? s.div.div(r) : 0;
        rem = r - q * static_cast<Off>(s.page_size);
      }
      const Base b = __shfl_sync(kFullMask, my_base, static_cast<int>(q));
      vals[k] = static_cast<OutT>(b + rem);
    }
    OutT* const dst = out + (e_chunk0 + r0);
    if (all_in) {
      VecT v;
      OutT* lanes = reinterpret_cast<OutT*>(&v);
#pragma unroll
      for (int k = 0; k < V; ++k) lanes[k] = vals[k];
      *reinterpret_cast<VecT*>(dst) = v;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (r0 + k >= lo && r0 + k < end) dst[k] = vals[k];
    }
  }
}

// kSmall: page_size <= kSmallPage, so every in-chunk offset fits 32-bit math
// and the divide-free FastDivU32; kPow2 (with kSmall): a power-of-two page,
// shifts and masks. The 64-bit path is a kernel of its own: as a branch it
// would set the register count of the common one.
template <typename OutT, bool kSmall, bool kPow2>
__global__ void __launch_bounds__(kThreads, kSmall ? kStreamBlocksPerSm : 1)
    kv_read_token_stream_kernel(const __grid_constant__ KvReadTokenStreamParams p) {
  constexpr int V = Vec<OutT>::kN;
  const KvReadSource& s = p.src;
  const uint32_t row = blockIdx.x, blk = blockIdx.y, blocks_per_row = gridDim.y;
  // Row scalars and the row's CSR slot, loaded before any is used (one
  // latency, not several). The empty asm makes them all arrive before the
  // early exit below: without it the compiler sinks the loads only a live
  // block needs past that branch, and a live block pays a second latency.
  const int64_t lo = p.indptr[row];
  const int64_t hi = p.indptr[row + 1];
  const int64_t req = s.req_pool_indices[row];
  const int64_t seq = s.seq_lens[row];
  const int64_t start = s.kv_start_idx.present() ? s.kv_start_idx[row] : 0;
  asm volatile("" ::"l"(lo), "l"(hi), "l"(req), "l"(seq), "l"(start));
  const int64_t n = live_tokens(s, seq, start);
  int64_t first_page = 0, last_page = -1, chunks = 0;
  if (n > 0) {  // (n > 0 implies start >= 0: row_tokens_left)
    first_page = s.div.div(start);
    last_page = s.div.div(start + n - 1);
    chunks = (last_page - first_page) / kPagesPerChunk + 1;
  }
  const int64_t first_chunk = static_cast<int64_t>(blk) * kWarps;
  // A block past the row's chunks leaves on the length alone; block 0 of every
  // row always checks it (request index, start, and that [lo, lo + n) lies
  // inside [lo, hi) and inside out, with 0 <= lo <= hi, so no two rows
  // overlap), and so does every block that writes.
  if (blk != 0 && first_chunk >= chunks) return;
  if (req < 0 || req >= s.pool_size || start < 0 || !window_fits(s, seq)) {
    fail_row<true>(s, row, req, start, seq);
    return;
  }
  if (lo < 0 || hi < lo || (n > 0 && (n > hi - lo || lo > p.out_size - n))) {
    fail_csr(p, row, lo, hi, n);
    return;
  }
  if (n == 0) return;

  const int64_t ps = s.page_size;
  const int lane = threadIdx.x & 31;
  int64_t ch = first_chunk + (threadIdx.x >> 5);
  if (ch >= chunks) return;  // whole warps leave together: the shuffles stay full-warp

  const int32_t* row_in = s.req_to_token + req * s.req_to_token_stride;
  OutT* out = static_cast<OutT*>(p.out);
  // Element e of out starts a 16-byte vector iff (e + align) % V == 0.
  const int64_t align = static_cast<int64_t>((reinterpret_cast<uintptr_t>(out) / sizeof(OutT)) % V);
  const int64_t chunk_stride = static_cast<int64_t>(blocks_per_row) * kWarps;
  for (; ch < chunks; ch += chunk_stride) {
    const int64_t pg0 = first_page + ch * kPagesPerChunk;
    const int64_t pg_last = min_i64(pg0 + kPagesPerChunk - 1, last_page);
    // Lane j: page pg0 + j. Both gathers before any use; a virtual page
    // outside v2p is never loaded.
    const int64_t pg = pg0 + lane;
    const bool have = pg <= pg_last;
    const int32_t slot = have ? load_once(row_in + pg * ps) : 0;
    int64_t entry = virtual_page(s, slot);
    const bool outside = s.translate && have && entry >= s.v2p_size;
    if (s.translate) entry = have && !outside ? max_i64(load_ro(s.v2p + entry), 0) : 0;
    // The largest in-page offset this row uses of page pg.
    const int64_t off_max = pg == last_page ? start + n - 1 - pg * ps : ps - 1;
    const bool bad =
        have && (outside || (entry > p.max_entry && !id_fits(entry, ps, off_max, p.out_max)));
    if (__any_sync(kFullMask, bad)) {  // warp-uniform: no lane is left at a shuffle
      if (bad) fail_stream_page(p, row, req, pg, slot, entry, off_max);
      return;
    }

    // This chunk's ids: positions [pos_begin, pos_end) -> out[lo + pos - start];
    // position pos is rel = pos - pg0 * page_size into the chunk.
    const int64_t chunk_pos = pg0 * ps;
    const int64_t pos_begin = max_i64(start, chunk_pos);
    const int64_t pos_end = pg_last == last_page ? start + n : (pg_last + 1) * ps;
    const int64_t e_chunk0 = lo + (chunk_pos - start);  // out index of rel 0
    write_chunk<OutT, kSmall, kPow2>(out, align, e_chunk0, pos_begin - chunk_pos, pos_end - chunk_pos,
                              entry * ps, s, lane);
  }
}

// Blocks per row: enough for the static cap `units` (each block covering
// `per_block` of them), but no more than keeps the grid within `max_blocks`
// (one wave), and at least one.
int64_t blocks_per_row(int64_t units, int64_t per_block, int64_t bs, int64_t max_blocks) {
  const int64_t needed = units > 0 ? (units + per_block - 1) / per_block : 1;
  const int64_t spread = max_blocks / bs > 1 ? max_blocks / bs : 1;
  return needed < spread ? needed : spread;
}

// One wave of blocks on the current device (the binding made it the tensors'
// device); 132 SMs when the query fails.
int64_t wave(int blocks_per_sm) { return int64_t{current_device_sm_count(132)} * blocks_per_sm; }

}  // namespace

const char* kv_read_page_table_cuda(const KvReadPageTableParams& p, void* stream) {
  // At least one block per row even when no column can be written, so every
  // request index is still checked. Without zero_tail no row writes past the
  // columns whose first token lies in the req_to_token row.
  if (p.src.bs == 0) return nullptr;
  if (p.src.bs > kMaxGridRows) return "grid too large (req_pool_indices.numel() > 2^31 - 1)";
  const int64_t row_cols = p.src.div.page.ceil_div(p.src.row_len);
  const int64_t cols = p.zero_tail ? p.max_pages : min_i64(p.max_pages, row_cols);
  if (cols > kMaxColumns) return "max_pages: more columns than the CUDA kernel indexes in 32 bits";
  const int64_t per_row = min_i64(blocks_per_row(cols, kColsPerBlock, p.src.bs, wave(kPageBlocksPerSm)),
                                  kMaxShares);
  const dim3 grid(static_cast<unsigned>(p.src.bs), static_cast<unsigned>(per_row));
  const int shift = p.src.div.page.shift;
  const bool fast = !p.src.kv_start_idx.present() && shift >= 0 && shift <= 30 && p.src.row_len <= INT32_MAX;
  const auto s = static_cast<cudaStream_t>(stream);
  if (!fast)
    kv_read_page_table_kernel<false><<<grid, kPageThreads, 0, s>>>(p);
  else if (p.src.req_pool_indices.is64 && p.src.seq_lens.is64)
    kv_read_page_table_kernel<true, true, true><<<grid, kPageThreads, 0, s>>>(p);
  else if (p.src.req_pool_indices.is64)
    kv_read_page_table_kernel<true, true, false><<<grid, kPageThreads, 0, s>>>(p);
  else if (p.src.seq_lens.is64)
    kv_read_page_table_kernel<true, false, true><<<grid, kPageThreads, 0, s>>>(p);
  else
    kv_read_page_table_kernel<true, false, false><<<grid, kPageThreads, 0, s>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

const char* kv_read_token_stream_cuda(const KvReadTokenStreamParams& p, void* stream) {
  // A window spans at most ceil(row_len / page_size) + 1 pages (an unaligned
  // start adds one); each warp takes 32 of them per step.
  if (p.src.bs == 0) return nullptr;
  if (p.src.bs > kMaxGridRows) return "grid too large (req_pool_indices.numel() > 2^31 - 1)";
  const int64_t pages = p.src.div.page.ceil_div(p.src.row_len) + 1;
  const int64_t chunks = (pages + kPagesPerChunk - 1) / kPagesPerChunk;
  const bool small = p.src.page_size <= kSmallPage;
  const bool pow2 = small && p.src.div.page.shift >= 0;
  // (The 64-bit kernels take 60-72 registers: 7-8 resident blocks per SM.)
  const int64_t per_row =
      blocks_per_row(chunks, kWarps, p.src.bs, wave(small ? kStreamBlocksPerSm : kStreamBlocksPerSm / 2));
  const auto s = static_cast<cudaStream_t>(stream);
  const dim3 grid(static_cast<unsigned>(p.src.bs), static_cast<unsigned>(per_row));
  if (p.out64 && pow2)
    kv_read_token_stream_kernel<int64_t, true, true><<<grid, kThreads, 0, s>>>(p);
  else if (p.out64 && small)
    kv_read_token_stream_kernel<int64_t, true, false><<<grid, kThreads, 0, s>>>(p);
  else if (p.out64)
    kv_read_token_stream_kernel<int64_t, false, false><<<grid, kThreads, 0, s>>>(p);
  else if (pow2)
    kv_read_token_stream_kernel<int32_t, true, true><<<grid, kThreads, 0, s>>>(p);
  else if (small)
    kv_read_token_stream_kernel<int32_t, true, false><<<grid, kThreads, 0, s>>>(p);
  else
    kv_read_token_stream_kernel<int32_t, false, false><<<grid, kThreads, 0, s>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
