// kv_read_page_table / kv_read_token_stream: the CUDA kernels (no torch headers).
//
// Both grids are sized from host-known shapes only (bs and a static cap: the
// table width, or the req_to_token row), never from device lengths: nothing is
// synchronised and a CUDA graph replays them with any new lengths. Each block
// reads its row's scalars, checks them, and leaves after a few loads when its
// share of the row lies past the row's live length, so short rows cost little
// however wide the cap.
//
// Cost model. Every page costs one scattered int32 read of req_to_token (its
// first slot; page boundaries are page_size * 4 bytes apart) and, with v2p,
// one more scattered int64 read that depends on the first: two DRAM latencies
// in a chain, each a separate 64-byte DRAM access. The kernels are bound by
// how many such chains are in flight, so every thread (page table) or lane
// (token stream) issues all its first-level loads, then all its second-level
// loads, before it uses any of them.
//
// Page table: 128-thread blocks, 512 columns per block step, 4 per thread,
// strided by 128 so a warp's stores cover 32 consecutive columns.
// Token stream: one warp per chunk of 32 pages: lane j gathers and translates
// page j of the chunk, then the warp writes the chunk's ids (page_size per
// page, contiguous in out) with 16-byte vector stores, each id taking its
// page's entry from the owning lane by a shuffle.
#include <climits>

#include "common/cuda_utils.cuh"
#include "kv_read_table/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kColsPerThread = 4;
constexpr int64_t kColsPerBlock = kThreads * kColsPerThread;
constexpr int kWarps = kThreads / 32;
constexpr int64_t kPagesPerChunk = 32;  // token stream: one page per lane
// Past this many blocks (about two waves of 128-thread blocks on an H100/H200)
// a block loops over several steps of its row instead of the grid growing.
constexpr int64_t kMaxBlocks = 4096;
constexpr unsigned kFullMask = 0xffffffffu;
// Token stream: a chunk of 32 pages spans 32 * page_size positions; up to this
// page size they (plus a vector's overhang) fit int32.
constexpr int64_t kSmallPage = (INT32_MAX - 1024) / kPagesPerChunk;

#define PAGE_OP "kv_read_page_table"
#define STREAM_OP "kv_read_token_stream"

struct RowScalars {
  int64_t req;
  int64_t seq;
  int64_t start;
};

// Failure paths, out of line: the hot code only tests and branches (an
// inlined printf costs registers and a stack frame in every kernel).
template <bool kStream>
__device__ __noinline__ void fail_row(const KvReadSource& s, uint32_t row, int64_t req,
                                      int64_t start) {
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
}

// Row b's scalars, loaded before any is used (one latency, not three). Every
// block checks them, live or not, so a bad index fails whatever the lengths
// (the CPU kernels check every row too). The named flags put the argument in
// the assert text itself, not only in the printf above it.
template <bool kStream>
__device__ __forceinline__ RowScalars load_row(const KvReadSource& s, uint32_t row) {
  const int64_t req = s.req_pool_indices[row];
  const int64_t seq = s.seq_lens[row];
  const int64_t start = s.kv_start_idx.present() ? s.kv_start_idx[row] : 0;
  if (req < 0 || req >= s.pool_size || start < 0) fail_row<kStream>(s, row, req, start);
  return {req, seq, start};
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

// (Returns when the entry fits.)
__device__ __noinline__ void fail_page_entry(int64_t vpage, int64_t entry, uint32_t row,
                                             int64_t col) {
  const bool v2p_entry_fits_int32_out = entry <= INT32_MAX;
  SGL_DEVICE_CHECK(v2p_entry_fits_int32_out,
                   PAGE_OP ": v2p[%lld] = %lld does not fit the int32 out (row %u, column %lld)",
                   (long long)vpage, (long long)entry, row, (long long)col);
}

// ---- page table ---------------------------------------------------------------

// One 512-column step of a row: columns [begin, begin + 512) below `limit`;
// those below `n` get their entry, the rest (zero_tail) the sink 0. A virtual
// page outside v2p is never loaded; it is reported after the stores, where few
// values are live (a failure call inside the gather would hold every in-flight
// value across it and double the registers).
__device__ __forceinline__ void page_step(const KvReadPageTableParams& p, const RowScalars& r,
                                          const int32_t* row_in, int32_t* out, uint32_t row,
                                          int64_t begin, int64_t n, int64_t limit) {
  const KvReadSource& s = p.src;
  const int64_t c0 = begin + threadIdx.x;
  const int64_t step = s.page_size;
  int32_t slot[kColsPerThread];
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    slot[k] = c < n ? load_ro(row_in + c * step) : 0;
  }
  int64_t entry[kColsPerThread];
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k) entry[k] = virtual_page(s, slot[k]);
  bool bad = false;
  if (s.translate) {
    // Second-level gather, issued for all columns before any is used.
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) {
      const bool live = c0 + k * kThreads < n;
      const bool inside = entry[k] < s.v2p_size;
      bad |= live && !inside;
      entry[k] = live && inside ? max_i64(load_ro(s.v2p + entry[k]), 0) : 0;
    }
