// fused_dsa_metadata: CPU kernel. Same values as the CUDA kernel (the shared
// arithmetic is in params.h); hostile device values raise before anything is
// written instead of tripping a device assert.
#include <cstring>
#include <vector>

#include "common/errors.h"
#include "common/row_checks.h"
#include "dsa_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "fused_dsa_metadata";

[[noreturn]] void fail_index(const char* name, int64_t i, int64_t v, const char* why) {
  raise_error(kOp, name, "[", i, "] = ", v, " ", why);
}

// "<terms>[0..i] summed (<sum>[i + 1]) = v does not fit int32".
[[noreturn]] void fail_sum(const char* terms, const char* sum, int64_t i, int64_t v) {
  raise_error(kOp, terms, "[0..", i, "] summed (", sum, "[", i + 1, "]) = ", v, " does not fit int32");
}

// Request r's page rows: [begin, begin + count) of the expanded rows.
struct Rows {
  int64_t begin, count;
};

// Calls emit(e, seqlens_expanded[e]) for every expanded row e < n, in order,
// and (when `rows` is given) records each request's page rows.
template <class Emit>
void expanded_rows(const DsaGenParams& p, std::vector<Rows>* rows, Emit&& emit) {
  auto record = [&](int64_t r, int64_t begin, int64_t count) {
    if (rows != nullptr) (*rows)[r] = {begin, count};
  };
  if (p.mode == kDsaGenDecode) {
    for (int64_t r = 0; r < p.bs; ++r) {
      emit(r, to_i32(p.seq_lens[r]));
      record(r, r, 1);
    }
  } else if (p.mode == kDsaGenTargetVerify) {
    for (int64_t r = 0; r < p.bs; ++r) {
      const int32_t seq = to_i32(p.seq_lens[r]);
      for (int64_t j = 0; j < p.next_n; ++j) emit(r * p.next_n + j, add_i32(seq, j + 1));
      record(r, r * p.next_n, p.next_n);
    }
  } else {
    int64_t start = 0;  // <= n
    for (int64_t r = 0; r < p.bs; ++r) {
      if (p.n == 0) {  // total_len == 0: extend_seq_lens is not read
        record(r, 0, 0);
        continue;
      }
      const int32_t seq = to_i32(p.seq_lens[r]);
      const int64_t ext = p.extend_seq_lens[p.static_extend ? 0 : r];
      const int64_t count = min_i64(extend_len(p, r), p.n - start);
      for (int64_t j = 0; j < count; ++j) emit(start + j, draft_extend_len(seq, ext, j));
      record(r, start, count);
      start += count;
    }
    // Rows no request covers (total_len past the extend lengths' sum) take
    // request 0's length, as upstream's scan defaults them.
    const int32_t seq0 = p.bs > 0 ? to_i32(p.seq_lens[0]) : 0;
    for (int64_t e = start; e < p.n; ++e) emit(e, draft_extend_len(seq0, 1, 0));
  }
}

// Every value the call reads as an index or a length that could send a read
// or a write out of bounds or past int32, checked up front.
void validate(const DsaGenParams& p) {
  if (p.writes_pages()) {
    for (int64_t r = 0; r < p.bs; ++r) {
      check_request_index(kOp, r, p.req_pool_indices[r], p.pool_size);
    }
  }
  if (p.mode == kDsaGenDraftExtend && p.n > 0) {
    const int64_t count = p.static_extend ? 1 : p.bs;
    for (int64_t i = 0; i < count; ++i) {
      const int64_t e = p.extend_seq_lens[i];
      if (e < 0) fail_index("extend_seq_lens", i, e, "is negative");
    }
  }
  int64_t cu = 0;
  for (int64_t r = 0; r < p.bs; ++r) {
    const int64_t seq = p.seq_lens[r];
    check_length(kOp, "seq_lens", r, seq);
    if (!cache_len_fits(p, seq))
      raise_error(kOp, "seq_lens[", r, "] + next_n = ", seq + p.next_n, " does not fit int32 cache_seqlens");
    cu += cache_len(p, to_i32(seq));
    if (cu > INT32_MAX) fail_sum("cache_seqlens", "cu_seqlens_k", r, cu);
  }
  int64_t dsa_cu = 0;
  expanded_rows(p, nullptr, [&](int64_t e, int32_t len) {
    dsa_cu += min_i32(len, p.topk);
    if (dsa_cu > INT32_MAX) fail_sum("dsa_cache_seqlens", "dsa_cu_seqlens_k", e, dsa_cu);
  });
}

}  // namespace

