// vLLM 0.33 per-step metadata (Model Runner V2): the argument bundle of the
// "step" kernel shared by vllm_compute_slot_mappings, vllm_gather_block_tables,
// vllm_prepare_pos_seq_lens and vllm_prepare_step (one kernel, parts switched
// on by the op), and the row/token formulas the CPU and CUDA kernels share.
//
// With n = idx_mapping.numel(), for row b < n: req = idx_mapping[b] (-1: a row
// that owns no request state), start/end = query_start_loc[b], [b + 1],
// c = req == -1 ? 0 : num_computed_tokens[req]:
//
//   seq_lens[b] = c + end - start;  pos[start + i] = c + i;  seq_lens[n:] = 0
//   dst[g][b, j] = j < null ? 0 : src[g][req, j]        for j < num_blocks[g, req]
//     null = reach_g > 0 ? max(c - reach_g, 0) / bs_g : 0   (masking only)
//   dst[g][b, :] = 0        for n <= b < num_rows, and for req == -1
//   slot[g, t] = src[g][req, lp / bs_g] * bs_g + lp % bs_g  for t in [start, end)
//     (lp: the position local to this context-parallel rank; pad_id when the
//      group is disabled, req == -1, or the token is another rank's)
//   slot[g, t] = pad_id     for query_start_loc[n] <= t < T
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

constexpr int kVllmMaxGroups = 32;
constexpr int64_t kVllmNoRequest = -1;  // idx_mapping's sentinel

// Which op runs the step kernel (its name in error messages).
enum VllmStepOp : int {
  kVllmSlotMappings = 0,
  kVllmGatherBlockTables = 1,
  kVllmPreparePosSeqLens = 2,
  kVllmPrepareStep = 3,
};

SGL_HD const char* vllm_step_op_name(int op) {
  switch (op) {
    case kVllmSlotMappings: return "vllm_compute_slot_mappings";
    case kVllmGatherBlockTables: return "vllm_gather_block_tables";
    case kVllmPreparePosSeqLens: return "vllm_prepare_pos_seq_lens";
    default: return "vllm_prepare_step";
  }
}

// One KV-cache group's tables.
struct VllmGroup {
  const int32_t* src = nullptr;  // [src_rows, src_cols], rows by src_stride
  int64_t src_stride = 0;
  int64_t src_cols = 0;
  int32_t* dst = nullptr;  // [>= num_rows, dst_cols] (gather), rows by dst_stride
  int64_t dst_stride = 0;
  int64_t dst_cols = 0;
  const int32_t* num_blocks = nullptr;  // row g of num_blocks (gather)
};

struct VllmStepParams {
  // Ordered so the fields the positions / seq_lens rows read after the
  // computed count's return (seq_lens, pos, pos64) share each 32-byte piece
  // of the parameter bank with a field every row reads before its loads
  // return (n, idx_mapping, query_start_loc, req_limit, token_cap,
  // num_computed_tokens): ptxas places a parameter read at its use, and these
  // find their piece of the constant bank already fetched.
  int64_t n = 0;              // idx_mapping.numel()
  int32_t* seq_lens = nullptr;
  IndexArray idx_mapping;     // [n]
  void* pos = nullptr;  // int32 or int64
  int op = kVllmPrepareStep;
  int groups = 0;
  IndexArray query_start_loc; // [>= n + 1] (tokens: slots or pos)
  // Every value a row reads by `req` lies in [0, req_limit): the request rows
  // of every table and array indexed by it.
  int64_t req_limit = 0;
  // query_start_loc values may not pass it (the token outputs and positions).
  int64_t token_cap = 0;
  IndexArray num_computed_tokens;  // [max_num_reqs] or absent
  int64_t seq_lens_size = 0;
  bool write_pos = false;
  bool pos64 = false;
  bool positions_given = false;  // (an empty tensor may have no data pointer)
  bool gather = false;
  bool mask_sliding_window = false;
  bool slots = false;

  // The slot mappings read positions from `positions` when given, else
  // compute them as pos receives them (c + t - start).
  IndexArray positions;
  const int32_t* block_sizes = nullptr;            // [>= G] (slots; masking)
  const bool* slot_mapping_enabled = nullptr;      // [>= G] (slots)
  const bool* dcp_sharded = nullptr;               // [>= G] (slots, cp_size > 1)
  const int32_t* sliding_window_reach = nullptr;   // [>= G] (masking)

