// update_flash_attention_metadata / flash_attention_swa_spec_page_table: the CUDA
// kernels (no torch headers).
//
// update_flash_attention_metadata: one launch writes N <= kFaMaxSetsPerLaunch
// destination sets. Thread blocks by blockIdx.x:
//   [0]                        cache_seqlens, cu_seqlens_k of every set and
//                              cu_seqlens_q: a scan, 256 rows per pass
//   [1, 1 + bs * chunks)       one (row, 128-column chunk) of every set's page
//                              table (+ SWA table): each slot is gathered once
//                              and stored into every set whose live prefix
//                              covers it (zero_tail: zeros up to max_seq_pages);
//                              past kNarrowBlocks such blocks, G per row
//                              (blocks_per_row), each looping over every G-th
//                              chunk of its row
//   [.., + out_blocks)         swa_out_cache_loc
//
// flash_attention_verify_expand: one block, one row per thread and pass; two
// block scans per pass (each row's mask offset, the running sum of the
// lengths), a row's mask entries and req_to_token slots loaded together.
//
// flash_attention_draft_decode_topk: blocks [0, bs * chunks) one (request,
// 128-column chunk) of the prefix tables (looping past kNarrowBlocks, as
// above), each slot gathered once and stored into every set; then one draft
// row per thread (its request's prefix length from the row's first branch),
// the draft slots loaded 8 at a time.
// The page blocks size their work from seq_lens themselves (no dependency on
// the scan block); a hostile length only changes which in-bounds columns are
// written before the scan block's assert.
#include <climits>

#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "common/fast_div.h"
#include "flash_attention_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kScanThreads = kThreads;
constexpr int kScanWarps = kScanThreads / 32;
constexpr int64_t kPagesPerBlock = kThreads;  // one column per thread
// Page blocks past which a row's blocks loop over its chunks (page_row), and
// the chunks a looping block loads together. 4,096 (about 30 blocks per SM):
// at 16 requests x 1,024 chunks (page size 1, a 128k static width) one block
// per chunk took twice the looping grid's device time.
constexpr int64_t kNarrowBlocks = 4096;
constexpr int kWideSteps = 4;

// Blocks per row of a grid of bs rows x `chunks` 128-column chunks: one per
// chunk up to kNarrowBlocks blocks in all; past it G = kNarrowBlocks / bs (at
// least 1), and no more than a turn of kWideSteps chunks each needs.
int64_t blocks_per_row(int64_t bs, int64_t chunks, bool* wide) {
  *wide = chunks > 0 && bs * chunks > kNarrowBlocks;
  if (!*wide) return chunks;
  return min_i64(max_i64(kNarrowBlocks / bs, 1), (chunks + kWideSteps - 1) / kWideSteps);
}
constexpr int kOutPerThread = 4;
constexpr int64_t kOutPerBlock = int64_t{kThreads} * kOutPerThread;

// kSlots: destination slots in the parameter block. A one-set launch passes
// one slot (a ~0.3 KB block instead of ~0.7 KB), which the launch copies and
// the first instructions of every block wait on.
template <int kSlots>
struct Args {
  // Scalars first, the sets last: a block's scalars and set 0 sit together at
  // the front of the parameter bank.
  int num_sets;
  int32_t max_delta;  // the largest delta of a set with a table: the widest table
  int first_set;  // index of set 0 of this launch in the call (messages)
  FastDivU32 chunks;
  uint32_t page_blocks;
  FaInputs in;
  FaDest set[kSlots];
};

__device__ __forceinline__ const char* op_name() { return "update_flash_attention_metadata"; }

// Row i broke the length contract (a length or a running sum written at row
// i): re-derive which and assert with its value.
template <int kSlots>
SGL_FAILURE_PATH void fail_scan_row(const Args<kSlots>& a, int64_t i, uint32_t k_bad_sets, bool q_bad) {
  const FaInputs& in = a.in;
  const int64_t seq = in.seq_lens[i];
  const bool seq_lens_in_int32_range = length_fits(seq);
  SGL_DEVICE_CHECK(seq_lens_in_int32_range,
                   "%s: seq_lens[%lld] = %lld is negative or does not fit int32 cache_seqlens",
                   op_name(), (long long)i, (long long)seq);
  if (in.extend_seq_lens.present()) {
    const int64_t q = in.extend_seq_lens[i];
    const bool extend_seq_lens_in_int32_range = length_fits(q);
    SGL_DEVICE_CHECK(extend_seq_lens_in_int32_range,
                     "%s: extend_seq_lens[%lld] = %lld is negative or does not fit int32 "
                     "cu_seqlens_q",
                     op_name(), (long long)i, (long long)q);
  }
  for (int s = 0; s < a.num_sets; ++s) {
    const bool cache_seqlens_in_int32_range = fa_len_fits(seq, a.set[s].delta);
    SGL_DEVICE_CHECK(cache_seqlens_in_int32_range,
                     "%s: seq_lens[%lld] + seq_len_delta (set %d: %d) = %lld is negative or "
                     "does not fit int32 cache_seqlens",
                     op_name(), (long long)i, a.first_set + s, a.set[s].delta,
                     (long long)(seq + a.set[s].delta));
    const bool cu_seqlens_k_fits_int32 = !((k_bad_sets >> s) & 1u);
    SGL_DEVICE_CHECK(cu_seqlens_k_fits_int32,
                     "%s: cache_seqlens (set %d) [0..%lld] summed (cu_seqlens_k[%lld]) does not "
                     "fit int32",
                     op_name(), a.first_set + s, (long long)i, (long long)(i + 1));
  }
  const bool cu_seqlens_q_fits_int32 = !q_bad;
  SGL_DEVICE_CHECK(cu_seqlens_q_fits_int32,
                   "%s: extend_seq_lens[0..%lld] summed (cu_seqlens_q[%lld]) does not fit int32",
                   op_name(), (long long)i, (long long)(i + 1));
  __trap();
}