void fused_dsa_metadata_cpu(const DsaGenParams& p) {
  validate(p);
  const int n_sets = p.num_sets;
  for (int s = 0; s < n_sets; ++s) {
    p.set[s].cu_seqlens_k[0] = 0;
    p.set[s].dsa_cu_seqlens_k[0] = 0;
  }
  if (p.bs == 0) return;

  // Per request: cache_seqlens, cu_seqlens_k (and the verify ctx lens).
  uint32_t cu = 0;
  for (int64_t r = 0; r < p.bs; ++r) {
    const int32_t c = cache_len(p, to_i32(p.seq_lens[r]));
    cu += static_cast<uint32_t>(c);
    for (int s = 0; s < n_sets; ++s) {
      const DsaGenSet& d = p.set[s];
      d.cache_seqlens[r] = c;
      d.cu_seqlens_k[r + 1] = static_cast<int32_t>(cu);
      if (d.paged_mqa_ctx_lens)
        for (int64_t j = 0; j < p.next_n; ++j)
          d.paged_mqa_ctx_lens[r * d.paged_mqa_ctx_lens_stride + j] = c;
    }
  }

  // Per expanded row: seqlens_expanded, dsa_cache_seqlens, dsa_cu_seqlens_k.
  uint32_t dsa_cu = 0;
  auto emit = [&](int64_t e, int32_t len) {
    const int32_t dsa = min_i32(len, p.topk);
    dsa_cu += static_cast<uint32_t>(dsa);
    for (int s = 0; s < n_sets; ++s) {
      const DsaGenSet& d = p.set[s];
      if (d.seqlens_expanded) d.seqlens_expanded[e] = len;
      d.dsa_cache_seqlens[e] = dsa;
      d.dsa_cu_seqlens_k[e + 1] = static_cast<int32_t>(dsa_cu);
    }
  };
  std::vector<Rows> rows(static_cast<size_t>(p.bs));
  expanded_rows(p, &rows, emit);

  if (!p.writes_pages()) return;
  const int64_t ps = p.page.page_size;
  for (int64_t r = 0; r < p.bs; ++r) {
    const int64_t len = live_len(p, cache_len(p, to_i32(p.seq_lens[r])));
    if (len == 0 || rows[r].count == 0) continue;
    const int32_t* src = p.req_to_token + p.req_pool_indices[r] * p.req_to_token_stride;
    const int64_t pages = p.real_page_table ? p.page.ceil_div(len) : 0;
    for (int s = 0; s < n_sets; ++s) {
      const DsaGenSet& d = p.set[s];
      for (int64_t row = rows[r].begin; row < rows[r].begin + rows[r].count; ++row) {
        if (p.page_table_1)  // memmove: an output may (wrongly) view req_to_token
          std::memmove(d.page_table_1 + row * d.page_table_1_stride, src,
                      static_cast<size_t>(len) * sizeof(int32_t));
        if (p.real_page_table) {
          int32_t* out = d.real_page_table + row * d.real_page_table_stride;
          for (int64_t q = 0; q < pages; ++q)
            out[q] = static_cast<int32_t>(p.page.div(src[q * ps]));
        }
      }
    }
  }
}

}  // namespace sgl_meta
