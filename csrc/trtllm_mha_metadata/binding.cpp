// update_trtllm_mha_graph_metadata(_multi): torch binding (checks, params,
// dispatch). Both ops share one implementation: the single op is one
// destination set, the multi op K sets given as tensor lists.

#include <algorithm>
#include <climits>
#include <vector>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "common/op_binding.h"
#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

// One validated call (inputs + its destination sets) as plain data.
struct MhaLaunch {
  TrtllmMhaInputs in;
  std::vector<TrtllmMhaDest> dests;
};

void mha_cpu(const MhaLaunch& l) {
  update_trtllm_mha_metadata_cpu(l.in, l.dests.data(), static_cast<int>(l.dests.size()));
}

#ifdef SGL_META_WITH_CUDA
const char* mha_cuda(const MhaLaunch& l, void* stream) {
  return update_trtllm_mha_metadata_cuda(l.in, l.dests.data(),
                                         static_cast<int>(l.dests.size()), stream);
}
#endif

using DT = Expect::DType;

// The output tensors of one destination set (null = not given) and its offset.
template <typename T>
struct SetTensors {
  const T* cache_seqlens = nullptr;
  const T* cu_seqlens_k = nullptr;
  const T* page_table = nullptr;
  const T* swa_page_table = nullptr;
  const T* swa_out_cache_loc = nullptr;
  const T* cu_seqlens_q = nullptr;
  int64_t seqlen_offset = 0;
  int64_t index = -1;  // list position in the multi op (named in errors)
};

// The inputs shared by every set.
template <typename T>
struct InputTensors {
  const T& req_pool_indices;
  const T& seq_lens;
  const T& req_to_token;
  const std::optional<T>& swa_mapping;
  const std::optional<T>& out_cache_loc;
  const std::optional<T>& qlens;
  const std::optional<T>& seqlen_offsets;
  const std::optional<T>& v2p;
  const std::optional<T>& swa_v2p;
};

struct Scalars {
  int64_t bs, max_seq_pages, page_size, q_stride, q_mode;
  bool live_pages_only, skip_page_table;
};

template <typename T>
const T* opt(const std::optional<T>& t) {
  return t ? &*t : nullptr;
}