// One row per thread and pass; the warp totals through shared memory. Every
// running sum is formed mod 2**32 from terms that each fit int32, so the
// first one past INT32_MAX reads negative (running_sum_fits).
template <int kSlots>
__device__ void scan_block(const Args<kSlots>& a) {
  constexpr bool kOneSet = kSlots == 1;
  const FaInputs& in = a.in;
  const int sets = kOneSet ? 1 : a.num_sets;
  __shared__ uint32_t warp_k[kScanWarps], warp_q[kScanWarps];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const bool cumsum_q = in.cu_seqlens_q != nullptr;
  if (threadIdx.x == 0) {
    for (int s = 0; s < sets; ++s)
      if (a.set[s].cu_seqlens_k != nullptr) a.set[s].cu_seqlens_k[0] = 0;
    if (cumsum_q) in.cu_seqlens_q[0] = 0;
  }
  // Up to 32 rows (one pass, one warp): no warp totals to exchange, and the
  // shuffles stop at the rows there are (none for one row).
  const bool one_warp = in.bs <= 32;
  if (one_warp && warp > 0) return;
  const int lanes = one_warp ? static_cast<int>(in.bs) : 32;
  uint32_t k_carry = 0, q_carry = 0;
  for (int64_t tile = 0; tile < in.bs; tile += kScanThreads) {
    const int64_t i = tile + threadIdx.x;
    const bool live = i < in.bs;
    const int64_t seq = live ? in.seq_lens[i] : 0;
    const int64_t q64 = live && cumsum_q ? in.extend_seq_lens[i] : 0;
    bool fits = length_fits(seq) && length_fits(q64);
    const uint32_t base = static_cast<uint32_t>(seq), q = static_cast<uint32_t>(q64);
    const uint32_t k_incl = warp_inclusive_sum(base, lanes);
    const uint32_t q_incl = cumsum_q ? warp_inclusive_sum(q, lanes) : 0u;
    uint32_t k_off = k_carry, q_off = q_carry;
    if (!one_warp) {
      if (lane == 31) {
        warp_k[warp] = k_incl;
        warp_q[warp] = q_incl;
      }
      __syncthreads();
#pragma unroll
      for (int w = 0; w < kScanWarps; ++w) {
        if (w < warp) {
          k_off += warp_k[w];
          q_off += warp_q[w];
        }
        k_carry += warp_k[w];
        q_carry += warp_q[w];
      }
      __syncthreads();  // warp_k / warp_q are rewritten by the next pass
    }
    if (!live) continue;
    uint32_t k_bad = 0;
    for (int s = 0; s < sets; ++s) {
      const uint32_t d = static_cast<uint32_t>(a.set[s].delta);
      const uint32_t cu = k_off + k_incl + static_cast<uint32_t>(i + 1) * d;
      fits &= fa_len_fits(seq, a.set[s].delta);
      a.set[s].cache_seqlens[i] = static_cast<int32_t>(base + d);
      if (a.set[s].cu_seqlens_k == nullptr) continue;
      if (!running_sum_fits(cu)) k_bad |= 1u << s;
      a.set[s].cu_seqlens_k[i + 1] = static_cast<int32_t>(cu);
    }
    bool q_bad = false;
    if (cumsum_q) {
      const uint32_t cu = q_off + q_incl;
      q_bad = !running_sum_fits(cu);
      in.cu_seqlens_q[i + 1] = static_cast<int32_t>(cu);
    }
    if (__builtin_expect(!fits || k_bad != 0 || q_bad, 0)) fail_scan_row(a, i, k_bad, q_bad);
  }
}