  int64_t num_rows = 0;  // (gather)

  int64_t* slot_mappings = nullptr;  // [>= G, slot_cols], rows by slot_stride
  int64_t slot_stride = 0;
  int64_t slot_cols = 0;
  int64_t cp_rank = 0, cp_size = 1, cp_interleave = 1, pad_id = -1;

  // Last: the scalars above sit together at the front of the parameter bank,
  // and group g's entry after them.
  VllmGroup group[kVllmMaxGroups];

  // Needs each row's computed-token count.
  SGL_HD bool reads_computed() const {
    return write_pos || (slots && !positions_given) || (gather && mask_sliding_window);
  }
  // Reads each row's query range.
  SGL_HD bool reads_tokens() const { return write_pos || slots; }
};

// What a check found wrong (kVllmOk: nothing). The CPU kernel and the CUDA
// kernel's failure path word each the same way.
enum VllmFault : int {
  kVllmOk = 0,
  kVllmBadRequest,     // idx_mapping[b] outside [-1, req_limit)
  kVllmBadQueryStart,  // query_start_loc negative, decreasing or past token_cap
  kVllmBadComputed,    // num_computed_tokens[req] negative
  kVllmBadSeqLen,      // c + query length past int32
  kVllmBadPosition,    // positions[t] negative
  kVllmBadBlockSize,   // block_sizes[g] < 1
  kVllmBadBlockColumn, // lp / bs past block_tables[g].size(1)
  kVllmBadNumBlocks,   // num_blocks[g, req] outside [0, min(src, dst width)]
};

// Division by a block size read on the device (>= 1): a shift for powers of two.
SGL_HD int64_t vllm_div(int64_t v, int64_t d) {
  if ((d & (d - 1)) == 0) {
#ifdef __CUDA_ARCH__
    return v >> (__ffsll(d) - 1);
#else
    return v >> __builtin_ctzll(static_cast<unsigned long long>(d));
#endif
  }
  return v / d;
}

// Position local to this rank (vLLM's context-parallel interleave), and
// whether the token is this rank's. cp_size == 1 or an unsharded group: the
// position itself.
SGL_HD int64_t vllm_local_position(const VllmStepParams& p, bool sharded, int64_t pos, int64_t bs,
                                   bool* local) {
  *local = true;
  if (p.cp_size == 1 || !sharded) return pos;
  const int64_t virtual_size = bs * p.cp_size;
  const int64_t vblock = pos / virtual_size, voff = pos % virtual_size;
  *local = (voff / p.cp_interleave) % p.cp_size == p.cp_rank;
  const int64_t rounds = voff / (p.cp_interleave * p.cp_size);
  return vblock * bs + rounds * p.cp_interleave + voff % p.cp_interleave;
}

// One row's scalars, read and checked (fault says what failed; `value` the
// offending value, `at` its index).
struct VllmRow {
  int64_t req = kVllmNoRequest;
  int64_t start = 0, end = 0;
  int64_t computed = 0;
  VllmFault fault = kVllmOk;
  int64_t value = 0, at = 0;
};

SGL_HD bool vllm_request_in_range(const VllmStepParams& p, int64_t req) {
  return req >= 0 && req < p.req_limit;
}

// The row checks one at a time (vllm_row_fault words the first that fails;
// the CUDA kernel's hot path tests them as one predicate).
// idx_mapping[b]: a request row, or -1.
SGL_HD bool vllm_request_ok(int64_t req, int64_t req_limit) {
  return req == kVllmNoRequest || (req >= 0 && req < req_limit);
}
// A query range [start, end) inside the token buffers.
SGL_HD bool vllm_query_range_ok(int64_t start, int64_t end, int64_t token_cap) {
  return start >= 0 && end >= start && end <= token_cap;
}
// A computed count c >= 0 and, with tokens, seq_len = c + query length
// inside int32 (len: the query length of a range that passed its check).
SGL_HD bool vllm_computed_ok(int64_t c, int64_t len, bool tokens) {
  return c >= 0 && (!tokens || (length_fits(c) && length_fits(c + len)));
}

