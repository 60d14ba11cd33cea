// fused_dsa_metadata: torch binding (checks, params, dispatch). K destination
// sets come as tensor lists of one length K; an optional field's list is
// empty when the field is not written.

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "dsa_metadata/params.h"
#include "common/op_binding.h"

namespace sgl_meta {
namespace {

template <typename T>
using List = std::vector<T>;

using DT = Expect::DType;

const char* mode_name(int64_t mode) {
  return mode == kDsaGenDecode ? "DECODE"
                               : mode == kDsaGenTargetVerify ? "TARGET_VERIFY" : "DRAFT_EXTEND";
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// The call's sizes, resolved from the mode, with the names errors quote.
struct Shape {
  int64_t bs = 0;
  int64_t n = 0;           // expanded rows = page-table rows
  int64_t cols = 0;        // page_table_1 columns (max_seqlen_k)
  int64_t real_cols = 0;   // real_page_table columns: ceil(cols / page_size)
  int64_t next_n = 0;      // paged_mqa_ctx_lens_2d columns (TARGET_VERIFY)
  const char* n_name = "bs";
  const char* n1_name = "bs + 1";
};

void check_scalars(const ArgChecker& check, int64_t mode, int64_t bs, int64_t max_seqlen_k,
                   int64_t topk, int64_t page_size, std::optional<int64_t> next_n_arg,
                   std::optional<int64_t> total_len_arg, Shape& sh) {
  check.require(mode >= kDsaGenDecode && mode <= kDsaGenDraftExtend,
                "forward_mode must be 0 (DECODE), 1 (TARGET_VERIFY) or 2 (DRAFT_EXTEND), got ",
                mode);
  // Lengths, row counts and sums are int32 on the device: the scalars must fit.
  check.non_negative(bs, "bs");
  check.in_range(bs, 0, INT32_MAX, "bs", "rows of int32 metadata");
  check.non_negative(max_seqlen_k, "max_seqlen_k");
  check.in_range(max_seqlen_k, 0, INT32_MAX, "max_seqlen_k", "compared with int32 lengths");
  check.non_negative(topk, "dsa_index_topk");
  check.in_range(topk, 0, INT32_MAX, "dsa_index_topk", "compared with int32 lengths");
  check.require(page_size >= 1, "page_size must be >= 1, got ", page_size);
  check.in_range(page_size, 1, INT32_MAX, "page_size", "int32 slots are divided by it");
  sh.bs = bs;
  sh.cols = max_seqlen_k;
  sh.real_cols = max_seqlen_k == 0 ? 0 : (max_seqlen_k - 1) / page_size + 1;
  if (mode == kDsaGenTargetVerify) {
    // next_n is unused at bs == 0 (upstream returns before reading it).
    check.require(next_n_arg.has_value() || bs == 0,
                  "next_n is required in TARGET_VERIFY mode (draft tokens per request), got None");
    const int64_t next_n = next_n_arg.value_or(0);
    check.require(next_n >= (bs > 0 ? 1 : 0), "next_n must be >= 1 in TARGET_VERIFY mode "
                  "(draft tokens per request), got ", next_n);
    check.in_range(next_n, 0, INT32_MAX, "next_n", "int32 lengths are offset by it");
    check.require(bs * next_n <= INT32_MAX, "bs * next_n = ", bs * next_n,
                  " must be <= 2147483647 (expanded rows of int32 metadata)");
    sh.next_n = next_n;
    sh.n = bs * next_n;
    sh.n_name = "bs * next_n";
    sh.n1_name = "bs * next_n + 1";
  } else if (mode == kDsaGenDraftExtend) {
    check.require(total_len_arg.has_value(),
                  "total_len is required in DRAFT_EXTEND mode (expanded rows), got None");
    const int64_t total_len = *total_len_arg;
    check.non_negative(total_len, "total_len");
    check.in_range(total_len, 0, INT32_MAX, "total_len", "expanded rows of int32 metadata");
    // Upstream returns at bs == 0 before anything but the two [0] entries.
    sh.n = bs > 0 ? total_len : 0;
    sh.n_name = "total_len";
    sh.n1_name = "total_len + 1";
  } else {
    sh.n = bs;
  }
}

// The destination lists, one element each per set (null: field absent).
template <typename T>
struct SetTensors {
  const T* cache_seqlens;
  const T* cu_seqlens_k;
  const T* seqlens_expanded;
  const T* dsa_cache_seqlens;
  const T* dsa_cu_seqlens_k;
  const T* page_table_1;
  const T* real_page_table;
  const T* paged_mqa_ctx_lens_2d;
};

template <typename T>
void check_set(const ArgChecker& check, const SetTensors<T>& t, const Shape& sh, int64_t i,
               const T& dev) {
  check.tensor(*t.cache_seqlens, {"cache_seqlens", i}, {DT::kInt32, 1, sh.bs, 0, "bs"}, dev);
  check.tensor(*t.cu_seqlens_k, {"cu_seqlens_k", i}, {DT::kInt32, 1, sh.bs + 1, 0, "bs + 1"},
               dev);
  if (t.seqlens_expanded)
    check.tensor(*t.seqlens_expanded, {"seqlens_expanded", i},
                 {DT::kInt32, 1, sh.n, 0, sh.n_name}, dev);
  check.tensor(*t.dsa_cache_seqlens, {"dsa_cache_seqlens", i},
               {DT::kInt32, 1, sh.n, 0, sh.n_name}, dev);
  check.tensor(*t.dsa_cu_seqlens_k, {"dsa_cu_seqlens_k", i},
               {DT::kInt32, 1, sh.n + 1, 0, sh.n1_name}, dev);
  if (t.page_table_1) {
    const ArgName name("page_table_1", i);
    check.tensor(*t.page_table_1, name,
                 {DT::kInt32, 2, sh.n, sh.cols, sh.n_name, "max_seqlen_k"}, dev);
    check.rows_disjoint(*t.page_table_1, name, sh.n, sh.cols);
  }
  if (t.real_page_table) {
    const ArgName name("real_page_table", i);
    check.tensor(*t.real_page_table, name,
                 {DT::kInt32, 2, sh.n, sh.real_cols, sh.n_name,
                  "ceil(max_seqlen_k / page_size)"},
                 dev);
    check.rows_disjoint(*t.real_page_table, name, sh.n, sh.real_cols);
  }
  if (t.paged_mqa_ctx_lens_2d) {
    const ArgName name("paged_mqa_ctx_lens_2d", i);
    check.tensor(*t.paged_mqa_ctx_lens_2d, name,
                 {DT::kInt32, 2, sh.bs, sh.next_n, "bs", "next_n"}, dev);
    check.rows_disjoint(*t.paged_mqa_ctx_lens_2d, name, sh.bs, sh.next_n);
  }
}

// No two written regions of any sets may share memory (a page_table_1 shared
// by two sets would be written concurrently by different blocks), and none may
// share memory with an input.
template <typename T>
void check_disjoint(const ArgChecker& check, const std::vector<SetTensors<T>>& sets,
                    const Shape& sh, const std::vector<ArgChecker::WrittenOf<T>>& inputs) {
  std::vector<ArgChecker::WrittenOf<T>> regions;
  regions.reserve(sets.size() * 8);
  for (size_t k = 0; k < sets.size(); ++k) {
    const SetTensors<T>& t = sets[k];
    const int64_t i = static_cast<int64_t>(k);
    regions.push_back({{"cache_seqlens", i}, t.cache_seqlens, 1, sh.bs});
    regions.push_back({{"cu_seqlens_k", i}, t.cu_seqlens_k, 1, sh.bs + 1});
    regions.push_back({{"seqlens_expanded", i}, t.seqlens_expanded, 1, sh.n});
    regions.push_back({{"dsa_cache_seqlens", i}, t.dsa_cache_seqlens, 1, sh.n});
    regions.push_back({{"dsa_cu_seqlens_k", i}, t.dsa_cu_seqlens_k, 1, sh.n + 1});
    regions.push_back({{"page_table_1", i}, t.page_table_1, sh.n, sh.cols});
    regions.push_back({{"real_page_table", i}, t.real_page_table, sh.n, sh.real_cols});
    regions.push_back({{"paged_mqa_ctx_lens_2d", i}, t.paged_mqa_ctx_lens_2d, sh.bs, sh.next_n});
  }
  check.template disjoint<T>(regions, inputs);
}

template <typename T>
int32_t* ptr(const T* t) { return t ? t->template mutable_data_ptr<int32_t>() : nullptr; }

}  // namespace

template <typename T>
void fused_dsa_metadata(T seq_lens, T req_pool_indices, T req_to_token,
                        std::optional<T> extend_seq_lens, List<T> cache_seqlens,
                        List<T> cu_seqlens_k, List<T> seqlens_expanded, List<T> dsa_cache_seqlens,
                        List<T> dsa_cu_seqlens_k, List<T> page_table_1, List<T> real_page_table,
                        List<T> paged_mqa_ctx_lens_2d, int64_t forward_mode, int64_t bs,
                        int64_t max_seqlen_k, int64_t dsa_index_topk, int64_t page_size,
                        std::optional<int64_t> next_n_arg, std::optional<int64_t> total_len_arg,
                        bool static_extend_len) {
  // Not given: the modes that need them say so (check_scalars).
  const ArgChecker check("fused_dsa_metadata");
  Shape sh;
  check_scalars(check, forward_mode, bs, max_seqlen_k, dsa_index_topk, page_size, next_n_arg,
                total_len_arg, sh);
  const bool draft_extend = forward_mode == kDsaGenDraftExtend;

  // Inputs.
  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2, 0, max_seqlen_k, "", "max_seqlen_k"},
               dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  if (draft_extend) {
    check.require(extend_seq_lens.has_value(),
                  "extend_seq_lens is required when forward_mode = 2 (DRAFT_EXTEND)");
    // Static extend lengths read element 0 only.
    const int64_t need = static_extend_len ? std::min<int64_t>(bs, 1) : bs;
    check.tensor(*extend_seq_lens, "extend_seq_lens",
                 {DT::kIndex, 1, need, 0, static_extend_len ? "1 (static_extend_len)" : "bs"},
                 dev);
  } else if (extend_seq_lens) {  // accepted and unused outside DRAFT_EXTEND
    check.tensor(*extend_seq_lens, "extend_seq_lens", {DT::kIndex, 1}, dev);
  }