// Column c of row `row`: its entry in every set's table (set s covers c when
// its first token lies below len_s; zero_tail zeros the rest). `slot` is
// req_to_token's entry at the column's first token when `read`; a row whose
// req lies outside the pool writes nothing (its caller reports it).
// kPlain: no v2p, no SWA table, no swa_out_cache_loc (a static pool without a
// sliding window, the usual decode): those paths are compiled out, so a block
// runs (and, with cold caches, fetches) a short straight-line path. kOneSet:
// one destination set (no loop over sets).
template <bool kPlain, int kSlots>
__device__ __forceinline__ void store_column(const Args<kSlots>& a, uint32_t row, int64_t seq,
                                             bool req_in_pool, int64_t c, int32_t slot, bool read,
                                             bool live) {
  constexpr bool kOneSet = kSlots == 1;
  const FaInputs& in = a.in;
  const int sets = kOneSet ? 1 : a.num_sets;
  const int shift = fa_shift(in.page.shift);
  const int64_t c_tok = c << shift;
  // A set's columns are those whose first token lies below its length (the
  // widest set is the one with the largest delta); each is recomputed where it
  // is used rather than kept in an array indexed by the run-time set number,
  // which would live in local memory.
  const auto covers = [&](int32_t delta) {
    return c_tok < static_cast<int32_t>(fa_len(seq, delta));
  };
  const int64_t vpage = fa_vpage(slot, shift);
  int64_t full = 0, swa = 0;
  if (read) {
    if (!kPlain && in.full_v2p.present()) {
      SGL_DEVICE_CHECK_COLD(vpage < in.full_v2p_size,
                            "%s: virtual page %lld (req_to_token slot %d // page_size, row %u, "
                            "page %lld) is outside full_v2p [0, %lld)",
                            op_name(), (long long)vpage, slot, row, (long long)c,
                            (long long)in.full_v2p_size);
      full = fa_translated(in.full_v2p.ldg(vpage));
    } else {
      full = fa_page(slot, shift);
    }
    if (!kPlain && in.swa_table) {
      if (in.swa_v2p.present()) {
        SGL_DEVICE_CHECK_COLD(vpage < in.swa_v2p_size,
                              "%s: virtual page %lld (req_to_token slot %d // page_size, row "
                              "%u, page %lld) is outside swa_v2p [0, %lld)",
                              op_name(), (long long)vpage, slot, row, (long long)c,
                              (long long)in.swa_v2p_size);
        swa = fa_translated(in.swa_v2p.ldg(vpage));
      } else {
        SGL_DEVICE_CHECK_COLD(slot < in.swa_mapping_size,
                              "%s: req_to_token slot %d (row %u, page %lld) is outside "
                              "full_to_swa_index_mapping [0, %lld)",
                              op_name(), slot, row, (long long)c,
                              (long long)in.swa_mapping_size);
        swa = fa_swa_from_mapping(in, slot, slot < 0 ? -1 : in.swa_mapping.ldg(slot));
      }
    }
  }
  for (int s = 0; s < sets && req_in_pool; ++s) {
    if (!kOneSet && a.set[s].page_table == nullptr) continue;  // a lengths-only set
    const bool mine = kOneSet ? live : covers(a.set[s].delta);
    if (!mine && !in.zero_tail) continue;
    a.set[s].page_table[row * a.set[s].page_table_stride + c] = mine ? static_cast<int32_t>(full) : 0;
    if (!kPlain && in.swa_table)
      a.set[s].swa_page_table[row * a.set[s].swa_page_table_stride + c] =
          mine ? static_cast<int32_t>(swa) : 0;
  }
}

// Whether a request index lies in the pool (FaInputs, FaDraftTopkParams).
template <class P>
__device__ __forceinline__ bool req_fits(const P& p, int64_t req) {
  return req >= 0 && req < p.pool_size;
}

// The looping blocks' walk over one row: block g of `blocks` takes the row's
// 128-column chunks g, g + blocks, ... below `end`, kWideSteps chunks a turn,
// every column below `read_end` loaded (load(c)) before any is stored
// (store(c, value, read)).
template <class Load, class Store>
__device__ __forceinline__ void wide_columns(uint32_t g, uint32_t blocks, int64_t read_end, int64_t end,
                                             Load load, Store store) {
  const int64_t stride = int64_t{blocks} * kPagesPerBlock;
  for (int64_t c0 = int64_t{g} * kPagesPerBlock + threadIdx.x; c0 < end; c0 += kWideSteps * stride) {
    int32_t value[kWideSteps];
#pragma unroll
    for (int k = 0; k < kWideSteps; ++k) {
      const int64_t c = c0 + k * stride;
      value[k] = c < read_end ? load(c) : 0;
    }
#pragma unroll
    for (int k = 0; k < kWideSteps; ++k) {
      const int64_t c = c0 + k * stride;
      if (c < end) store(c, value[k], c < read_end);
    }
  }
}

__device__ __forceinline__ void check_req(const FaInputs& in, uint32_t row, int64_t req) {
  SGL_DEVICE_CHECK_COLD(req_fits(in, req),
                        "%s: req_pool_indices[%u] = %lld is outside [0, req_to_token.size(0) "
                        "= %lld)",
                        op_name(), row, (long long)req, (long long)in.pool_size);
}

