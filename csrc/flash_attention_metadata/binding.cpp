// update_flash_attention_metadata / flash_attention_swa_spec_page_table /
// flash_attention_verify_expand / flash_attention_draft_decode_topk: torch
// bindings (checks, params, dispatch).
#include <climits>
#include <vector>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "common/op_binding.h"
#include "flash_attention_metadata/params.h"

namespace sgl_meta {
namespace {

using DT = Expect::DType;

// One validated call (inputs + its destination sets) as plain data.
struct FaLaunch {
  FaInputs in;
  std::vector<FaDest> dests;
};

void fa_cpu(const FaLaunch& l) {
  flash_attention_metadata_cpu(l.in, l.dests.data(), static_cast<int>(l.dests.size()));
}

#ifdef SGL_META_WITH_CUDA
const char* fa_cuda(const FaLaunch& l, void* stream) {
  return flash_attention_metadata_cuda(l.in, l.dests.data(), static_cast<int>(l.dests.size()),
                                       stream);
}
#endif

template <typename T>
const T* opt(const std::optional<T>& t) {
  return t ? &*t : nullptr;
}

// The name of list element k, or the bare name for a one-set call (the
// drop-ins' arguments are single tensors).
ArgName element(const char* name, size_t k, bool multi) {
  return multi ? ArgName(name, static_cast<int64_t>(k)) : ArgName(name);
}

}  // namespace

template <typename T>
void update_flash_attention_metadata(std::vector<T> cache_seqlens, std::vector<T> cu_seqlens_k,
                              std::vector<T> page_table, std::vector<T> swa_page_table,
                              std::optional<T> cu_seqlens_q, std::optional<T> swa_out_cache_loc,
                              T req_to_token, T req_pool_indices, T seq_lens,
                              std::vector<int64_t> seq_len_delta, int64_t bs,
                              int64_t max_seq_pages, int64_t page_size,
                              std::optional<T> extend_seq_lens,
                              std::optional<T> full_to_swa_index_mapping,
                              std::optional<T> full_v2p, std::optional<T> swa_v2p,
                              std::optional<T> out_cache_loc, bool skip_page_table,
                              bool zero_tail) {
  const ArgChecker check("update_flash_attention_metadata");
  const size_t k_sets = cache_seqlens.size();
  const bool multi = k_sets > 1;
  check.require(k_sets >= 1, "cache_seqlens must hold at least one tensor (one per "
                             "destination set), got an empty list");
  check.require(cu_seqlens_k.empty() || cu_seqlens_k.size() == k_sets, "cu_seqlens_k must hold ",
                k_sets, " tensors (one per destination set, as cache_seqlens) or none, got ",
                cu_seqlens_k.size());
  check.require(seq_len_delta.size() == k_sets, "seq_len_delta must hold ", k_sets,
                " values (one per destination set, as cache_seqlens), got ",
                seq_len_delta.size());
  // Sets 0 .. len(page_table) - 1 get tables, the rest lengths only.
  const size_t table_sets = page_table.size();
  check.require(table_sets <= k_sets, "page_table must hold at most ", k_sets,
                " tensors (one per destination set, as cache_seqlens), got ", table_sets);
  check.non_negative(bs, "bs");
  check.non_negative(max_seq_pages, "max_seq_pages");
  check.require(page_size >= 1 && (page_size & (page_size - 1)) == 0,
                "page_size must be a power of two, got ", page_size);
  for (size_t k = 0; k < k_sets; ++k)
    check.require(seq_len_delta[k] >= INT32_MIN && seq_len_delta[k] <= INT32_MAX,
                  element("seq_len_delta", k, multi), " = ", seq_len_delta[k], " is outside [",
                  INT32_MIN, ", ", INT32_MAX, "] (it is added into int32 cache_seqlens)");
  const bool tables = !skip_page_table;
  check.require(!tables || !page_table.empty(),
                "page_table is required unless skip_page_table=True");
  check.require(!tables || swa_page_table.empty() || swa_page_table.size() == table_sets,
                "swa_page_table must hold ", table_sets,
                " tensors (one per page_table) or none, got ", swa_page_table.size());

  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.optional_tensor(extend_seq_lens, "extend_seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.optional_tensor(full_to_swa_index_mapping, "full_to_swa_index_mapping", {DT::kIndex, 1},
                        dev);
  // A negative slot reads virtual page 0: a table without it is never valid.
  check.optional_tensor(full_v2p, "full_v2p", {DT::kIndex, 1, 1}, dev);
  check.optional_tensor(swa_v2p, "swa_v2p", {DT::kIndex, 1, 1}, dev);
  check.optional_tensor(out_cache_loc, "out_cache_loc", {DT::kIndex, 1}, dev);
  check.paired(cu_seqlens_q, "cu_seqlens_q", extend_seq_lens, "extend_seq_lens");
  check.optional_tensor(cu_seqlens_q, "cu_seqlens_q", {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
  const int64_t out_len = swa_out_cache_loc ? swa_out_cache_loc->numel() : 0;
  if (swa_out_cache_loc) {
    check.tensor(*swa_out_cache_loc, "swa_out_cache_loc", {DT::kInt64, 1}, dev);
    check.require(out_cache_loc.has_value(), "swa_out_cache_loc needs out_cache_loc");
    check.require(full_to_swa_index_mapping.has_value(),
                  "swa_out_cache_loc needs full_to_swa_index_mapping");
    check.require(out_cache_loc->numel() >= out_len, "out_cache_loc.size(0) must be >= "
                  "swa_out_cache_loc.size(0) = ", out_len, ", got ", out_cache_loc->numel());
  }

  const bool swa_table = tables && !swa_page_table.empty();
  check.require(!swa_table || full_to_swa_index_mapping || swa_v2p,
                "swa_page_table needs full_to_swa_index_mapping or swa_v2p");
  const Expect table{DT::kInt32, 2, bs, max_seq_pages, "bs", "max_seq_pages"};
  std::vector<ArgChecker::WrittenOf<T>> written;
  written.reserve(4 * k_sets + 2);
  for (size_t k = 0; k < k_sets; ++k) {
    check.tensor(cache_seqlens[k], element("cache_seqlens", k, multi),
                 {DT::kInt32, 1, bs, 0, "bs"}, dev);
    written.push_back({element("cache_seqlens", k, multi), &cache_seqlens[k], 1, bs});
    if (!cu_seqlens_k.empty()) {
      check.tensor(cu_seqlens_k[k], element("cu_seqlens_k", k, multi),
                   {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
      written.push_back({element("cu_seqlens_k", k, multi), &cu_seqlens_k[k], 1, bs + 1});
    }
    if (!tables || k >= table_sets) continue;
    check.tensor(page_table[k], element("page_table", k, multi), table, dev);
    check.rows_disjoint(page_table[k], element("page_table", k, multi), bs, max_seq_pages);
    written.push_back({element("page_table", k, multi), &page_table[k], bs, max_seq_pages});
    if (!swa_table) continue;
    check.tensor(swa_page_table[k], element("swa_page_table", k, multi), table, dev);
    check.rows_disjoint(swa_page_table[k], element("swa_page_table", k, multi), bs,
                        max_seq_pages);
    written.push_back(
        {element("swa_page_table", k, multi), &swa_page_table[k], bs, max_seq_pages});
  }
  written.push_back({"cu_seqlens_q", opt(cu_seqlens_q), 1, bs + 1});
  written.push_back({"swa_out_cache_loc", opt(swa_out_cache_loc), 1, out_len});

  // Every gathered slot c * page_size (c < max_seq_pages) lies in its row
  // (tested without the product, which can overflow for hostile scalars).
  const int64_t ctx = req_to_token.size(1);
  const bool gathers = tables && max_seq_pages > 0 && bs > 0;
  if (gathers)
    check.require(ctx > 0 && max_seq_pages - 1 <= (ctx - 1) / page_size, "max_seq_pages = ",
                  max_seq_pages, " pages of page_size = ", page_size,
                  " need req_to_token.size(1) > (max_seq_pages - 1) * page_size, got "
                  "req_to_token.size(1) = ", ctx);
  if (bs == 0) return;  // documented no-op
  const bool swa_by_mapping = swa_table && !swa_v2p;
  const auto read = [](const char* name, const std::optional<T>& o, bool used) {
    return ArgChecker::whole(name, used && o ? &*o : nullptr);
  };
  check.template disjoint<T>(
      written, {ArgChecker::whole("req_pool_indices", &req_pool_indices),
                ArgChecker::whole("seq_lens", &seq_lens),
                ArgChecker::whole("req_to_token", gathers ? &req_to_token : nullptr),
                read("extend_seq_lens", extend_seq_lens, true),
                read("full_to_swa_index_mapping", full_to_swa_index_mapping,
                     swa_by_mapping || out_len > 0),
                read("full_v2p", full_v2p, gathers), read("swa_v2p", swa_v2p, swa_table),
                read("out_cache_loc", out_cache_loc, out_len > 0)});

  FaInputs in;
  in.req_pool_indices = index_array_of(req_pool_indices);
  in.seq_lens = index_array_of(seq_lens);
  if (extend_seq_lens) {
    in.extend_seq_lens = index_array_of(*extend_seq_lens);
    in.cu_seqlens_q = cu_seqlens_q->template mutable_data_ptr<int32_t>();
  }
  in.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  in.req_to_token_stride = req_to_token.stride(0);
  in.pool_size = req_to_token.size(0);
  if (swa_by_mapping || out_len > 0) {
    in.swa_mapping = index_array_of(*full_to_swa_index_mapping);
    in.swa_mapping_size = full_to_swa_index_mapping->numel();
  }
  if (full_v2p && gathers) {
    in.full_v2p = index_array_of(*full_v2p);
    in.full_v2p_size = full_v2p->numel();
  }
  if (swa_v2p && swa_table) {
    in.swa_v2p = index_array_of(*swa_v2p);
    in.swa_v2p_size = swa_v2p->numel();
  }
  if (out_len > 0) {
    in.out_cache_loc = index_array_of(*out_cache_loc);
    in.swa_out_cache_loc = swa_out_cache_loc->template mutable_data_ptr<int64_t>();
    in.swa_out_len = out_len;
  }
  in.bs = bs;
  in.max_seq_pages = max_seq_pages;
  in.page = PageDivisor::make(page_size);
  in.tables = gathers;
  in.swa_table = swa_table && gathers;
  in.zero_tail = zero_tail;
  in.multi = multi;

  std::vector<FaDest> dests(k_sets);
  for (size_t k = 0; k < k_sets; ++k) {
    FaDest& d = dests[k];
    d.cache_seqlens = cache_seqlens[k].template mutable_data_ptr<int32_t>();
    if (!cu_seqlens_k.empty()) d.cu_seqlens_k = cu_seqlens_k[k].template mutable_data_ptr<int32_t>();
    d.delta = static_cast<int32_t>(seq_len_delta[k]);
    if (!in.tables || k >= table_sets) continue;
    d.page_table = page_table[k].template mutable_data_ptr<int32_t>();
    d.page_table_stride = page_table[k].stride(0);
    if (!in.swa_table) continue;
    d.swa_page_table = swa_page_table[k].template mutable_data_ptr<int32_t>();
    d.swa_page_table_stride = swa_page_table[k].stride(0);
  }
  run_on_device(check, dev, FaLaunch{in, std::move(dests)}, &fa_cpu, SGL_CUDA_ONLY(&fa_cuda));
}

template <typename T>
void flash_attention_swa_spec_page_table(T page_table_dst, T page_table_a, T page_table_b,
                                         T seq_len_a, T seq_len_b,
                                         int64_t speculative_num_draft_tokens) {
  const ArgChecker check("flash_attention_swa_spec_page_table");
  const int64_t repeat = speculative_num_draft_tokens;
  check.non_negative(repeat, "speculative_num_draft_tokens");
  const T& dev = seq_len_a;  // the first tensor checked: every later one is compared with a checked one
  check.tensor(seq_len_a, "seq_len_a", {DT::kIndex, 1}, dev);
  check.tensor(seq_len_b, "seq_len_b", {DT::kIndex, 1}, dev);
  const int64_t bs = seq_len_a.size(0), rows = seq_len_b.size(0);
  check.require(repeat == 0 ? rows == 0 : rows % repeat == 0 && rows / repeat == bs,
                "seq_len_b.numel() = ", rows,
                " must be seq_len_a.numel() * speculative_num_draft_tokens = ", bs, " * ",
                repeat);
  check.tensor(page_table_dst, "page_table_dst", {DT::kInt32, 2, rows, 0, "seq_len_b.numel()"},
               dev);
  check.tensor(page_table_a, "page_table_a", {DT::kInt32, 2, bs, 0, "seq_len_a.numel()"}, dev);
  check.tensor(page_table_b, "page_table_b", {DT::kInt32, 2, rows, 0, "seq_len_b.numel()"},
               dev);
  const int64_t a_width = page_table_a.size(1), b_width = page_table_b.size(1);
  const int64_t width = min_i64(page_table_dst.size(1), a_width + b_width);
  check.rows_disjoint(page_table_dst, "page_table_dst", rows, width);
  if (rows == 0) return;  // documented no-op
  check.template disjoint<T>({{"page_table_dst", &page_table_dst, rows, width}},
                             {ArgChecker::whole("page_table_a", &page_table_a),
                              ArgChecker::whole("page_table_b", &page_table_b),
                              ArgChecker::whole("seq_len_a", &seq_len_a),
                              ArgChecker::whole("seq_len_b", &seq_len_b)});
  FaSwaSpecParams p;
  p.dst = page_table_dst.template mutable_data_ptr<int32_t>();
  p.dst_stride = page_table_dst.stride(0);
  p.width = width;
  p.a = page_table_a.template const_data_ptr<int32_t>();
  p.a_stride = page_table_a.stride(0);
  p.a_width = a_width;
  p.b = page_table_b.template const_data_ptr<int32_t>();
  p.b_stride = page_table_b.stride(0);
  p.b_width = b_width;
  p.seq_len_a = index_array_of(seq_len_a);
  p.seq_len_b = index_array_of(seq_len_b);
  p.rows = rows;
  p.repeat = repeat;
  run_on_device(check, dev, p, &flash_attention_swa_spec_page_table_cpu,
                SGL_CUDA_ONLY(&flash_attention_swa_spec_page_table_cuda));
}

template <typename T>
void flash_attention_verify_expand(T page_table, T cache_seqlens, T cu_seqlens_k, T custom_mask,
                                   T req_to_token, T req_pool_indices, T seq_lens, int64_t bs,
                                   int64_t num_draft_tokens, int64_t mask_rows) {
  const ArgChecker check("flash_attention_verify_expand");
  check.non_negative(bs, "bs");
  check.non_negative(mask_rows, "mask_rows");
  check.in_range(num_draft_tokens, 1, kFaMaxDraftTokens, "num_draft_tokens",
                 "one mask bit per draft token");
  const int64_t n = num_draft_tokens, rows = bs * n;
  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(custom_mask, "custom_mask", {DT::kBool, 1}, dev);
  check.tensor(page_table, "page_table", {DT::kInt32, 2, rows, n, "bs * num_draft_tokens", "num_draft_tokens"},
               dev);
  check.rows_disjoint(page_table, "page_table", rows, n);
  check.tensor(cache_seqlens, "cache_seqlens", {DT::kInt32, 1, rows, 0, "bs * num_draft_tokens"}, dev);
  check.tensor(cu_seqlens_k, "cu_seqlens_k", {DT::kInt32, 1, rows + 1, 0, "bs * num_draft_tokens + 1"}, dev);
  if (rows == 0) return;  // documented no-op
  check.template disjoint<T>({{"page_table", &page_table, rows, n},
                              {"cache_seqlens", &cache_seqlens, 1, rows},
                              {"cu_seqlens_k", &cu_seqlens_k, 1, rows + 1}},
                             {ArgChecker::whole("custom_mask", &custom_mask),
                              ArgChecker::whole("req_to_token", &req_to_token),
                              ArgChecker::whole("req_pool_indices", &req_pool_indices),
                              ArgChecker::whole("seq_lens", &seq_lens)});
  FaVerifyExpandParams p;
  p.page_table = page_table.template mutable_data_ptr<int32_t>();
  p.page_table_stride = page_table.stride(0);
  p.cache_seqlens = cache_seqlens.template mutable_data_ptr<int32_t>();
  p.cu_seqlens_k = cu_seqlens_k.template mutable_data_ptr<int32_t>();
  p.custom_mask = custom_mask.template const_data_ptr<bool>();
  p.mask_size = custom_mask.numel();
  p.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  p.req_to_token_stride = req_to_token.stride(0);
  p.pool_size = req_to_token.size(0);
  p.ctx = req_to_token.size(1);
  p.req_pool_indices = index_array_of(req_pool_indices);
  p.seq_lens = index_array_of(seq_lens);
  p.bs = bs;
  p.n = n;
  p.mask_rows = mask_rows;
  run_on_device(check, dev, p, &flash_attention_verify_expand_cpu,
                SGL_CUDA_ONLY(&flash_attention_verify_expand_cuda));
}

template <typename T>
void flash_attention_draft_decode_topk(std::vector<T> cache_seqlens, std::vector<T> page_table,
                                       std::vector<T> expand_cache_seqlens, std::vector<T> expand_page_table,
                                       T req_to_token, T req_pool_indices, T seq_lens, T out_cache_loc,
                                       int64_t bs, int64_t topk, int64_t num_steps,
                                       std::vector<int64_t> decode_length, int64_t page_size,
                                       int64_t max_seq_pages) {
  const ArgChecker check("flash_attention_draft_decode_topk");
  const size_t k_sets = decode_length.size();
  check.require(k_sets >= 1 && k_sets <= static_cast<size_t>(kFaMaxDraftSets),
                "decode_length must hold 1 to ", kFaMaxDraftSets, " values (one per draft step), got ", k_sets);
  check.require(cache_seqlens.size() == k_sets, "cache_seqlens must hold ", k_sets,
                " tensors (one per decode_length), got ", cache_seqlens.size());
  check.require(page_table.size() == k_sets, "page_table must hold ", k_sets,
                " tensors (one per decode_length), got ", page_table.size());
  check.require(expand_page_table.size() == k_sets, "expand_page_table must hold ", k_sets,
                " tensors (one per decode_length), got ", expand_page_table.size());
  check.require(expand_cache_seqlens.empty() || expand_cache_seqlens.size() == k_sets,
                "expand_cache_seqlens must hold ", k_sets, " tensors (one per decode_length) or none, got ",
                expand_cache_seqlens.size());
  check.non_negative(bs, "bs");
  check.in_range(topk, 1, 1024, "topk", "draft branches per request");
  check.in_range(num_steps, 1, kFaMaxDraftSteps, "num_steps", "out_cache_loc entries per branch");
  check.non_negative(max_seq_pages, "max_seq_pages");
  check.require(page_size >= 1 && (page_size & (page_size - 1)) == 0,
                "page_size must be a power of two, got ", page_size);
  int64_t max_d = 0;
  for (size_t k = 0; k < k_sets; ++k) {
    check.require(decode_length[k] >= 1 && decode_length[k] <= num_steps, ArgName("decode_length", k),
                  " = ", decode_length[k], " is outside [1, num_steps = ", num_steps, "]");
    max_d = decode_length[k] > max_d ? decode_length[k] : max_d;
  }
  const int64_t rows = bs * topk;
  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(out_cache_loc, "out_cache_loc", {DT::kIndex, 1, rows * num_steps, 0, "bs * topk * num_steps"},
               dev);
  std::vector<ArgChecker::WrittenOf<T>> written;
  written.reserve(4 * k_sets);
  for (size_t k = 0; k < k_sets; ++k) {
    const int64_t d = decode_length[k];
    check.tensor(cache_seqlens[k], ArgName("cache_seqlens", k), {DT::kInt32, 1, bs, 0, "bs"}, dev);
    written.push_back({ArgName("cache_seqlens", k), &cache_seqlens[k], 1, bs});
    check.tensor(page_table[k], ArgName("page_table", k),
                 {DT::kInt32, 2, bs, max_seq_pages, "bs", "max_seq_pages"}, dev);
    check.rows_disjoint(page_table[k], ArgName("page_table", k), bs, max_seq_pages);
    written.push_back({ArgName("page_table", k), &page_table[k], bs, max_seq_pages});
    if (!expand_cache_seqlens.empty()) {
      check.tensor(expand_cache_seqlens[k], ArgName("expand_cache_seqlens", k),
                   {DT::kInt32, 1, rows, 0, "bs * topk"}, dev);
      written.push_back({ArgName("expand_cache_seqlens", k), &expand_cache_seqlens[k], 1, rows});
    }
    check.tensor(expand_page_table[k], ArgName("expand_page_table", k),
                 {DT::kInt32, 2, rows, d, "bs * topk", "decode_length"}, dev);
    check.rows_disjoint(expand_page_table[k], ArgName("expand_page_table", k), rows, d);
    written.push_back({ArgName("expand_page_table", k), &expand_page_table[k], rows, d});
  }
  // Every gathered slot c * page_size (c < max_seq_pages) lies in its row.
  const int64_t ctx = req_to_token.size(1);
  const bool gathers = max_seq_pages > 0 && bs > 0;
  if (gathers)
    check.require(ctx > 0 && max_seq_pages - 1 <= (ctx - 1) / page_size, "max_seq_pages = ", max_seq_pages,
                  " pages of page_size = ", page_size,
                  " need req_to_token.size(1) > (max_seq_pages - 1) * page_size, got req_to_token.size(1) = ",
                  ctx);
  if (bs == 0) return;  // documented no-op
  check.template disjoint<T>(written, {ArgChecker::whole("req_pool_indices", &req_pool_indices),
                                       ArgChecker::whole("seq_lens", &seq_lens),
                                       ArgChecker::whole("req_to_token", gathers ? &req_to_token : nullptr),
                                       ArgChecker::whole("out_cache_loc", &out_cache_loc)});
  FaDraftTopkParams p;
  p.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  p.req_to_token_stride = req_to_token.stride(0);
  p.pool_size = req_to_token.size(0);
  p.req_pool_indices = index_array_of(req_pool_indices);
  p.seq_lens = index_array_of(seq_lens);
  p.out_cache_loc = index_array_of(out_cache_loc);
  p.bs = bs;
  p.topk = topk;
  p.num_steps = num_steps;
  p.max_decode_length = static_cast<int32_t>(max_d);
  p.max_seq_pages = max_seq_pages;
  p.page = PageDivisor::make(page_size);
  p.num_sets = static_cast<int>(k_sets);
  for (size_t k = 0; k < k_sets; ++k) {
    FaDraftSet& d = p.set[k];
    d.cache_seqlens = cache_seqlens[k].template mutable_data_ptr<int32_t>();
    d.page_table = page_table[k].template mutable_data_ptr<int32_t>();
    d.page_table_stride = page_table[k].stride(0);
    if (!expand_cache_seqlens.empty())
      d.expand_cache_seqlens = expand_cache_seqlens[k].template mutable_data_ptr<int32_t>();
    d.expand_page_table = expand_page_table[k].template mutable_data_ptr<int32_t>();
    d.expand_page_table_stride = expand_page_table[k].stride(0);
    d.decode_length = static_cast<int32_t>(decode_length[k]);
  }
  run_on_device(check, dev, p, &flash_attention_draft_decode_topk_cpu,
                SGL_CUDA_ONLY(&flash_attention_draft_decode_topk_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(update_flash_attention_metadata)
SGL_META_BIND(flash_attention_swa_spec_page_table)
SGL_META_BIND(flash_attention_verify_expand)
SGL_META_BIND(flash_attention_draft_decode_topk)
