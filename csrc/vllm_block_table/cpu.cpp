// The vLLM step kernel on CPU (vllm_compute_slot_mappings, vllm_gather_block_tables,
// vllm_prepare_pos_seq_lens, vllm_prepare_step): same results as the CUDA
// kernel; every hostile value it reads raises std::runtime_error before
// anything is written, where CUDA trips a device-side assert.

#include "common/errors.h"
#include "vllm_block_table/params.h"

namespace sgl_meta {
namespace {

void fail_row(const VllmStepParams& p, const VllmRow& r) {
  const char* op = vllm_step_op_name(p.op);
  switch (r.fault) {
    case kVllmBadRequest:
      raise_error(op, "idx_mapping[", r.at, "] = ", r.value, " is outside [-1, ", p.req_limit,
                  ") (the request rows of the tables it indexes)");
    case kVllmBadQueryStart:
      raise_error(op, "query_start_loc[", r.at, "] = ", r.value,
                  " is negative, decreasing or past the token buffers (", p.token_cap, " tokens)");
    case kVllmBadComputed:
      raise_error(op, "num_computed_tokens[", r.at, "] = ", r.value, " is negative");
    case kVllmBadSeqLen:
      raise_error(op, "num_computed_tokens + query length of row ", r.at, " = ", r.value,
                  " does not fit int32 seq_lens");
    default: return;
  }
}

void fail_group(const VllmStepParams& p, VllmFault f, int g, int64_t b, int64_t t, int64_t value) {
  const char* op = vllm_step_op_name(p.op);
  switch (f) {
    case kVllmBadPosition:
      raise_error(op, "positions[", t, "] = ", value, " is negative");
    case kVllmBadBlockSize:
      raise_error(op, "block_sizes[", g, "] = ", value, " is < 1");
    case kVllmBadBlockColumn:
      raise_error(op, "position of token ", t, " (row ", b, ") reads block column ", value,
                  ", past block_tables[", g, "].size(1) = ", p.group[g].src_cols);
    case kVllmBadNumBlocks:
      raise_error(op, "num_blocks[", g, ", ", p.idx_mapping[b], "] = ", value, " (row ", b,
                  ") is outside [0, the block tables' width]");
    default: return;
  }
}

// Runs every check the writes below depend on.
void check_all(const VllmStepParams& p) {
  for (int64_t b = 0; b < p.n; ++b) {
    const VllmRow r = vllm_read_row(p, b);
    if (r.fault != kVllmOk) fail_row(p, r);
    if (r.req == kVllmNoRequest) continue;
    for (int g = 0; g < p.groups; ++g) {
      int64_t value = 0;
      const VllmGroupScalars gs = vllm_group_scalars(p, g);
      if (p.slots)
        for (int64_t t = r.start; t < r.end; ++t) {
          const VllmSlotSource s = vllm_slot_source(p, r, g, gs, vllm_token_position(p, r, t));
          if (s.fault != kVllmOk) fail_group(p, s.fault, g, b, t, s.value);
        }
      if (p.gather && b < p.num_rows) {
        int64_t count, null;
        const VllmFault f = vllm_gather_span(p, r, g, gs, p.group[g].num_blocks[r.req], &count, &null, &value);
        if (f != kVllmOk) fail_group(p, f, g, b, 0, value);
      }
    }
  }
  int64_t tail = 0;
  if (p.reads_tokens() && vllm_check_tail(p, &tail) != kVllmOk)
    raise_error(vllm_step_op_name(p.op), "query_start_loc[", p.n, "] = ", tail,
                " is negative or past the token buffers (", p.token_cap, " tokens)");
}

}  // namespace

void vllm_step_cpu(const VllmStepParams& p) {
  check_all(p);
  for (int64_t b = 0; b < p.n; ++b) {
    const VllmRow r = vllm_read_row(p, b);
    if (p.write_pos) {
      p.seq_lens[b] = static_cast<int32_t>(r.computed + (r.end - r.start));
      for (int64_t t = r.start; t < r.end; ++t) {
        const int64_t v = r.computed + (t - r.start);
        if (p.pos64)
          static_cast<int64_t*>(p.pos)[t] = v;
        else
          static_cast<int32_t*>(p.pos)[t] = static_cast<int32_t>(v);
      }
    }
    for (int g = 0; g < p.groups; ++g) {
      const VllmGroup& grp = p.group[g];
      const VllmGroupScalars gs = vllm_group_scalars(p, g);
      int64_t value = 0;
      if (p.slots) {
        int64_t* out = p.slot_mappings + g * p.slot_stride;
        for (int64_t t = r.start; t < r.end; ++t) {
          const VllmSlotSource s = vllm_slot_source(p, r, g, gs, vllm_token_position(p, r, t));
          out[t] = vllm_slot_value(p, gs, s, s.read ? grp.src[r.req * grp.src_stride + s.col] : 0);
        }
      }
      if (p.gather && b < p.num_rows) {
        int32_t* dst = grp.dst + b * grp.dst_stride;
        if (r.req == kVllmNoRequest) {
          for (int64_t j = 0; j < grp.dst_cols; ++j) dst[j] = 0;
          continue;
        }
        int64_t count, null;
        vllm_gather_span(p, r, g, gs, grp.num_blocks[r.req], &count, &null, &value);
        const int32_t* src = grp.src + r.req * grp.src_stride;
        for (int64_t j = 0; j < count; ++j) dst[j] = j < null ? 0 : src[j];
      }
    }
  }
  if (p.gather)
    for (int g = 0; g < p.groups; ++g)
      for (int64_t b = p.n; b < p.num_rows; ++b) {
        int32_t* dst = p.group[g].dst + b * p.group[g].dst_stride;
        for (int64_t j = 0; j < p.group[g].dst_cols; ++j) dst[j] = 0;
      }
  if (p.write_pos)
    for (int64_t b = p.n; b < p.seq_lens_size; ++b) p.seq_lens[b] = 0;
  if (p.slots) {
    int64_t tail = 0;
    vllm_check_tail(p, &tail);
    for (int g = 0; g < p.groups; ++g)
      for (int64_t t = tail; t < p.slot_cols; ++t) p.slot_mappings[g * p.slot_stride + t] = p.pad_id;
  }
}

}  // namespace sgl_meta