// One (row, 128-column chunk): one column per thread.
template <bool kPlain, int kSlots>
__device__ void page_block(const Args<kSlots>& a, uint32_t row, uint32_t chunk) {
  const FaInputs& in = a.in;
  // The row's scalars are loaded first, before any branch: the parameter
  // block is fetched afresh for every launch, and a parameter read behind a
  // branch is a second fetch in the chain (the pointers in one round trip,
  // then the loads they feed). row < bs, so every thread may load them.
  const int64_t req = in.req_pool_indices[row];
  const int64_t seq = in.seq_lens[row];
  const int64_t c = int64_t{chunk} * kPagesPerBlock + threadIdx.x;
  if (c >= in.max_seq_pages) return;
  // c_tok = c * page_size, the column's first token; with fa_page's capped
  // shift, c < fa_columns(len) <=> c_tok < len for any int32 len (c_tok >= 0
  // rules out len <= 0; a capped shift leaves only column 0).
  const int64_t c_tok = c << fa_shift(in.page.shift);
  const bool live = c_tok < static_cast<int32_t>(fa_len(seq, a.max_delta));
  const bool req_in_pool = req_fits(in, req);
  if (req_in_pool && !live && !in.zero_tail) return;
  // A bad req reads and writes nothing, and is reported last: a check between
  // the loads and the stores would split the path in two, and the compiler
  // would then form the store address only once the slot had arrived.
  const bool read = live && req_in_pool;
  // Evict-first: each slot is read once; the v2p / mapping entries read next
  // are what L2 should keep.
  const int32_t slot = read ? load_once(in.req_to_token + c_tok + req * in.req_to_token_stride) : 0;
  store_column<kPlain>(a, row, seq, req_in_pool, c, slot, read, live);
  check_req(in, row, req);
}

// Wide grids (bs * chunks past kNarrowBlocks: page size 1 at the FA3 backend's
// static width, 128k columns for a 128k model, nearly all past their rows'
// lengths): a row gets a.chunks.divisor = G blocks, and block g takes the
// row's 128-column chunks g, g + G, g + 2G, ... below its end, kWideSteps
// chunks at a time with their slots loaded together. A chunk past the end
// costs nothing, where a block of its own would be launched and retired.
template <bool kPlain, int kSlots>
__device__ void page_row(const Args<kSlots>& a, uint32_t row, uint32_t g) {
  const FaInputs& in = a.in;
  const int64_t req = in.req_pool_indices[row];
  const int64_t seq = in.seq_lens[row];
  check_req(in, row, req);
  const int64_t live_end = fa_columns(in, static_cast<int32_t>(fa_len(seq, a.max_delta)));
  const int64_t end = in.zero_tail ? in.max_seq_pages : live_end;
  const int shift = fa_shift(in.page.shift);
  const int32_t* tokens = in.req_to_token + req * in.req_to_token_stride;
  wide_columns(
      g, a.chunks.divisor, live_end, end, [&](int64_t c) { return load_once(tokens + (c << shift)); },
      [&](int64_t c, int32_t slot, bool live) {
        store_column<kPlain>(a, row, seq, true, c, slot, live, live);
      });
}

template <int kSlots>
__device__ void swa_out_block(const Args<kSlots>& a, int64_t block) {
  const FaInputs& in = a.in;
  const int64_t first = block * kOutPerBlock + threadIdx.x;
  int64_t loc[kOutPerThread];
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int64_t i = first + k * kThreads;
    loc[k] = i < in.swa_out_len ? in.out_cache_loc[i] : 0;
  }
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int64_t i = first + k * kThreads;
    if (i >= in.swa_out_len) continue;
    SGL_DEVICE_CHECK_COLD(loc[k] < in.swa_mapping_size,
                          "%s: out_cache_loc[%lld] = %lld is outside full_to_swa_index_mapping "
                          "[0, %lld)",
                          op_name(), (long long)i, (long long)loc[k],
                          (long long)in.swa_mapping_size);
    in.swa_out_cache_loc[i] = loc[k] < 0 ? -1 : in.swa_mapping.ldg(loc[k]);
  }
}

template <bool kPlain, bool kWide, int kSlots>
__global__ void __launch_bounds__(kScanThreads) metadata_kernel(const __grid_constant__ Args<kSlots> a) {
  const uint32_t b = blockIdx.x;
  if (b == 0) {
    scan_block(a);
    return;
  }
  if (kPlain || b - 1 < a.page_blocks) {  // plain: no swa_out blocks after the page blocks
    const uint32_t row = a.chunks.div(b - 1);
    if (kWide)
      page_row<kPlain>(a, row, b - 1 - row * a.chunks.divisor);
    else
      page_block<kPlain>(a, row, b - 1 - row * a.chunks.divisor);
  } else if (!kPlain) {
    swa_out_block(a, int64_t{b} - 1 - a.page_blocks);
  }
}

template <bool kWide, int kSlots>
void launch_with(Args<kSlots> a, const FaDest* sets, unsigned grid, bool plain, cudaStream_t stream) {
  for (int s = 0; s < a.num_sets; ++s) a.set[s] = sets[s];
  if (plain)
    metadata_kernel<true, kWide, kSlots><<<grid, kScanThreads, 0, stream>>>(a);
  else
    metadata_kernel<false, kWide, kSlots><<<grid, kScanThreads, 0, stream>>>(a);
}