template <typename T>
void update_impl(const ArgChecker& check, bool multi, const InputTensors<T>& t,
                 std::vector<SetTensors<T>>& sets, const Scalars& sc) {
  const int64_t bs = sc.bs, max_seq_pages = sc.max_seq_pages, q_mode = sc.q_mode;
  check.non_negative(max_seq_pages, "max_seq_pages");
  check.non_negative(sc.q_stride, "q_stride");
  check.require(sc.page_size >= 1, "page_size must be >= 1, got ", sc.page_size);
  check.require(q_mode >= kQModeNone && q_mode <= kQModeStrided,
                "q_mode must be 0 (Q_MODE_NONE), 1 (Q_MODE_CUMSUM) or 2 "
                "(Q_MODE_STRIDED), got ", q_mode);

  const T& dev = t.req_to_token;
  check.tensor(t.req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(t.req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(t.seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  // int32 or int64 mappings, as SGLang's own tests pass both.
  check.optional_tensor(t.swa_mapping, "swa_mapping", {DT::kIndex, 1}, dev);
  check.optional_tensor(t.out_cache_loc, "out_cache_loc", {DT::kInt64, 1}, dev);
  check.optional_tensor(t.seqlen_offsets, "seqlen_offsets", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  // Unified pool page translations (virtual page -> physical page, int64 as
  // SGLang's allocators keep them). A negative slot reads entry 0, so an
  // empty table can never be read in bounds.
  check.optional_tensor(t.v2p, "v2p", {DT::kInt64, 1, 1}, dev);
  check.optional_tensor(t.swa_v2p, "swa_v2p", {DT::kInt64, 1, 1}, dev);
  check.require(q_mode != kQModeCumsum || t.qlens.has_value(),
                "qlens is required when q_mode = 1 (Q_MODE_CUMSUM)");
  check.optional_tensor(t.qlens, "qlens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  if (q_mode == kQModeStrided)
    check.require(sc.q_stride <= INT32_MAX / bs, "q_stride = ", sc.q_stride,
                  " is too large: bs * q_stride must fit int32 cu_seqlens_q (bs = ", bs,
                  ")");

  // skip_page_table: the tables and swa_out_cache_loc are neither checked nor
  // touched (SGLang's unified pool passes None for them and refreshes them
  // elsewhere); without it every set needs its page table.
  const bool pages = !sc.skip_page_table;
  if (sc.skip_page_table) {
    for (SetTensors<T>& s : sets) s.page_table = s.swa_page_table = s.swa_out_cache_loc = nullptr;
  }
  const bool swa_table = sets[0].swa_page_table != nullptr;
  const Expect table{DT::kInt32, 2, bs, max_seq_pages, "bs", "max_seq_pages"};
  std::vector<ArgChecker::WrittenOf<T>> written;
  written.reserve(6 * sets.size());
  for (const SetTensors<T>& s : sets) {
    const int64_t k = s.index;
    check.tensor(*s.cache_seqlens, ArgName("cache_seqlens", k), {DT::kInt32, 1, bs, 0, "bs"},
                 dev);
    check.tensor(*s.cu_seqlens_k, ArgName("cu_seqlens_k", k),
                 {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
    // cache_seqlens and cu_seqlens are int32: the offsets must fit it.
    check.require(s.seqlen_offset >= INT32_MIN && s.seqlen_offset <= INT32_MAX,
                  ArgName("seqlen_offset", k), " = ", s.seqlen_offset, " is outside [",
                  INT32_MIN, ", ", INT32_MAX, "] (it is added into int32 cache_seqlens)");
    if (pages) {
      check.require(s.page_table != nullptr, ArgName("page_table", k),
                    " is required (got None) unless skip_page_table=True");
      check.tensor(*s.page_table, ArgName("page_table", k), table, dev);
      check.rows_disjoint(*s.page_table, ArgName("page_table", k), bs, max_seq_pages);
      check.require((s.swa_page_table != nullptr) == swa_table,
                    "swa_page_table must be given for every destination set or for none");
      if (s.swa_page_table) {
        check.tensor(*s.swa_page_table, ArgName("swa_page_table", k), table, dev);
        check.rows_disjoint(*s.swa_page_table, ArgName("swa_page_table", k), bs,
                            max_seq_pages);
      }
      if (s.swa_out_cache_loc)
        check.tensor(*s.swa_out_cache_loc, ArgName("swa_out_cache_loc", k), {DT::kInt64, 1},
                     dev);
    }
    if (q_mode != kQModeNone) {
      check.require(s.cu_seqlens_q != nullptr, ArgName("cu_seqlens_q", k),
                    " is required when q_mode = ", q_mode);
      check.tensor(*s.cu_seqlens_q, ArgName("cu_seqlens_q", k),
                   {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
    }
    const int64_t out_len = s.swa_out_cache_loc ? s.swa_out_cache_loc->numel() : 0;
    written.push_back({ArgName("cache_seqlens", k), s.cache_seqlens, 1, bs});
    written.push_back({ArgName("cu_seqlens_k", k), s.cu_seqlens_k, 1, bs + 1});
    written.push_back({ArgName("page_table", k), s.page_table, bs, max_seq_pages});
    written.push_back({ArgName("swa_page_table", k), s.swa_page_table, bs, max_seq_pages});
    written.push_back({ArgName("swa_out_cache_loc", k), s.swa_out_cache_loc, 1, out_len});
    written.push_back({ArgName("cu_seqlens_q", k),
                       q_mode != kQModeNone ? s.cu_seqlens_q : nullptr, 1, bs + 1});
  }
  bool swa_out = false;
  for (const SetTensors<T>& s : sets) swa_out |= s.swa_out_cache_loc != nullptr;
  // A swa_mapping (or swa_v2p) without SWA outputs is accepted and unused
  // (SGLang 0.5.23 passes its mapping on every call). The SWA table comes
  // from swa_v2p when given, else from swa_mapping; swa_out_cache_loc always
  // translates through swa_mapping.
  check.require(t.swa_mapping.has_value() || t.swa_v2p.has_value() || !swa_table,
                "swa_page_table needs swa_mapping or swa_v2p");
  check.require(t.swa_mapping.has_value() || !swa_out,
                "swa_mapping is required when swa_out_cache_loc is given");

  // Every gathered slot p * page_size (p < max_seq_pages) lies in its row.
  // Tested as (max_seq_pages - 1) <= (ctx - 1) / page_size: the product itself
  // can overflow int64 for hostile scalars (page_size = 2**61 + 2**40 and
  // max_seq_pages = 5 wrapped negative, passed, and the gather segfaulted).
  const int64_t ctx = t.req_to_token.size(1);
  if (max_seq_pages > 0 && pages)
    check.require(ctx > 0 && max_seq_pages - 1 <= (ctx - 1) / sc.page_size,
                  "max_seq_pages = ", max_seq_pages, " pages of page_size = ", sc.page_size,
                  " need req_to_token.size(1) > (max_seq_pages - 1) * page_size, got "
                  "req_to_token.size(1) = ", ctx);
  const auto read = [](const char* name, const std::optional<T>& o, bool used) {
    return ArgChecker::whole(name, used && o ? &*o : nullptr);
  };
  check.template disjoint<T>(written,
                 {ArgChecker::whole("req_pool_indices", &t.req_pool_indices),
                  ArgChecker::whole("seq_lens", &t.seq_lens),
                  ArgChecker::whole("req_to_token", pages ? &t.req_to_token : nullptr),
                  read("swa_mapping", t.swa_mapping, swa_table || swa_out),
                  read("out_cache_loc", t.out_cache_loc, swa_out),
                  read("qlens", t.qlens, q_mode == kQModeCumsum),
                  read("seqlen_offsets", t.seqlen_offsets, true),
                  read("v2p", t.v2p, pages), read("swa_v2p", t.swa_v2p, swa_table)});

  TrtllmMhaInputs in;
  in.req_pool_indices = index_array_of(t.req_pool_indices);
  in.seq_lens = index_array_of(t.seq_lens);
  if (q_mode == kQModeCumsum) in.qlens = index_array_of(*t.qlens);
  if (t.seqlen_offsets) in.seqlen_offsets = index_array_of(*t.seqlen_offsets);
  in.req_to_token = t.req_to_token.template const_data_ptr<int32_t>();
  in.req_to_token_stride = t.req_to_token.stride(0);
  in.pool_size = t.req_to_token.size(0);
  const bool swa_v2p_table = swa_table && t.swa_v2p.has_value();
  if ((swa_table && !swa_v2p_table) || swa_out) {
    in.swa_mapping = index_array_of(*t.swa_mapping);
    in.swa_mapping_size = t.swa_mapping->numel();
  }
  if (pages && t.v2p) {
    in.v2p = t.v2p->template const_data_ptr<int64_t>();
    in.v2p_size = t.v2p->numel();
  }
  if (swa_v2p_table) {
    in.swa_v2p = t.swa_v2p->template const_data_ptr<int64_t>();
    in.swa_v2p_size = t.swa_v2p->numel();
  }
  if (swa_out && t.out_cache_loc) {
    in.out_cache_loc = t.out_cache_loc->template const_data_ptr<int64_t>();
    in.out_cache_loc_size = t.out_cache_loc->numel();
  }
  in.bs = bs;
  in.max_seq_pages = max_seq_pages;
  in.page = PageDivisor::make(sc.page_size);
  in.q_stride = static_cast<int32_t>(q_mode == kQModeStrided ? sc.q_stride : 0);
  in.q_mode = static_cast<int32_t>(q_mode);
  in.live_pages_only = sc.live_pages_only;
  in.skip_page_table = sc.skip_page_table;
  in.multi = multi;

  std::vector<TrtllmMhaDest> dests(sets.size());
  for (size_t k = 0; k < sets.size(); ++k) {
    const SetTensors<T>& s = sets[k];
    TrtllmMhaDest& d = dests[k];
    d.cache_seqlens = s.cache_seqlens->template mutable_data_ptr<int32_t>();
    d.cu_seqlens_k = s.cu_seqlens_k->template mutable_data_ptr<int32_t>();
    if (q_mode != kQModeNone) d.cu_seqlens_q = s.cu_seqlens_q->template mutable_data_ptr<int32_t>();
    if (s.page_table) {
      d.page_table = s.page_table->template mutable_data_ptr<int32_t>();
      d.page_table_stride = s.page_table->stride(0);
    }
    if (s.swa_page_table) {
      d.swa_page_table = s.swa_page_table->template mutable_data_ptr<int32_t>();
      d.swa_page_table_stride = s.swa_page_table->stride(0);
    }
    if (s.swa_out_cache_loc) {
      d.swa_out_cache_loc = s.swa_out_cache_loc->template mutable_data_ptr<int64_t>();
      d.swa_out_len = s.swa_out_cache_loc->numel();
    }
    d.seqlen_offset = static_cast<int32_t>(s.seqlen_offset);
  }
  run_on_device(check, dev, MhaLaunch{in, std::move(dests)}, &mha_cpu,
                SGL_CUDA_ONLY(&mha_cuda));
}

}  // namespace

template <typename T>
void update_trtllm_mha_graph_metadata(
    T req_pool_indices, T seq_lens, T req_to_token,
    T cache_seqlens, T cu_seqlens_k, std::optional<T> page_table, int64_t bs,
    int64_t seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<T> swa_mapping, std::optional<T> swa_page_table,
    std::optional<T> out_cache_loc, std::optional<T> swa_out_cache_loc,
    std::optional<T> cu_seqlens_q, std::optional<T> qlens, int64_t q_stride,
    int64_t q_mode, bool live_pages_only, bool skip_page_table,
    std::optional<T> seqlen_offsets, std::optional<T> v2p,
    std::optional<T> swa_v2p) {
  const ArgChecker check("update_trtllm_mha_graph_metadata");
  check.non_negative(bs, "bs");
  if (bs == 0) return;  // documented no-op
  check.require(skip_page_table || page_table.has_value(),
                "page_table is required (got None) unless skip_page_table=True");
  std::vector<SetTensors<T>> sets(1);
  SetTensors<T>& s = sets[0];
  s.cache_seqlens = &cache_seqlens;
  s.cu_seqlens_k = &cu_seqlens_k;
  s.page_table = opt(page_table);
  s.swa_page_table = opt(swa_page_table);
  s.swa_out_cache_loc = opt(swa_out_cache_loc);
  s.cu_seqlens_q = opt(cu_seqlens_q);
  s.seqlen_offset = seqlen_offset;
  update_impl<T>(check, false,
              {req_pool_indices, seq_lens, req_to_token, swa_mapping, out_cache_loc, qlens,
               seqlen_offsets, v2p, swa_v2p},
              sets,
              {bs, max_seq_pages, page_size, q_stride, q_mode, live_pages_only,
               skip_page_table});
}

template <typename T>
void update_trtllm_mha_graph_metadata_multi(
    T req_pool_indices, T seq_lens, T req_to_token,
    std::vector<T> cache_seqlens, std::vector<T> cu_seqlens_k,
    std::vector<T> page_table, std::vector<T> swa_page_table,
    std::vector<T> swa_out_cache_loc, std::vector<T> cu_seqlens_q, int64_t bs,
    std::vector<int64_t> seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<T> swa_mapping, std::optional<T> out_cache_loc,
    std::optional<T> qlens, int64_t q_stride, int64_t q_mode, bool live_pages_only,
    bool skip_page_table, std::optional<T> seqlen_offsets, std::optional<T> v2p,
    std::optional<T> swa_v2p) {
  const ArgChecker check("update_trtllm_mha_graph_metadata_multi");
  const size_t k_sets = cache_seqlens.size();
  check.require(k_sets >= 1, "cache_seqlens must hold at least one tensor (one per "
                             "destination set), got an empty list");
  const char* per_set = "one per destination set, as cache_seqlens";
  check.list_size(cu_seqlens_k, "cu_seqlens_k", k_sets, per_set);
  check.require(seqlen_offset.size() == k_sets, "seqlen_offset must hold ", k_sets,
                " offsets (one per destination set, as cache_seqlens), got ",
                seqlen_offset.size());
  // Optional fields: K tensors or an empty list (not used).
  const auto optional_list = [&](const std::vector<T>& list, const char* name) {
    check.require(list.empty() || list.size() == k_sets, name, " must hold ", k_sets,
                  " tensors (one per destination set) or none, got ", list.size());
  };
  optional_list(page_table, "page_table");
  optional_list(swa_page_table, "swa_page_table");
  optional_list(swa_out_cache_loc, "swa_out_cache_loc");
  optional_list(cu_seqlens_q, "cu_seqlens_q");
  check.non_negative(bs, "bs");
  if (bs == 0) return;  // documented no-op
  check.require(skip_page_table || !page_table.empty(),
                "page_table is required (one per destination set) unless "
                "skip_page_table=True, got an empty list");
  std::vector<SetTensors<T>> sets(k_sets);
  for (size_t k = 0; k < k_sets; ++k) {
    SetTensors<T>& s = sets[k];
    s.index = static_cast<int64_t>(k);
    s.cache_seqlens = &cache_seqlens[k];
    s.cu_seqlens_k = &cu_seqlens_k[k];
    if (!page_table.empty()) s.page_table = &page_table[k];
    if (!swa_page_table.empty()) s.swa_page_table = &swa_page_table[k];
    if (!swa_out_cache_loc.empty()) s.swa_out_cache_loc = &swa_out_cache_loc[k];
    if (!cu_seqlens_q.empty()) s.cu_seqlens_q = &cu_seqlens_q[k];
    s.seqlen_offset = seqlen_offset[k];
  }
  update_impl<T>(check, true,
              {req_pool_indices, seq_lens, req_to_token, swa_mapping, out_cache_loc, qlens,
               seqlen_offsets, v2p, swa_v2p},
              sets,
              {bs, max_seq_pages, page_size, q_stride, q_mode, live_pages_only,
               skip_page_table});
}

}  // namespace sgl_meta

SGL_META_BIND(update_trtllm_mha_graph_metadata)
SGL_META_BIND(update_trtllm_mha_graph_metadata_multi)