  // Lists: K required ones, optional ones empty or K.
  const size_t k = cache_seqlens.size();
  check.require(k >= 1, "cache_seqlens must hold at least one tensor (one per destination "
                "set), got 0");
  const char* kPerSet = "one per destination set, like cache_seqlens";
  check.list_size(cu_seqlens_k, "cu_seqlens_k", k, kPerSet);
  check.list_size(dsa_cache_seqlens, "dsa_cache_seqlens", k, kPerSet);
  check.list_size(dsa_cu_seqlens_k, "dsa_cu_seqlens_k", k, kPerSet);
  if (forward_mode == kDsaGenDecode) {
    check.require(seqlens_expanded.empty(), "seqlens_expanded must be empty in DECODE mode "
                  "(its expanded rows are the requests: dsa_cache_seqlens), got ",
                  seqlens_expanded.size(), " tensors");
  } else {
    check.require(seqlens_expanded.size() == k, "seqlens_expanded must hold ", k,
                  " tensors (one per destination set) when forward_mode = ", forward_mode,
                  " (", mode_name(forward_mode), "), got ", seqlens_expanded.size());
  }
  auto optional_list = [&](const List<T>& list, const char* name) {
    check.require(list.empty() || list.size() == k, name, " must hold 0 (not written) or ", k,
                  " tensors (", kPerSet, "), got ", list.size());
  };
  optional_list(page_table_1, "page_table_1");
  optional_list(real_page_table, "real_page_table");
  optional_list(paged_mqa_ctx_lens_2d, "paged_mqa_ctx_lens_2d");
  check.require(paged_mqa_ctx_lens_2d.empty() || forward_mode == kDsaGenTargetVerify,
                "paged_mqa_ctx_lens_2d is written in TARGET_VERIFY mode only (forward_mode = "
                "1); pass an empty list in ", mode_name(forward_mode), " mode");
  // At page size 1 the token table is the real table (upstream passes the same
  // tensor for both): real_page_table is ignored then, and page_table_1 must
  // carry the table.
  const bool real = !real_page_table.empty() && page_size > 1;
  check.require(page_size > 1 || real_page_table.empty() || !page_table_1.empty(),
                "at page_size 1 the real page table is the token table: pass it as "
                "page_table_1 (real_page_table is ignored then)");