template <int kSlots>
void launch_with(Args<kSlots> a, const FaDest* sets, unsigned grid, bool plain, bool wide,
                 cudaStream_t stream) {
  if (wide)
    launch_with<true>(a, sets, grid, plain, stream);
  else
    launch_with<false>(a, sets, grid, plain, stream);
}

const char* launch(const FaInputs& in, const FaDest* sets, int n, int first_set,
                   cudaStream_t stream) {
  int32_t max_delta = 0;
  bool any_table = false;
  for (int s = 0; s < n; ++s) {
    if (sets[s].page_table == nullptr) continue;
    max_delta = !any_table || sets[s].delta > max_delta ? sets[s].delta : max_delta;
    any_table = true;
  }
  const int64_t all_chunks =
      in.tables && any_table ? (in.max_seq_pages + kPagesPerBlock - 1) / kPagesPerBlock : 0;
  const int64_t out_blocks = (in.swa_out_len + kOutPerBlock - 1) / kOutPerBlock;
  bool wide;
  const int64_t chunks = blocks_per_row(in.bs, all_chunks, &wide);
  if (chunks > 0 && in.bs > (INT32_MAX - 1) / chunks)
    return "grid too large (bs * max_seq_pages out of range)";
  const int64_t page_blocks = in.bs * chunks;
  if (out_blocks > INT32_MAX - 1 - page_blocks)
    return "grid too large (swa_out_cache_loc too long)";
  const FastDivU32 chunk_div = FastDivU32::make(static_cast<uint32_t>(chunks > 0 ? chunks : 1));
  const unsigned grid = static_cast<unsigned>(1 + page_blocks + out_blocks);
  const bool plain = !in.full_v2p.present() && !in.swa_table && out_blocks == 0;
  const auto p = static_cast<uint32_t>(page_blocks);
  if (n == 1)
    launch_with(Args<1>{n, max_delta, first_set, chunk_div, p, in, {}}, sets, grid, plain, wide, stream);
  else
    launch_with(Args<kFaMaxSetsPerLaunch>{n, max_delta, first_set, chunk_div, p, in, {}}, sets, grid, plain,
                wide, stream);
  return nullptr;
}

// flash_attention_swa_spec_page_table: one block per (row, 256-column chunk).
constexpr int kSpecThreads = 256;

struct SpecArgs {
  FaSwaSpecParams p;
  FastDivU32 chunks;
};

__global__ void __launch_bounds__(kSpecThreads) spec_kernel(const __grid_constant__ SpecArgs a) {
  const FaSwaSpecParams& p = a.p;
  const uint32_t m = a.chunks.div(blockIdx.x);
  const uint32_t chunk = blockIdx.x - m * a.chunks.divisor;
  const int64_t la = p.seq_len_a[m / p.repeat];
  const int64_t lb = p.seq_len_b[m];
  const bool seq_len_a_in_int32_range = length_fits(la);
  SGL_DEVICE_CHECK_COLD(seq_len_a_in_int32_range,
                        "flash_attention_swa_spec_page_table: seq_len_a[%lld] = %lld is negative "
                        "or does not fit int32",
                        (long long)(m / p.repeat), (long long)la);
  const bool seq_len_b_in_int32_range = length_fits(lb);
  SGL_DEVICE_CHECK_COLD(seq_len_b_in_int32_range,
                        "flash_attention_swa_spec_page_table: seq_len_b[%u] = %lld is negative "
                        "or does not fit int32",
                        m, (long long)lb);
  const int64_t n_end = min_i64(la + lb, p.width);
  const int64_t n = int64_t{chunk} * kSpecThreads + threadIdx.x;
  if (n < n_end) p.dst[m * p.dst_stride + n] = fa_spec_value(p, m, n, la);
}

// flash_attention_verify_expand: one block of 128 threads (up to 128 rows: bs
// 32 with 4 draft tokens, one pass, short scans) or 1024 (bs 256 in one pass).
constexpr int kExpandSmall = 128, kExpandLarge = 1024;
// Draft tokens whose mask entries and slots a thread loads before it uses any.
constexpr int kExpandChunk = 8;

__device__ __forceinline__ const char* expand_name() { return "flash_attention_verify_expand"; }

// Row r's columns: token j goes among the masked-in tokens before it, or
// after all of them among the masked-out ones.
__device__ __forceinline__ void expand_store(int32_t* out, uint64_t in, uint32_t count, int64_t j, int32_t slot) {
  const auto before = static_cast<uint32_t>(__popcll(in & ((uint64_t{1} << j) - 1)));
  out[(in >> j) & 1u ? before : count + static_cast<uint32_t>(j) - before] = slot;
}