// What is wrong with row b's values, checked in the order the CPU kernel
// reports them (kVllmOk: nothing; `value` the offending value, `at` its index).
// `tokens` / `computed`: whether the row read its query range / its
// computed-token count.
SGL_HD VllmFault vllm_row_fault(int64_t req_limit, int64_t token_cap, const VllmRow& r, int64_t b, bool tokens,
                                bool computed, int64_t* value, int64_t* at) {
  if (!vllm_request_ok(r.req, req_limit)) return *value = r.req, *at = b, kVllmBadRequest;
  if (!vllm_query_range_ok(r.start, r.end, token_cap)) {
    *value = r.start < 0 ? r.start : r.end, *at = r.start < 0 ? b : b + 1;
    return kVllmBadQueryStart;
  }
  if (!computed) return kVllmOk;
  if (r.computed < 0) return *value = r.computed, *at = r.req, kVllmBadComputed;
  // (a row without a request counts from 0: its seq_len is its query length)
  if (!vllm_computed_ok(r.computed, r.end - r.start, tokens))
    return *value = r.computed + (r.end - r.start), *at = b, kVllmBadSeqLen;
  return kVllmOk;
}

// A row's index array read without the dtype select where the CUDA kernel's
// instantiation knows its dtype (kBits 32 or 64; 0: either).
template <int kBits>
SGL_HD int64_t vllm_index(const IndexArray& a, int64_t i) {
  if constexpr (kBits == 32) return static_cast<const int32_t*>(a.data)[i];
  if constexpr (kBits == 64) return static_cast<const int64_t*>(a.data)[i];
  return a[i];
}

// The dtypes vLLM 0.33 passes the row's index arrays in: idx_mapping int64,
// query_start_loc and num_computed_tokens int32; and positions int64.
SGL_HD bool vllm_has_vllm_dtypes(const VllmStepParams& p) {
  return p.idx_mapping.is64 && !p.query_start_loc.is64 && !p.num_computed_tokens.is64 && p.pos64;
}

// `tokens`: read the row's query range; `computed`: its computed-token count
// (the kernels pass p.reads_tokens() / p.reads_computed(), the CUDA kernel as
// constants where its instantiation fixes them). The loads come before any
// branch, and the computed count is read as soon as the request index is, only
// for an index inside the tables: on a GPU the row costs two dependent loads.
// vllm_load_row reads and leaves `fault` unset (the CUDA kernel checks the row
// later, with the checks above as one predicate, beside its first stores);
// vllm_read_row also checks. The fields are the loaded values whatever the checks find.
// kVllmDtypes: the arrays are in vllm_has_vllm_dtypes's dtypes.
template <bool kVllmDtypes = false>
SGL_HD VllmRow vllm_load_row(const VllmStepParams& p, int64_t b, bool tokens, bool computed) {
  constexpr int kReq = kVllmDtypes ? 64 : 0, kTok = kVllmDtypes ? 32 : 0;
  VllmRow r;
  r.req = vllm_index<kReq>(p.idx_mapping, b);
  r.start = tokens ? vllm_index<kTok>(p.query_start_loc, b) : 0;
  r.end = tokens ? vllm_index<kTok>(p.query_start_loc, b + 1) : 0;
  // A load at a safe index, then a select (not a branch around the load):
  // every table indexed by req has req_limit rows.
  const bool in_range = vllm_request_in_range(p, r.req);
  const int64_t c = computed && p.req_limit > 0 ? vllm_index<kTok>(p.num_computed_tokens, in_range ? r.req : 0) : 0;
  r.computed = in_range ? c : 0;
  return r;
}

SGL_HD VllmRow vllm_read_row(const VllmStepParams& p, int64_t b, bool tokens, bool computed) {
  VllmRow r = vllm_load_row(p, b, tokens, computed);
  r.fault = vllm_row_fault(p.req_limit, p.token_cap, r, b, tokens, computed, &r.value, &r.at);
  return r;
}

SGL_HD VllmRow vllm_read_row(const VllmStepParams& p, int64_t b) {
  return vllm_read_row(p, b, p.reads_tokens(), p.reads_computed());
}

// Group g's per-group values, read once per block (the row's loads need none
// of them).
struct VllmGroupScalars {
  int64_t block_size = 1;  // block_sizes[g] (slots; masking)
  bool enabled = false;    // slot_mapping_enabled[g]
  bool sharded = false;    // dcp_sharded[g] (cp_size > 1)
  int64_t reach = 0;       // sliding_window_reach[g] (masking)
};

