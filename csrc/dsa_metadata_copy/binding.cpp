// fused_metadata_copy / fused_metadata_copy_multi: torch binding (checks,
// region table, dispatch). Both ops share everything below; the single op is
// one destination set given as plain tensors, the multi op K sets given as
// tensor lists (an optional field's list is empty when it is not used).

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "common/cuda_launch.h"
#include "dsa_metadata_copy/params.h"
#include "common/op_binding.h"

namespace sgl_meta {
namespace {

using DT = Expect::DType;

// One set of the nine fields, sources or one destination set; null = not
// given. (The source of page_table_1 is SGLang's `page_indices_src`.)
template <typename T>
struct DsaTensors {
  const T* cache_seqlens;
  const T* cu_seqlens_k;
  const T* page_table_1;
  const T* dsa_cache_seqlens;
  const T* seqlens_expanded;
  const T* dsa_cu_seqlens_k;
  const T* real_page_table;
  const T* flashmla_num_splits;
  const T* flashmla_metadata;
};
template <typename T>
using DsaSources = DsaTensors<T>;
template <typename T>
using DsaDests = DsaTensors<T>;
template <typename T>
const T* opt(const std::optional<T>& t) {
  return t ? &*t : nullptr;
}

const char* mode_name(int64_t mode) {
  return mode == kDsaDecode ? "DECODE" : mode == kDsaTargetVerify ? "TARGET_VERIFY"
                                                                  : "DRAFT_EXTEND";
}

// The call's scalars resolved by forward mode (docs/operators/dsa_metadata_copy.md), with the
// names the size errors quote.
struct DsaShape {
  int64_t mode = 0, bs = 0, n = 0, rows = 0, cols = 0, S = 0;
  bool expanded = false;  // TARGET_VERIFY / DRAFT_EXTEND
  const char* n_name = "bs";
  const char* n1_name = "bs + 1";
  const char* rows_name = "bs";
  const char* cols_name = "max_len";
};

// Checks forward_mode and bs; returns false for the bs == 0 no-op (nothing
// else is looked at then).
bool check_mode_and_bs(const ArgChecker& check, int64_t mode, int64_t bs) {
  check.require(mode >= kDsaDecode && mode <= kDsaDraftExtend,
                "forward_mode must be 0 (DECODE), 1 (TARGET_VERIFY) or 2 "
                "(DRAFT_EXTEND), got ", mode);
  check.non_negative(bs, "bs");
  return bs != 0;
}

// Checks the other scalars and the sources; resolves the shape.
template <typename T>
void check_sources(const ArgChecker& check, const DsaSources<T>& src, int64_t mode,
                   int64_t bs, std::optional<int64_t> max_len_arg,
                   std::optional<int64_t> max_seqlen_k_arg, std::optional<int64_t> S_arg,
                   DsaShape& sh) {
  sh.mode = mode;
  sh.bs = bs;
  sh.expanded = mode != kDsaDecode;
  // Only the scalars the mode uses are checked; the others are ignored.
  const auto used = [&](const std::optional<int64_t>& v, const char* name, const char* why) {
    check.require(v.has_value(), name, " is required in ", mode_name(mode), " mode", why, ", got None");
    check.require(*v >= 0, name, " must be >= 0 in ", mode_name(mode), " mode", why, ", got ", *v);
    return *v;
  };
  if (sh.expanded) {
    const int64_t max_seqlen_k =
        used(max_seqlen_k_arg, "max_seqlen_k", " (columns of page_indices_src copied)");
    const int64_t S = used(S_arg, "seqlens_expanded_size", "");
    sh.S = S;
    sh.n = S;
    sh.cols = max_seqlen_k;
    sh.n_name = "seqlens_expanded_size";
    sh.n1_name = "seqlens_expanded_size + 1";
    sh.rows_name = "page_indices_src.size(0)";
    sh.cols_name = "max_seqlen_k";
  } else {
    sh.n = bs;
    sh.cols = used(max_len_arg, "max_len", " (columns of page_indices_src copied)");
  }

  const T& dev = *src.page_table_1;
  // In modes 1 and 2 its own row count is `rows`, so only DECODE bounds it.
  check.tensor(dev, "page_indices_src",
               {DT::kInt32, 2, sh.expanded ? 0 : bs, sh.cols, "bs", sh.cols_name}, dev);
  sh.rows = sh.expanded ? dev.size(0) : bs;
  check.tensor(*src.cache_seqlens, "cache_seqlens_src", {DT::kInt32, 1, bs, 0, "bs"}, dev);
  check.tensor(*src.cu_seqlens_k, "cu_seqlens_k_src",
               {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
  check.tensor(*src.dsa_cache_seqlens, "dsa_cache_seqlens_src",
               {DT::kInt32, 1, sh.n, 0, sh.n_name}, dev);
  check.tensor(*src.dsa_cu_seqlens_k, "dsa_cu_seqlens_k_src",
               {DT::kInt32, 1, sh.n + 1, 0, sh.n1_name}, dev);
  if (sh.expanded) {
    check.require(src.seqlens_expanded != nullptr, "seqlens_expanded_src is required "
                  "when forward_mode = ", mode, " (", mode_name(mode), ")");
    check.tensor(*src.seqlens_expanded, "seqlens_expanded_src",
                 {DT::kInt32, 1, sh.S, 0, "seqlens_expanded_size"}, dev);
  } else if (src.seqlens_expanded) {  // accepted and ignored in DECODE
    check.tensor(*src.seqlens_expanded, "seqlens_expanded_src", {DT::kInt32, 1}, dev);
  }
  if (src.real_page_table)
    check.tensor(*src.real_page_table, "real_page_table_src",
                 {DT::kInt32, 2, sh.rows, 0, sh.rows_name}, dev);
  check.require((src.flashmla_num_splits != nullptr) == (src.flashmla_metadata != nullptr),
                "flashmla_num_splits_src and flashmla_metadata_src must be given "
                "together (got flashmla_num_splits_src",
                src.flashmla_num_splits ? "" : "=None", ", flashmla_metadata_src",
                src.flashmla_metadata ? "" : "=None", ")");
  if (src.flashmla_num_splits) {
    check.tensor(*src.flashmla_num_splits, "flashmla_num_splits_src",
                 {DT::kInt32, 1, sh.n + 1, 0, sh.n1_name}, dev);
    check.tensor(*src.flashmla_metadata, "flashmla_metadata_src",
                 {DT::kInt32, Expect::kAnyDim}, dev);
    check.require(src.flashmla_metadata->is_contiguous(),
                  "flashmla_metadata_src must be contiguous (it is copied element for "
                  "element)");
  }
}

// `dst` is given iff `src` is.
template <typename T>
void check_pair(const ArgChecker& check, const T* src, const char* src_name,
                const T* dst, ArgName dst_name) {
  check.require((src != nullptr) == (dst != nullptr), src_name, " and ", dst_name,
                " must be given together (got ", src_name, src ? "" : "=None", ", ",
                dst_name, dst ? "" : "=None", ")");
}

// Checks destination set `index` (-1: the single op, names without "[i]").
template <typename T>
void check_dests(const ArgChecker& check, const DsaSources<T>& src, const DsaDests<T>& dst,
                 const DsaShape& sh, int64_t index) {
  const T& dev = *src.page_table_1;
  const ArgName name_cache("cache_seqlens_dst", index);
  check.tensor(*dst.cache_seqlens, name_cache, {DT::kInt32, 1, sh.bs, 0, "bs"}, dev);
  check.tensor(*dst.cu_seqlens_k, {"cu_seqlens_k_dst", index},
               {DT::kInt32, 1, sh.bs + 1, 0, "bs + 1"}, dev);
  const ArgName name_pt1("page_table_1_dst", index);
  check.tensor(*dst.page_table_1, name_pt1,
               {DT::kInt32, 2, sh.rows, sh.cols, sh.rows_name, sh.cols_name}, dev);
  check.rows_disjoint(*dst.page_table_1, name_pt1, sh.rows, sh.cols);
  check.tensor(*dst.dsa_cache_seqlens, {"dsa_cache_seqlens_dst", index},
               {DT::kInt32, 1, sh.n, 0, sh.n_name}, dev);
  check.tensor(*dst.dsa_cu_seqlens_k, {"dsa_cu_seqlens_k_dst", index},
               {DT::kInt32, 1, sh.n + 1, 0, sh.n1_name}, dev);

  const ArgName name_exp("seqlens_expanded_dst", index);
  if (sh.expanded) {
    check.require(dst.seqlens_expanded != nullptr, name_exp, " is required when "
                  "forward_mode = ", sh.mode, " (", mode_name(sh.mode), ")");
    check.tensor(*dst.seqlens_expanded, name_exp,
                 {DT::kInt32, 1, sh.S, 0, "seqlens_expanded_size"}, dev);
  } else {
    check_pair(check, src.seqlens_expanded, "seqlens_expanded_src", dst.seqlens_expanded,
               name_exp);
    if (dst.seqlens_expanded)
      check.tensor(*dst.seqlens_expanded, name_exp, {DT::kInt32, 1}, dev);
  }

  const ArgName name_real("real_page_table_dst", index);
  check_pair(check, src.real_page_table, "real_page_table_src", dst.real_page_table,
             name_real);
  if (dst.real_page_table) {
    check.tensor(*dst.real_page_table, name_real,
                 {DT::kInt32, 2, sh.rows, src.real_page_table->size(1), sh.rows_name,
                  "real_page_table_src.size(1)"},
                 dev);
    check.rows_disjoint(*dst.real_page_table, name_real, sh.rows,
                        src.real_page_table->size(1));
  }

  const ArgName name_splits("flashmla_num_splits_dst", index);
  const ArgName name_meta("flashmla_metadata_dst", index);
  check_pair(check, src.flashmla_num_splits, "flashmla_num_splits_src",
             dst.flashmla_num_splits, name_splits);
  check_pair(check, src.flashmla_metadata, "flashmla_metadata_src",
             dst.flashmla_metadata, name_meta);
  if (dst.flashmla_num_splits) {
    check.tensor(*dst.flashmla_num_splits, name_splits,
                 {DT::kInt32, 1, sh.n + 1, 0, sh.n1_name}, dev);
    check.tensor(*dst.flashmla_metadata, name_meta, {DT::kInt32, Expect::kAnyDim}, dev);
    check.require(dst.flashmla_metadata->is_contiguous(), name_meta,
                  " must be contiguous (it is copied element for element)");
    const int64_t want = src.flashmla_metadata->numel();
    check.require(dst.flashmla_metadata->numel() == want, name_meta,
                  ".numel() must equal flashmla_metadata_src.numel() = ", want, ", got ",
                  dst.flashmla_metadata->numel());
  }
}

// Every destination region of every set, pairwise disjoint (docs/operators.md: distinct
// outputs of one call never alias; a page_table_1 shared by two sets would
// be written twice concurrently).
template <typename T>
void check_dests_disjoint(const ArgChecker& check, const DsaSources<T>& src,
                          const DsaDests<T>* sets, int64_t count, bool indexed,
                          const DsaShape& sh) {
  std::vector<ArgChecker::WrittenOf<T>> regions;
  regions.reserve(static_cast<size_t>(count) * kDsaNumFields);
  const int64_t real_cols = src.real_page_table ? src.real_page_table->size(1) : 0;
  const int64_t meta = src.flashmla_metadata ? src.flashmla_metadata->numel() : 0;
  for (int64_t d = 0; d < count; ++d) {
    const DsaDests<T>& t = sets[d];
    const int64_t i = indexed ? d : -1;
    regions.push_back({{"cache_seqlens_dst", i}, t.cache_seqlens, 1, sh.bs});
    regions.push_back({{"cu_seqlens_k_dst", i}, t.cu_seqlens_k, 1, sh.bs, 1});
    regions.push_back({{"page_table_1_dst", i}, t.page_table_1, sh.rows, sh.cols});
    regions.push_back({{"dsa_cache_seqlens_dst", i}, t.dsa_cache_seqlens, 1, sh.n});
    regions.push_back({{"dsa_cu_seqlens_k_dst", i}, t.dsa_cu_seqlens_k, 1, sh.n, 1});
    if (sh.expanded)
      regions.push_back({{"seqlens_expanded_dst", i}, t.seqlens_expanded, 1, sh.S});
    regions.push_back({{"real_page_table_dst", i}, t.real_page_table, sh.rows, real_cols});
    regions.push_back({{"flashmla_num_splits_dst", i}, t.flashmla_num_splits, 1, sh.n + 1});
    regions.push_back({{"flashmla_metadata_dst", i}, t.flashmla_metadata, 1, meta});
  }
  const auto read = [](const char* name, const T* t) { return ArgChecker::whole(name, t); };
  check.template disjoint<T>(regions,
                 {read("cache_seqlens_src", src.cache_seqlens),
                  read("cu_seqlens_k_src", src.cu_seqlens_k),
                  read("page_indices_src", src.page_table_1),
                  read("dsa_cache_seqlens_src", src.dsa_cache_seqlens),
                  read("seqlens_expanded_src", sh.expanded ? src.seqlens_expanded : nullptr),
                  read("dsa_cu_seqlens_k_src", src.dsa_cu_seqlens_k),
                  read("real_page_table_src", src.real_page_table),
                  read("flashmla_num_splits_src", src.flashmla_num_splits),
                  read("flashmla_metadata_src", src.flashmla_metadata)});
}

const char* const kFieldName[kDsaNumFields] = {
    "cache_seqlens", "cu_seqlens_k", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
    "seqlens_expanded", "flashmla_num_splits", "flashmla_metadata", "page_table_1",
    "real_page_table"};

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

// Builds the region table for destination sets [0, count) of `sets` (count <=
// kDsaMaxSetsPerLaunch). Store width per field: 4 when every destination of
// this launch starts 16-byte aligned with a row stride that is a multiple of
// 4 elements, else 1 (params.h).
template <typename T>
void build_params(const ArgChecker& check, const DsaSources<T>& src, const DsaShape& sh,
                  const DsaDests<T>* sets, int64_t count, DsaCopyParams& p) {
  int64_t rows[kDsaNumFields] = {};
  auto region = [&](int f, const T* s, int64_t offset, int64_t r, int64_t c,
                    bool two_d) {
    if (s == nullptr || r == 0 || c == 0) return;
    rows[f] = r;
    p.field[f].src = s->template const_data_ptr<int32_t>() + offset;
    p.field[f].src_row_stride = two_d ? s->stride(0) : 0;
    p.field[f].cols = c;
  };
  region(kDsaCacheSeqlens, src.cache_seqlens, 0, 1, sh.bs, false);
  region(kDsaCuSeqlensK, src.cu_seqlens_k, 1, 1, sh.bs, false);
  region(kDsaDsaCacheSeqlens, src.dsa_cache_seqlens, 0, 1, sh.n, false);
  region(kDsaDsaCuSeqlensK, src.dsa_cu_seqlens_k, 1, 1, sh.n, false);
  if (sh.expanded) region(kDsaSeqlensExpanded, src.seqlens_expanded, 0, 1, sh.S, false);
  region(kDsaFlashmlaNumSplits, src.flashmla_num_splits, 0, 1, sh.n + 1, false);
  if (src.flashmla_metadata)
    region(kDsaFlashmlaMetadata, src.flashmla_metadata, 0, 1,
           src.flashmla_metadata->numel(), false);
  region(kDsaPageTable1, src.page_table_1, 0, sh.rows, sh.cols, true);
  if (src.real_page_table)
    region(kDsaRealPageTable, src.real_page_table, 0, sh.rows,
           src.real_page_table->size(1), true);

  p.num_sets = static_cast<int32_t>(count);
  for (int64_t d = 0; d < count; ++d) {
    const DsaDests<T>& t = sets[d];
    DsaDstSet& o = p.dst[d];
    auto ptr = [&](int f, const T* dst, int64_t offset) {
      if (rows[f] > 0) o.ptr[f] = dst->template mutable_data_ptr<int32_t>() + offset;
    };
    ptr(kDsaCacheSeqlens, t.cache_seqlens, 0);
    ptr(kDsaCuSeqlensK, t.cu_seqlens_k, 1);
    ptr(kDsaDsaCacheSeqlens, t.dsa_cache_seqlens, 0);
    ptr(kDsaDsaCuSeqlensK, t.dsa_cu_seqlens_k, 1);
    ptr(kDsaSeqlensExpanded, t.seqlens_expanded, 0);
    ptr(kDsaFlashmlaNumSplits, t.flashmla_num_splits, 0);
    ptr(kDsaFlashmlaMetadata, t.flashmla_metadata, 0);
    ptr(kDsaPageTable1, t.page_table_1, 0);
    ptr(kDsaRealPageTable, t.real_page_table, 0);
    if (rows[kDsaPageTable1] > 0) o.page_table_1_stride = t.page_table_1->stride(0);
    if (rows[kDsaRealPageTable] > 0) o.real_page_table_stride = t.real_page_table->stride(0);
  }

  int64_t end = 0;
  for (int f = 0; f < kDsaNumFields; ++f) {
    DsaSourceField& fd = p.field[f];
    if (rows[f] > 0) {
      const bool one_row = rows[f] == 1;
      bool vec = true;
      for (int64_t d = 0; d < count && vec; ++d)
        vec = aligned16(p.dst[d].ptr[f]) && (one_row || p.dst[d].row_stride(f) % 4 == 0);
      fd.width = vec ? 4 : 1;
      fd.rows = rows[f];
      const int64_t per_row = (fd.cols + kDsaTileElems - 1) / kDsaTileElems;
      const int64_t tiles = rows[f] * per_row;
      // The kernel splits a tile index with 32-bit arithmetic.
      check.require(tiles <= INT32_MAX, kFieldName[f], " region of ", rows[f], " x ",
                    fd.cols, " elements is too large for one call");
      fd.tiles_per_row = FastDivU32::make(static_cast<uint32_t>(per_row));
      end += tiles;
    }
    p.end[f] = end;
  }
}

// Checks, then copies into `count` destination sets (`indexed`: the multi op,
// whose error messages name list elements). forward_mode and bs are checked
// by the caller.
template <typename T>
void run(const ArgChecker& check, const DsaSources<T>& src, const DsaDests<T>* sets,
         int64_t count, bool indexed, int64_t mode, int64_t bs, std::optional<int64_t> max_len,
         std::optional<int64_t> max_seqlen_k, std::optional<int64_t> S) {
  DsaShape sh;
  check_sources(check, src, mode, bs, max_len, max_seqlen_k, S, sh);
  for (int64_t d = 0; d < count; ++d) check_dests(check, src, sets[d], sh, indexed ? d : -1);
  check_dests_disjoint(check, src, sets, count, indexed, sh);
  // Sets beyond one launch's capacity go in further launches on the same
  // stream (sources are only read, so the launches are independent).
  for (int64_t first = 0; first < count; first += kDsaMaxSetsPerLaunch) {
    const int64_t n = std::min<int64_t>(count - first, kDsaMaxSetsPerLaunch);
    DsaCopyParams p;
    build_params(check, src, sh, sets + first, n, p);
    run_on_device(check, *src.page_table_1, p, &fused_metadata_copy_cpu,
                  SGL_CUDA_ONLY(&fused_metadata_copy_cuda));
  }
}

// The multi op's body on either tensor type: `lists` are the destination lists
// in argument order (one tensor per set; an optional field's list empty when
// unused).
constexpr int kDestLists = 9;
template <typename T>
void run_multi(const ArgChecker& check, const DsaSources<T>& src,
               const std::vector<T>* const (&lists)[kDestLists], int64_t forward_mode,
               int64_t bs, std::optional<int64_t> max_len, std::optional<int64_t> max_seqlen_k,
               std::optional<int64_t> S) {
  if (!check_mode_and_bs(check, forward_mode, bs)) return;  // bs == 0: no-op
  const auto& [cache, cu, pt1, dsa_cache, expanded, dsa_cu, real, splits, meta] = lists;
  const size_t k = cache->size();
  check.require(k >= 1, "cache_seqlens_dst must hold at least one tensor (one per "
                "destination set), got 0");
  const char* kPerSet = "one per destination set, like cache_seqlens_dst";
  check.list_size(*cu, "cu_seqlens_k_dst", k, kPerSet);
  check.list_size(*pt1, "page_table_1_dst", k, kPerSet);
  check.list_size(*dsa_cache, "dsa_cache_seqlens_dst", k, kPerSet);
  check.list_size(*dsa_cu, "dsa_cu_seqlens_k_dst", k, kPerSet);
  // An optional field's list holds K tensors when its source is given, else
  // none (see the schema comment in torch_bindings.cpp for why not `[]?`).
  auto optional_list = [&](const std::vector<T>& list, const char* name, bool used,
                           const char* src_name) {
    if (used)
      check.require(list.size() == k, name, " must hold ", k, " tensors (one per "
                    "destination set, as ", src_name, " is given), got ", list.size());
    else
      check.require(list.empty(), name, " must be empty (", src_name,
                    " is None), got ", list.size(), " tensors");
  };
  if (forward_mode != kDsaDecode)
    check.require(src.seqlens_expanded != nullptr && expanded->size() == k,
                  "seqlens_expanded_src and ", k, " seqlens_expanded_dst tensors (one "
                  "per destination set) are required when forward_mode = ",
                  forward_mode, " (", mode_name(forward_mode), "), got seqlens_expanded_src",
                  src.seqlens_expanded ? "" : "=None", " and ", expanded->size(),
                  " seqlens_expanded_dst tensors");
  else
    optional_list(*expanded, "seqlens_expanded_dst", src.seqlens_expanded != nullptr,
                  "seqlens_expanded_src");
  optional_list(*real, "real_page_table_dst", src.real_page_table != nullptr,
                "real_page_table_src");
  optional_list(*splits, "flashmla_num_splits_dst", src.flashmla_num_splits != nullptr,
                "flashmla_num_splits_src");
  optional_list(*meta, "flashmla_metadata_dst", src.flashmla_metadata != nullptr,
                "flashmla_metadata_src");

  auto at = [](const std::vector<T>* list, size_t i) {
    return list->empty() ? nullptr : &(*list)[i];
  };
  std::vector<DsaDests<T>> sets(k);
  for (size_t i = 0; i < k; ++i)
    sets[i] = DsaDests<T>{&(*cache)[i], &(*cu)[i],      &(*pt1)[i],
                          &(*dsa_cache)[i], at(expanded, i), &(*dsa_cu)[i],
                          at(real, i),     at(splits, i),   at(meta, i)};
  run(check, src, sets.data(), static_cast<int64_t>(k), true, forward_mode, bs, max_len,
      max_seqlen_k, S);
}

}  // namespace

template <typename T>
void fused_metadata_copy(
    T cache_seqlens_src, T cu_seqlens_k_src, T page_indices_src,
    T dsa_cache_seqlens_src, std::optional<T> seqlens_expanded_src,
    T dsa_cu_seqlens_k_src, std::optional<T> real_page_table_src,
    std::optional<T> flashmla_num_splits_src,
    std::optional<T> flashmla_metadata_src, T cache_seqlens_dst,
    T cu_seqlens_k_dst, T page_table_1_dst, T dsa_cache_seqlens_dst,
    std::optional<T> seqlens_expanded_dst, T dsa_cu_seqlens_k_dst,
    std::optional<T> real_page_table_dst,
    std::optional<T> flashmla_num_splits_dst,
    std::optional<T> flashmla_metadata_dst, int64_t forward_mode, int64_t bs,
    std::optional<int64_t> max_len, std::optional<int64_t> max_seqlen_k,
    std::optional<int64_t> seqlens_expanded_size) {
  const ArgChecker check("fused_metadata_copy");
  if (!check_mode_and_bs(check, forward_mode, bs)) return;  // bs == 0: no-op
  const DsaSources<T> src{&cache_seqlens_src,        &cu_seqlens_k_src,
                               &page_indices_src,         &dsa_cache_seqlens_src,
                               opt(seqlens_expanded_src), &dsa_cu_seqlens_k_src,
                               opt(real_page_table_src),  opt(flashmla_num_splits_src),
                               opt(flashmla_metadata_src)};
  const DsaDests<T> dst{&cache_seqlens_dst,        &cu_seqlens_k_dst,
                             &page_table_1_dst,         &dsa_cache_seqlens_dst,
                             opt(seqlens_expanded_dst), &dsa_cu_seqlens_k_dst,
                             opt(real_page_table_dst),  opt(flashmla_num_splits_dst),
                             opt(flashmla_metadata_dst)};
  run(check, src, &dst, 1, false, forward_mode, bs, max_len, max_seqlen_k, seqlens_expanded_size);
}

template <typename T>
void fused_metadata_copy_multi(
    T cache_seqlens_src, T cu_seqlens_k_src, T page_indices_src,
    T dsa_cache_seqlens_src, std::optional<T> seqlens_expanded_src,
    T dsa_cu_seqlens_k_src, std::optional<T> real_page_table_src,
    std::optional<T> flashmla_num_splits_src,
    std::optional<T> flashmla_metadata_src, std::vector<T> cache_seqlens_dst,
    std::vector<T> cu_seqlens_k_dst, std::vector<T> page_table_1_dst,
    std::vector<T> dsa_cache_seqlens_dst, std::vector<T> seqlens_expanded_dst,
    std::vector<T> dsa_cu_seqlens_k_dst, std::vector<T> real_page_table_dst,
    std::vector<T> flashmla_num_splits_dst,
    std::vector<T> flashmla_metadata_dst, int64_t forward_mode, int64_t bs,
    std::optional<int64_t> max_len, std::optional<int64_t> max_seqlen_k,
    std::optional<int64_t> seqlens_expanded_size) {
  const DsaSources<T> src{&cache_seqlens_src,        &cu_seqlens_k_src,
                               &page_indices_src,         &dsa_cache_seqlens_src,
                               opt(seqlens_expanded_src), &dsa_cu_seqlens_k_src,
                               opt(real_page_table_src),  opt(flashmla_num_splits_src),
                               opt(flashmla_metadata_src)};
  const std::vector<T>* const lists[kDestLists] = {
      &cache_seqlens_dst,    &cu_seqlens_k_dst,    &page_table_1_dst,
      &dsa_cache_seqlens_dst, &seqlens_expanded_dst, &dsa_cu_seqlens_k_dst,
      &real_page_table_dst,  &flashmla_num_splits_dst, &flashmla_metadata_dst};
  run_multi(ArgChecker("fused_metadata_copy_multi"), src, lists, forward_mode, bs,
            max_len, max_seqlen_k, seqlens_expanded_size);
}

}  // namespace sgl_meta

SGL_META_BIND(fused_metadata_copy)
SGL_META_BIND(fused_metadata_copy_multi)