template <int kThreadsT>
__global__ void __launch_bounds__(kThreadsT) expand_kernel(const __grid_constant__ FaVerifyExpandParams p) {
  // Warp scans, not CUB's default raking: the launch is one block on an idle
  // GPU, where warp scans take fewer barriers, and at 1024 threads (64
  // registers a thread) raking's extra state spilled to local memory.
  using ScanU64 = cub::BlockScan<uint64_t, kThreadsT, cub::BLOCK_SCAN_WARP_SCANS>;
  using ScanU32 = cub::BlockScan<uint32_t, kThreadsT, cub::BLOCK_SCAN_WARP_SCANS>;
  __shared__ union {
    typename ScanU64::TempStorage u64;
    typename ScanU32::TempStorage u32;
  } scan;
  const int64_t rows = p.bs * p.n;
  if (threadIdx.x == 0) p.cu_seqlens_k[0] = 0;
  uint64_t base_carry = 0;
  uint32_t cu_carry = 0;
  for (int64_t first = 0; first < rows; first += kThreadsT) {
    const int64_t r = first + threadIdx.x;
    const bool live = r < rows;
    const int64_t b = live ? r / p.n : 0;
    const int64_t seq = live ? p.seq_lens[b] : 0;
    const int64_t req = live ? p.req_pool_indices[b] : 0;
    // Every row's mask offset sums the lengths before it: no row reads before
    // every length of the pass is known good (a bad one asserts, the block
    // stops). Then every offset lies in [0, 2**63).
    const bool bad = live && !(length_fits(seq) && req >= 0 && req < p.pool_size && seq + p.n <= p.ctx);
    if (__syncthreads_or(bad)) {
      if (bad) {
        SGL_DEVICE_CHECK_COLD(length_fits(seq), "%s: seq_lens[%lld] = %lld is negative or does not fit int32",
                              expand_name(), (long long)b, (long long)seq);
        SGL_DEVICE_CHECK_COLD(req >= 0 && req < p.pool_size,
                              "%s: req_pool_indices[%lld] = %lld is outside [0, req_to_token.size(0) = %lld)",
                              expand_name(), (long long)b, (long long)req, (long long)p.pool_size);
        SGL_DEVICE_CHECK_COLD(seq + p.n <= p.ctx,
                              "%s: seq_lens[%lld] + num_draft_tokens = %lld is past the req_to_token row "
                              "(req_to_token.size(1) = %lld)",
                              expand_name(), (long long)b, (long long)(seq + p.n), (long long)p.ctx);
      }
      return;
    }
    uint64_t base, base_total;
    ScanU64(scan.u64).ExclusiveSum(live ? static_cast<uint64_t>(seq) + static_cast<uint64_t>(p.n) : 0u, base,
                                   base_total);
    __syncthreads();  // the scan storage is reused
    uint32_t count = 0;
    if (live) {
      const int64_t at = static_cast<int64_t>(base_carry + base);
      const int64_t last = fa_mask_index(p, r, at, seq, p.n - 1);
      SGL_DEVICE_CHECK_COLD(last < p.mask_size, "%s: custom_mask index %lld (row %lld) is outside custom_mask [0, %lld)",
                            expand_name(), (long long)last, (long long)r, (long long)p.mask_size);
      const auto* mask = reinterpret_cast<const unsigned char*>(p.custom_mask) + fa_mask_index(p, r, at, seq, 0);
      const int64_t step = r < p.mask_rows ? 1 : 0;
      const int32_t* tokens = p.req_to_token + req * p.req_to_token_stride + seq;
      // The first chunk's mask entries and slots in one round of loads (every
      // row, for up to kExpandChunk draft tokens); later chunks' masks, then
      // later chunks' slots.
      int32_t slot[kExpandChunk];
      unsigned char m[kExpandChunk];
#pragma unroll
      for (int u = 0; u < kExpandChunk; ++u) {
        m[u] = u < p.n ? __ldg(mask + u * step) : 0;
        slot[u] = u < p.n ? __ldg(tokens + u) : 0;
      }
      uint64_t in = 0;
#pragma unroll
      for (int u = 0; u < kExpandChunk; ++u) in |= uint64_t{m[u] != 0} << u;
      for (int64_t j0 = kExpandChunk; j0 < p.n; j0 += kExpandChunk) {
#pragma unroll
        for (int u = 0; u < kExpandChunk; ++u) m[u] = j0 + u < p.n ? __ldg(mask + (j0 + u) * step) : 0;
#pragma unroll
        for (int u = 0; u < kExpandChunk; ++u) in |= uint64_t{m[u] != 0} << (j0 + u);
      }
      count = static_cast<uint32_t>(__popcll(in));
      int32_t* out = p.page_table + r * p.page_table_stride;
#pragma unroll
      for (int u = 0; u < kExpandChunk; ++u)
        if (u < p.n) expand_store(out, in, count, u, slot[u]);
      for (int64_t j0 = kExpandChunk; j0 < p.n; j0 += kExpandChunk) {
#pragma unroll
        for (int u = 0; u < kExpandChunk; ++u) slot[u] = j0 + u < p.n ? __ldg(tokens + j0 + u) : 0;
#pragma unroll
        for (int u = 0; u < kExpandChunk; ++u)
          if (j0 + u < p.n) expand_store(out, in, count, j0 + u, slot[u]);
      }
    }
    uint32_t cu, cu_total;
    ScanU32(scan.u32).InclusiveSum(count, cu, cu_total);
    if (live) {
      p.cache_seqlens[r] = static_cast<int32_t>(count);
      p.cu_seqlens_k[r + 1] = static_cast<int32_t>(cu_carry + cu);
    }
    base_carry += base_total;
    cu_carry += cu_total;
    __syncthreads();
  }
}