SGL_HD VllmGroupScalars vllm_group_scalars(const VllmStepParams& p, int g) {
  VllmGroupScalars s;
  if (g >= p.groups) return s;
  const bool mask = p.gather && p.mask_sliding_window;
  s.block_size = p.slots || mask ? p.block_sizes[g] : 1;
  s.enabled = p.slots && p.slot_mapping_enabled[g];
  s.sharded = p.slots && p.cp_size > 1 && p.dcp_sharded[g];
  s.reach = mask ? p.sliding_window_reach[g] : 0;
  return s;
}

// query_start_loc[n], where the padded token tail starts.
SGL_HD VllmFault vllm_check_tail(const VllmStepParams& p, int64_t* tail_start) {
  *tail_start = p.query_start_loc[p.n];
  return vllm_query_range_ok(*tail_start, *tail_start, p.token_cap) ? kVllmOk : kVllmBadQueryStart;
}

// Token t's position: positions[t] when given, else as pos receives it.
SGL_HD int64_t vllm_token_position(const VllmStepParams& p, const VllmRow& r, int64_t t) {
  return p.positions_given ? p.positions[t] : r.computed + (t - r.start);
}

// Where a token's slot comes from: pad_id, or entry `col` of its request's row
// in group g's table (slot = entry * block_size + off), or a fault (`value`:
// the offending value). Arithmetic only: the table read is the caller's, so a
// GPU thread can issue several tokens' reads together.
struct VllmSlotSource {
  VllmFault fault = kVllmOk;
  bool read = false;
  int64_t col = 0, off = 0, value = 0;
};

// kMayShard false: the caller knows no group is context-parallel sharded
// (cp_size == 1), and the CUDA kernel then carries no rank arithmetic.
// active false: no token (the CUDA kernel's unrolled tail): pad_id, no read.
template <bool kMayShard = true>
SGL_HD VllmSlotSource vllm_slot_source(const VllmStepParams& p, const VllmRow& r, int g,
                                       const VllmGroupScalars& gs, int64_t pos, bool active = true) {
  VllmSlotSource s;
  if (!active || r.req == kVllmNoRequest || !gs.enabled) return s;
  if (pos < 0) return s.fault = kVllmBadPosition, s.value = pos, s;
  const int64_t bs = gs.block_size;
  if (bs < 1) return s.fault = kVllmBadBlockSize, s.value = bs, s;
  bool local = true;
  const int64_t lp = kMayShard ? vllm_local_position(p, gs.sharded, pos, bs, &local) : pos;
  if (!local) return s;
  const int64_t col = vllm_div(lp, bs);
  if (col >= p.group[g].src_cols) return s.fault = kVllmBadBlockColumn, s.value = col, s;
  s.read = true, s.col = col, s.off = lp - col * bs;
  return s;
}

// The slot of a source whose table entry (when s.read) is `entry`.
SGL_HD int64_t vllm_slot_value(const VllmStepParams& p, const VllmGroupScalars& gs, const VllmSlotSource& s,
                               int32_t entry) {
  return s.read ? static_cast<int64_t>(entry) * gs.block_size + s.off : p.pad_id;
}

// Blocks gathered for row r in group g (num_blocks[g, req] = `blocks`) and the
// leading ones nulled, or a fault.
SGL_HD VllmFault vllm_gather_span(const VllmStepParams& p, const VllmRow& r, int g, const VllmGroupScalars& gs,
                                  int64_t blocks, int64_t* count, int64_t* null, int64_t* value) {
  const VllmGroup& grp = p.group[g];
  *count = blocks;
  *null = 0;
  if (*count < 0 || *count > grp.src_cols || *count > grp.dst_cols) return *value = *count, kVllmBadNumBlocks;
  if (p.mask_sliding_window && gs.reach > 0) {
    if (gs.block_size < 1) return *value = gs.block_size, kVllmBadBlockSize;
    *null = r.computed > gs.reach ? vllm_div(r.computed - gs.reach, gs.block_size) : 0;
  }
  return kVllmOk;
}

// CPU kernel: checks every value it will read first (std::runtime_error naming
// the op, the argument and the value), then writes.
void vllm_step_cpu(const VllmStepParams& p);
// CUDA launcher; nullptr on success, else the error text.
const char* vllm_step_cuda(const VllmStepParams& p, void* stream);

}  // namespace sgl_meta