#pragma unroll
    for (int k = 0; k < kColsPerThread; ++k) bad |= entry[k] > INT32_MAX;
  }
#pragma unroll
  for (int k = 0; k < kColsPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    if (c < n)
      out[c] = static_cast<int32_t>(entry[k]);
    else if (c < limit)
      out[c] = 0;
  }
  if (bad) {  // cold: find the column again and report it
#pragma unroll 1
    for (int k = 0; k < kColsPerThread; ++k) {
      const int64_t c = c0 + k * kThreads;
      if (c >= n) continue;
      const int32_t sl = row_in[c * step];
      const int64_t vpage = virtual_page(s, sl);
      if (vpage >= s.v2p_size) fail_v2p<false>(s, r.req, r.start + c * step, sl, vpage, row);
      fail_page_entry(vpage, max_i64(s.v2p[vpage], 0), row, c);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    kv_read_page_table_kernel(const __grid_constant__ KvReadPageTableParams p,
                              uint32_t blocks_per_row) {
  const uint32_t row = blockIdx.x / blocks_per_row;
  const uint32_t first_step = blockIdx.x - row * blocks_per_row;
  const RowScalars r = load_row<false>(p.src, row);
  const int64_t n = live_columns(p, r.seq, r.start);
  const int64_t limit = p.zero_tail ? p.max_pages : n;
  int64_t begin = first_step * kColsPerBlock;
  if (begin >= limit) return;  // past the row's live columns: nothing to do

  const int32_t* row_in = p.src.req_to_token + r.req * p.src.req_to_token_stride + r.start;
  int32_t* out = p.out + row * p.out_stride;
  const int64_t stride = static_cast<int64_t>(blocks_per_row) * kColsPerBlock;
  for (; begin < limit; begin += stride) page_step(p, r, row_in, out, row, begin, n, limit);
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

// Row b's CSR slot, checked by every block of the row: [lo, lo + n) must lie
// inside [lo, hi) and inside out, with 0 <= lo <= hi (so no two rows overlap).
__device__ __forceinline__ void check_csr(const KvReadTokenStreamParams& p, uint32_t row,
                                          int64_t lo, int64_t hi, int64_t n) {
  const bool ok = lo >= 0 && hi >= lo && (n == 0 || (n <= hi - lo && lo <= p.out_size - n));
  if (!ok) fail_csr(p, row, lo, hi, n);
}

__device__ __noinline__ void fail_stream_entry(const KvReadTokenStreamParams& p, int64_t entry,
                                               int64_t off, uint32_t row) {
  const bool token_id_fits_out =
      off <= p.out_max && entry <= (p.out_max - off) / p.src.page_size;
  SGL_DEVICE_CHECK(token_id_fits_out,
                   STREAM_OP ": page entry %lld of row %u: %lld * page_size + %lld does not "
                             "fit out (%s)",
                   (long long)entry, row, (long long)entry, (long long)off,
                   p.out64 ? "int64" : "int32");
}

// Writes out[e] for e in [e_begin, e_end) of one chunk: the id of in-chunk
// offset rel = e - e_chunk0 is (lane rel / page_size's entry) * page_size +
// rel % page_size, the entry times page_size (`base`) taken from its lane by a
// shuffle. 16-byte vector stores where a whole vector lies inside the range,
// element stores at its two ends. Every lane runs the same trips (the
// shuffles need the full warp).
template <typename OutT, bool kSmall>
__device__ __forceinline__ void write_chunk(OutT* out, int64_t align, int64_t e_begin,
                                            int64_t e_end, int64_t e_chunk0, int64_t base,
                                            const KvReadSource& s, int lane) {
  constexpr int V = Vec<OutT>::kN;
  using VecT = typename Vec<OutT>::type;
  const int64_t e_first = e_begin - (e_begin + align) % V;  // vector-aligned
  for (int64_t vb = e_first; vb < e_end; vb += 32 * V) {
    const int64_t v0 = vb + lane * V;
    OutT vals[V];
    bool all_in = true;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const int64_t e = v0 + k;
      const bool in = e >= e_begin && e < e_end;
      all_in &= in;
      int idx;
      int64_t off;
      if (kSmall) {
        const int32_t rel = static_cast<int32_t>(e - e_chunk0);
        const uint32_t q = in ? s.div.fast.div(static_cast<uint32_t>(rel)) : 0u;
        idx = static_cast<int>(q);
        off = rel - static_cast<int32_t>(q) * static_cast<int32_t>(s.page_size);
      } else {
        const int64_t rel = e - e_chunk0;
        const int64_t q = in ? s.div.div(rel) : 0;
        idx = static_cast<int>(q);
        off = rel - q * s.page_size;
      }
      const long long b = __shfl_sync(kFullMask, static_cast<long long>(base), idx);
      vals[k] = in ? static_cast<OutT>(b + off) : OutT(0);
    }
    if (all_in) {
      VecT v;
      OutT* lanes = reinterpret_cast<OutT*>(&v);
#pragma unroll
      for (int k = 0; k < V; ++k) lanes[k] = vals[k];
      *reinterpret_cast<VecT*>(out + v0) = v;
    } else {
#pragma unroll
      for (int k = 0; k < V; ++k)
        if (v0 + k >= e_begin && v0 + k < e_end) out[v0 + k] = vals[k];
    }
  }
}

// kSmall: page_size <= kSmallPage, so every in-chunk offset fits 32-bit math
// and the divide-free FastDivU32. The 64-bit path is a kernel of its own: as a
// branch it would set the register count of the common one.
template <typename OutT, bool kSmall>
__global__ void __launch_bounds__(kThreads)
    kv_read_token_stream_kernel(const __grid_constant__ KvReadTokenStreamParams p,
                                uint32_t blocks_per_row) {
  constexpr int V = Vec<OutT>::kN;
  const KvReadSource& s = p.src;
  const uint32_t row = blockIdx.x / blocks_per_row;
  const uint32_t blk = blockIdx.x - row * blocks_per_row;
  const int64_t lo = p.indptr[row];
  const int64_t hi = p.indptr[row + 1];
  const RowScalars r = load_row<true>(s, row);
  const int64_t n = live_tokens(s, r.seq, r.start);
  check_csr(p, row, lo, hi, n);
  if (n == 0) return;

  const int64_t ps = s.page_size;
  const int64_t first_page = s.div.div(r.start);
  const int64_t last_page = s.div.div(r.start + n - 1);
  const int64_t chunks = (last_page - first_page) / kPagesPerChunk + 1;
  const int lane = threadIdx.x & 31;
  int64_t ch = static_cast<int64_t>(blk) * kWarps + (threadIdx.x >> 5);
  if (ch >= chunks) return;  // whole warps leave together: the shuffles stay full-warp

  const int32_t* row_in = s.req_to_token + r.req * s.req_to_token_stride;
  OutT* out = static_cast<OutT*>(p.out);
  // Element e of out starts a 16-byte vector iff (e + align) % V == 0.
  const int64_t align = static_cast<int64_t>((reinterpret_cast<uintptr_t>(out) / sizeof(OutT)) % V);
  const int64_t chunk_stride = static_cast<int64_t>(blocks_per_row) * kWarps;
  for (; ch < chunks; ch += chunk_stride) {
    const int64_t pg0 = first_page + ch * kPagesPerChunk;
    const int64_t pg_last = min_i64(pg0 + kPagesPerChunk - 1, last_page);
    // Lane j: page pg0 + j. Both gathers before any use.
    const int64_t pg = pg0 + lane;
    const bool have = pg <= pg_last;
    const int32_t slot = have ? load_ro(row_in + pg * ps) : 0;
    int64_t entry = virtual_page(s, slot);
    // A page outside v2p is not loaded; reported after the stores (see page_step).
    const bool outside = s.translate && have && entry >= s.v2p_size;
    if (s.translate) entry = have && !outside ? max_i64(load_ro(s.v2p + entry), 0) : 0;
    const bool big = have && entry > p.max_entry;

    // This chunk's ids: positions [pos_begin, pos_end) -> out[lo + pos - start];
    // position pos is rel = pos - pg0 * page_size into the chunk.
    const int64_t pos_begin = max_i64(r.start, pg0 * ps);
    const int64_t pos_end = pg_last == last_page ? r.start + n : (pg_last + 1) * ps;
    const int64_t e_chunk0 = lo + (pg0 * ps - r.start);  // out index of rel 0
    const int64_t e_begin = lo + (pos_begin - r.start);
    const int64_t e_end = lo + (pos_end - r.start);
    write_chunk<OutT, kSmall>(out, align, e_begin, e_end, e_chunk0, entry * ps, s, lane);
    if (outside || big) {  // cold
      if (outside) fail_v2p<true>(s, r.req, pg * ps, slot, virtual_page(s, slot), row);
      // Exact check with the largest in-page offset this row uses.
      const int64_t last_pos = pg == last_page ? r.start + n - 1 : (pg + 1) * ps - 1;
      fail_stream_entry(p, entry, last_pos - pg * ps, row);
    }
  }
}

// Blocks per row: enough for the static cap `units` (each block covering
// `per_block` of them), but no more than keeps the grid near kMaxBlocks.
int64_t blocks_per_row(int64_t units, int64_t per_block, int64_t bs) {
  const int64_t needed = units > 0 ? (units + per_block - 1) / per_block : 1;
  const int64_t spread = (kMaxBlocks + bs - 1) / bs;  // >= 1
  return needed < spread ? needed : spread;
}

}  // namespace

const char* kv_read_page_table_cuda(const KvReadPageTableParams& p, void* stream) {
  // At least one block per row even when no column can be written, so every
  // request index is still checked. Without zero_tail no row writes past the
  // columns whose first token lies in the req_to_token row.
  const int64_t row_cols = p.src.div.page.ceil_div(p.src.row_len);
  const int64_t cols = p.zero_tail ? p.max_pages : min_i64(p.max_pages, row_cols);
  const int64_t per_row = blocks_per_row(cols, kColsPerBlock, p.src.bs);
  const int64_t blocks = p.src.bs * per_row;
  if (blocks > INT32_MAX) return "grid too large (req_pool_indices.numel() out of range)";
  kv_read_page_table_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                              static_cast<cudaStream_t>(stream)>>>(
      p, static_cast<uint32_t>(per_row));
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

const char* kv_read_token_stream_cuda(const KvReadTokenStreamParams& p, void* stream) {
  // A window spans at most ceil(row_len / page_size) + 1 pages (an unaligned
  // start adds one); each warp takes 32 of them per step.
  const int64_t pages = p.src.div.page.ceil_div(p.src.row_len) + 1;
  const int64_t chunks = (pages + kPagesPerChunk - 1) / kPagesPerChunk;
  const int64_t per_row = blocks_per_row(chunks, kWarps, p.src.bs);
  const int64_t blocks = p.src.bs * per_row;
  if (blocks > INT32_MAX) return "grid too large (req_pool_indices.numel() out of range)";
  const auto s = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(blocks);
  const auto bpr = static_cast<uint32_t>(per_row);
  const bool small = p.src.page_size <= kSmallPage;
  if (p.out64 && small)
    kv_read_token_stream_kernel<int64_t, true><<<grid, kThreads, 0, s>>>(p, bpr);
  else if (p.out64)
    kv_read_token_stream_kernel<int64_t, false><<<grid, kThreads, 0, s>>>(p, bpr);
  else if (small)
    kv_read_token_stream_kernel<int32_t, true><<<grid, kThreads, 0, s>>>(p, bpr);
  else
    kv_read_token_stream_kernel<int32_t, false><<<grid, kThreads, 0, s>>>(p, bpr);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