// flash_attention_draft_decode_topk
constexpr int kDraftThreads = 128;
constexpr int64_t kDraftColumns = kDraftThreads;  // one prefix column per thread
static_assert(kDraftColumns == kPagesPerBlock, "the prefix tables' looping blocks walk with wide_columns");
constexpr int kDraftChunk = 8;  // draft slots a row loads before it stores any

struct DraftArgs {
  FastDivU32 chunks;
  uint32_t page_blocks;
  FaDraftTopkParams p;
};

__device__ __forceinline__ const char* draft_name() { return "flash_attention_draft_decode_topk"; }

__device__ __forceinline__ void check_draft_req(const FaDraftTopkParams& p, int64_t b, int64_t req) {
  SGL_DEVICE_CHECK_COLD(req_fits(p, req),
                        "%s: req_pool_indices[%lld] = %lld is outside [0, req_to_token.size(0) = %lld)",
                        draft_name(), (long long)b, (long long)req, (long long)p.pool_size);
}

__device__ void draft_page_block(const FaDraftTopkParams& p, uint32_t b, uint32_t chunk) {
  const int64_t c = int64_t{chunk} * kDraftColumns + threadIdx.x;
  const int shift = fa_shift(p.page.shift);
  const int64_t req = p.req_pool_indices[b];
  const int64_t seq = p.seq_lens[b];
  // A hostile length writes nothing here; the row thread reports it.
  if (c >= (length_fits(seq) ? fa_draft_columns(p, seq) : 0)) return;
  check_draft_req(p, b, req);
  const int32_t page = fa_page(load_once(p.req_to_token + req * p.req_to_token_stride + (c << shift)), shift);
  for (int s = 0; s < p.num_sets; ++s) p.set[s].page_table[b * p.set[s].page_table_stride + c] = page;
}

// Past kNarrowBlocks (page size 1 at the backend's static width): G blocks per
// request, each over every G-th chunk below its prefix length (page_row).
__device__ void draft_page_row(const FaDraftTopkParams& p, uint32_t b, uint32_t g, uint32_t blocks_per_row) {
  const int shift = fa_shift(p.page.shift);
  const int64_t req = p.req_pool_indices[b];
  const int64_t seq = p.seq_lens[b];
  const int64_t end = length_fits(seq) ? fa_draft_columns(p, seq) : 0;
  if (end > 0) check_draft_req(p, b, req);
  const int32_t* tokens = p.req_to_token + req * p.req_to_token_stride;
  wide_columns(
      g, blocks_per_row, end, end,
      [&](int64_t c) { return fa_page(load_once(tokens + (c << shift)), shift); },
      [&](int64_t c, int32_t page, bool) {
        for (int s = 0; s < p.num_sets; ++s) p.set[s].page_table[b * p.set[s].page_table_stride + c] = page;
      });
}

__device__ void draft_row(const FaDraftTopkParams& p, int64_t r) {
  const int64_t b = r / p.topk;
  const int64_t seq = p.seq_lens[b];
  SGL_DEVICE_CHECK_COLD(length_fits(seq), "%s: seq_lens[%lld] = %lld is negative or does not fit int32",
                        draft_name(), (long long)b, (long long)seq);
  const int32_t last = fa_last_page_len(seq, p.page.shift);
  SGL_DEVICE_CHECK_COLD(p.set[0].expand_cache_seqlens == nullptr || last <= INT32_MAX - p.max_decode_length,
                        "%s: seq_lens[%lld] mod page_size + decode_length does not fit int32 "
                        "expand_cache_seqlens",
                        draft_name(), (long long)b);
  if (r - b * p.topk == 0) {  // the request's first branch writes its prefix length
    check_draft_req(p, b, p.req_pool_indices[b]);
    for (int s = 0; s < p.num_sets; ++s) p.set[s].cache_seqlens[b] = static_cast<int32_t>(seq - last);
  }
  const bool paged = p.page.page_size > 1;
  const int64_t first = r * p.num_steps;
  int64_t pos = 0, prev = 0;
  for (int j0 = 0; j0 < p.max_decode_length; j0 += kDraftChunk) {
    int64_t entry[kDraftChunk];
#pragma unroll
    for (int u = 0; u < kDraftChunk; ++u)
      entry[u] = j0 + u < p.max_decode_length ? p.out_cache_loc[first + j0 + u] : 0;
#pragma unroll
    for (int u = 0; u < kDraftChunk; ++u) {
      const int j = j0 + u;
      if (j >= p.max_decode_length) break;
      const int64_t slot = entry[u], e = p.page.div(slot);
      SGL_DEVICE_CHECK_COLD(e >= INT32_MIN && e <= INT32_MAX,
                            "%s: out_cache_loc[%lld] = %lld gives an expand_page_table entry outside int32",
                            draft_name(), (long long)(first + j), (long long)slot);
      if (paged && j > 0 && e != prev) ++pos;
      prev = e;
      const int64_t col = paged ? pos : j;
      for (int s = 0; s < p.num_sets; ++s)
        if (j < p.set[s].decode_length)
          p.set[s].expand_page_table[r * p.set[s].expand_page_table_stride + col] = static_cast<int32_t>(e);
    }
  }
  for (int s = 0; s < p.num_sets; ++s)
    if (p.set[s].expand_cache_seqlens != nullptr) p.set[s].expand_cache_seqlens[r] = p.set[s].decode_length + last;
}