  auto at = [](const List<T>& list, size_t i) { return list.empty() ? nullptr : &list[i]; };
  std::vector<SetTensors<T>> sets(k);
  for (size_t i = 0; i < k; ++i) {
    sets[i] = {&cache_seqlens[i],       &cu_seqlens_k[i],     at(seqlens_expanded, i),
               &dsa_cache_seqlens[i],   &dsa_cu_seqlens_k[i], at(page_table_1, i),
               real ? &real_page_table[i] : nullptr, at(paged_mqa_ctx_lens_2d, i)};
    check_set(check, sets[i], sh, static_cast<int64_t>(i), dev);
  }
  check_disjoint(check, sets, sh,
                 {ArgChecker::whole("seq_lens", &seq_lens),
                  ArgChecker::whole("req_pool_indices", &req_pool_indices),
                  ArgChecker::whole("req_to_token", &req_to_token),
                  ArgChecker::whole("extend_seq_lens",
                                    extend_seq_lens ? &*extend_seq_lens : nullptr)});

  DsaGenParams p;
  p.seq_lens = index_array_of(seq_lens);
  p.req_pool_indices = index_array_of(req_pool_indices);
  if (draft_extend) p.extend_seq_lens = index_array_of(*extend_seq_lens);
  p.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  p.req_to_token_stride = req_to_token.stride(0);
  p.pool_size = req_to_token.size(0);
  p.mode = static_cast<int32_t>(forward_mode);
  p.bs = bs;
  p.n = sh.n;
  p.next_n = forward_mode == kDsaGenTargetVerify ? sh.next_n : 1;
  p.static_extend = draft_extend && static_extend_len;
  p.max_cols = max_seqlen_k;
  p.topk = static_cast<int32_t>(dsa_index_topk);
  p.page = PageDivisor::make(page_size);
  p.page_table_1 = !page_table_1.empty();
  p.real_page_table = real;
  p.vec_load = aligned16(p.req_to_token) &&
               (req_to_token.size(0) <= 1 || p.req_to_token_stride % 4 == 0);
  p.vec_store = true;
  for (const SetTensors<T>& t : sets)
    if (t.page_table_1)
      p.vec_store = p.vec_store && aligned16(t.page_table_1->data_ptr()) &&
                    (sh.n <= 1 || t.page_table_1->stride(0) % 4 == 0);

