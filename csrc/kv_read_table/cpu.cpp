// kv_read_page_table / kv_read_token_stream: CPU kernels. Same results as the
// CUDA kernels; every hostile device value (a request index outside
// req_to_token, a negative window start, a length outside [0, 2**31 - 1], a
// slot whose virtual page lies past v2p, an id that does not fit out's dtype,
// a CSR row outside its slot) raises std::runtime_error before anything is
// written, where CUDA trips a device-side assert.
#include "common/errors.h"
#include "common/row_checks.h"
#include "kv_read_table/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kPageOp = "kv_read_page_table";
constexpr const char* kStreamOp = "kv_read_token_stream";

// The row scalars both forms check for every row b < bs, whatever its length
// (the request index, the window start, the lengths).
struct Row {
  int64_t req;
  int64_t start;
  const int32_t* in;  // req_to_token row `req`
};

Row check_row(const char* op, const KvReadSource& s, int64_t b) {
  const int64_t req = s.req_pool_indices[b];
  check_request_index(op, b, req, s.pool_size);
  const int64_t start = s.kv_start_idx.present() ? s.kv_start_idx[b] : 0;
  if (start < 0) raise_error(op, "kv_start_idx[", b, "] = ", start, " is negative");
  const int64_t seq = s.seq_lens[b];
  check_length(op, "seq_lens", b, seq);
  const int64_t len = window_len(s, seq);
  if (!length_fits(len))
    raise_error(op, "seq_lens[", b, "] + seq_len_delta = ", len,
                len < 0 ? " is negative" : " does not fit int32");
  return {req, start, s.req_to_token + req * s.req_to_token_stride};
}

// entry() of the slot at `col` of row `r`, after checking that its virtual
// page lies inside v2p.
int64_t checked_entry(const char* op, const KvReadSource& s, const Row& r, int64_t b,
                      int64_t col) {
  const int32_t slot = r.in[col];
  const int64_t vpage = virtual_page(s, slot);
  if (!s.translate) return vpage;
  if (vpage >= s.v2p_size)
    raise_error(op, "req_to_token[", r.req, ", ", col, "] = ", slot, " (row ", b, ") reads virtual page ",
                vpage, ", outside v2p (v2p.numel() = ", s.v2p_size, ")");
  return max_i64(s.v2p[vpage], 0);
}

}  // namespace

void kv_read_page_table_cpu(const KvReadPageTableParams& p) {
  const KvReadSource& s = p.src;
  const int64_t ps = s.page_size;
  for (int64_t b = 0; b < s.bs; ++b) {  // checks: nothing is written before they pass
    const Row r = check_row(kPageOp, s, b);
    const int64_t n = live_columns(p, s.seq_lens[b], r.start);
    for (int64_t c = 0; c < n; ++c) {
      const int64_t e = checked_entry(kPageOp, s, r, b, r.start + c * ps);
      if (e > INT32_MAX)
        raise_error(kPageOp, "v2p[", virtual_page(s, r.in[r.start + c * ps]), "] = ", e,
                    " does not fit the int32 out (row ", b, ", column ", c, ")");
    }
  }
  for (int64_t b = 0; b < s.bs; ++b) {
    const Row r = check_row(kPageOp, s, b);
    const int64_t n = live_columns(p, s.seq_lens[b], r.start);
    int32_t* out = p.out + b * p.out_stride;
    for (int64_t c = 0; c < n; ++c)
      out[c] = static_cast<int32_t>(checked_entry(kPageOp, s, r, b, r.start + c * ps));
    if (p.zero_tail)
      for (int64_t c = n; c < p.max_pages; ++c) out[c] = 0;
  }
}

void kv_read_token_stream_cpu(const KvReadTokenStreamParams& p) {
  const KvReadSource& s = p.src;
  const int64_t ps = s.page_size;
  for (int64_t b = 0; b < s.bs; ++b) {
    const Row r = check_row(kStreamOp, s, b);
    const int64_t lo = p.indptr[b], hi = p.indptr[b + 1];
    // Non-decreasing, non-negative row starts: rows cannot overlap.
    if (lo < 0 || hi < lo)
      raise_error(kStreamOp, "indptr must be non-negative and non-decreasing, got indptr[", b, "] = ", lo,
                  ", indptr[", b + 1, "] = ", hi);
    const int64_t n = live_tokens(s, s.seq_lens[b], r.start);
    if (n == 0) continue;
    if (n > hi - lo || lo > p.out_size - n)
      raise_error(kStreamOp, "row ", b, " holds ", n, " tokens but indptr gives it [", lo, ", ", hi,
                  ") in out of ", p.out_size, " elements");
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = r.start + i;
      const int64_t page = s.div.div(pos);
      const int64_t off = pos - page * ps;
      const int64_t e = checked_entry(kStreamOp, s, r, b, page * ps);
      if (e > p.max_entry && (off > p.out_max || e > (p.out_max - off) / ps))
        raise_error(kStreamOp, "page entry ", e, " of row ", b, ", token ", i, ": ", e, " * page_size + ",
                    off, " does not fit out (", p.out64 ? "int64" : "int32", ")");
    }
  }
  for (int64_t b = 0; b < s.bs; ++b) {
    const Row r = check_row(kStreamOp, s, b);
    const int64_t n = live_tokens(s, s.seq_lens[b], r.start);
    const int64_t lo = p.indptr[b];
    int64_t entry = 0, page = -1;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t pos = r.start + i;
      const int64_t pg = s.div.div(pos);
      if (pg != page) {  // the page's first slot is translated once per page
        page = pg;
        entry = checked_entry(kStreamOp, s, r, b, page * ps);
      }
      const int64_t id = entry * ps + (pos - page * ps);
      if (p.out64)
        static_cast<int64_t*>(p.out)[lo + i] = id;
      else
        static_cast<int32_t*>(p.out)[lo + i] = static_cast<int32_t>(id);
    }
  }
}

}  // namespace sgl_meta