template <bool kWide>
__global__ void __launch_bounds__(kDraftThreads) draft_topk_kernel(const __grid_constant__ DraftArgs a) {
  const uint32_t blk = blockIdx.x;
  if (blk < a.page_blocks) {
    const uint32_t b = a.chunks.div(blk);
    if (kWide)
      draft_page_row(a.p, b, blk - b * a.chunks.divisor, a.chunks.divisor);
    else
      draft_page_block(a.p, b, blk - b * a.chunks.divisor);
    return;
  }
  const int64_t r = int64_t{blk - a.page_blocks} * kDraftThreads + threadIdx.x;
  if (r < a.p.bs * a.p.topk) draft_row(a.p, r);
}

}  // namespace

const char* flash_attention_metadata_cuda(const FaInputs& in, const FaDest* sets, int num_sets,
                                          void* stream_ptr) {
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  for (int first = 0; first < num_sets; first += kFaMaxSetsPerLaunch) {
    const int n = num_sets - first < kFaMaxSetsPerLaunch ? num_sets - first : kFaMaxSetsPerLaunch;
    FaInputs part = in;
    if (first > 0) {  // written once, by the first launch
      part.cu_seqlens_q = nullptr;
      part.extend_seq_lens = IndexArray{};
      part.swa_out_cache_loc = nullptr;
      part.swa_out_len = 0;
    }
    const char* err = launch(part, sets + first, n, first, stream);
    if (err != nullptr) return err;
    const cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return cudaGetErrorString(e);
  }
  return nullptr;
}

const char* flash_attention_swa_spec_page_table_cuda(const FaSwaSpecParams& p,
                                                     void* stream_ptr) {
  const int64_t chunks = p.width == 0 ? 0 : (p.width + kSpecThreads - 1) / kSpecThreads;
  if (chunks == 0) return nullptr;
  if (p.rows > INT32_MAX / chunks) return "grid too large (rows * width out of range)";
  SpecArgs a{p, FastDivU32::make(static_cast<uint32_t>(chunks))};
  const unsigned grid = static_cast<unsigned>(p.rows * chunks);
  spec_kernel<<<grid, kSpecThreads, 0, static_cast<cudaStream_t>(stream_ptr)>>>(a);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* flash_attention_verify_expand_cuda(const FaVerifyExpandParams& p, void* stream_ptr) {
  if (p.bs * p.n == 0) return nullptr;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (p.bs * p.n <= kExpandSmall)
    expand_kernel<kExpandSmall><<<1, kExpandSmall, 0, stream>>>(p);
  else
    expand_kernel<kExpandLarge><<<1, kExpandLarge, 0, stream>>>(p);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

const char* flash_attention_draft_decode_topk_cuda(const FaDraftTopkParams& p, void* stream_ptr) {
  const int64_t all_chunks = p.max_seq_pages > 0 ? (p.max_seq_pages + kDraftColumns - 1) / kDraftColumns : 0;
  bool wide;
  const int64_t chunks = blocks_per_row(p.bs, all_chunks, &wide);
  const int64_t rows = p.bs * p.topk;
  const int64_t row_blocks = (rows + kDraftThreads - 1) / kDraftThreads;
  if (row_blocks > INT32_MAX || (chunks > 0 && p.bs > (INT32_MAX - row_blocks) / chunks))
    return "grid too large (bs * max_seq_pages out of range)";
  const int64_t page_blocks = p.bs * chunks;
  if (page_blocks + row_blocks == 0) return nullptr;
  DraftArgs a{FastDivU32::make(static_cast<uint32_t>(chunks > 0 ? chunks : 1)), static_cast<uint32_t>(page_blocks), p};
  const auto grid = static_cast<unsigned>(page_blocks + row_blocks);
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (wide)
    draft_topk_kernel<true><<<grid, kDraftThreads, 0, stream>>>(a);
  else
    draft_topk_kernel<false><<<grid, kDraftThreads, 0, stream>>>(a);
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace sgl_meta