  // Sets beyond one launch's capacity go in further launches on the same
  // stream (the inputs are only read, so the launches are independent).
  for (size_t first = 0; first < k; first += kDsaGenMaxSets) {
    const size_t count = std::min<size_t>(k - first, kDsaGenMaxSets);
    p.num_sets = static_cast<int32_t>(count);
    for (size_t j = 0; j < count; ++j) {
      const SetTensors<T>& t = sets[first + j];
      DsaGenSet& d = p.set[j];
      d.cache_seqlens = ptr(t.cache_seqlens);
      d.cu_seqlens_k = ptr(t.cu_seqlens_k);
      d.seqlens_expanded = ptr(t.seqlens_expanded);
      d.dsa_cache_seqlens = ptr(t.dsa_cache_seqlens);
      d.dsa_cu_seqlens_k = ptr(t.dsa_cu_seqlens_k);
      d.page_table_1 = ptr(t.page_table_1);
      d.real_page_table = ptr(t.real_page_table);
      d.paged_mqa_ctx_lens = ptr(t.paged_mqa_ctx_lens_2d);
      d.page_table_1_stride = t.page_table_1 ? t.page_table_1->stride(0) : 0;
      d.real_page_table_stride = t.real_page_table ? t.real_page_table->stride(0) : 0;
      d.paged_mqa_ctx_lens_stride =
          t.paged_mqa_ctx_lens_2d ? t.paged_mqa_ctx_lens_2d->stride(0) : 0;
    }
    run_on_device(check, dev, p, &fused_dsa_metadata_cpu, SGL_CUDA_ONLY(&fused_dsa_metadata_cuda));
  }
}

}  // namespace sgl_meta

SGL_META_BIND(fused_dsa_metadata)
