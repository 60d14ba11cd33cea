// fused_metadata_copy / fused_metadata_copy_multi: the argument bundle shared
// by the CPU and CUDA kernels (plain data, no torch types).
//
// Every field the DSA backend refreshes is one rectangular int32 region,
// `rows x cols`, copied from one source to each destination set of a launch.
// 1-D fields are regions of one row. The binding resolves the forward mode,
// the `[1:]` offsets of the cumulative sums and the absent optional fields
// into this table, so the kernels only copy regions.
//
// Work is cut into *units*: `width` consecutive elements of one row: 4 (one
// 16-byte vector store) when every destination of the field in this launch
// starts 16-byte aligned with a row stride that is a multiple of 4 elements,
// else 1. Source alignment does not enter: the CUDA kernel picks the widest
// load each unit's address allows. The units of all fields form one flat
// index space, field after field; `end[f]` is the first unit after field f.
#pragma once

#include <cstdint>

#include "common/fast_div.h"
#include "common/index_array.h"

namespace sgl_meta {

enum DsaForwardMode : int { kDsaDecode = 0, kDsaTargetVerify = 1, kDsaDraftExtend = 2 };

// The regions, in unit-space order. Small 1-D fields first: they are few
// units and land in the first block or two.
enum DsaField : int {
  kDsaCacheSeqlens = 0,    // [0, bs)
  kDsaCuSeqlensK,          // [1, bs + 1)
  kDsaDsaCacheSeqlens,     // [0, n)
  kDsaDsaCuSeqlensK,       // [1, n + 1)
  kDsaSeqlensExpanded,     // [0, S), TARGET_VERIFY / DRAFT_EXTEND
  kDsaFlashmlaNumSplits,   // [0, n + 1)
  kDsaFlashmlaMetadata,    // every element
  kDsaPageTable1,          // [rows, cols]
  kDsaRealPageTable,       // [rows, real_page_table_src.size(1)]
  kDsaNumFields,
};

// Destination sets per launch: the pointer table travels in the kernel's
// parameter space (no device buffer, so no allocation and nothing to upload:
// CUDA-graph safe). 16 sets of 9 pointers + 2 strides is ~1.4 KB, inside the
// 4 KB parameter limit of every driver. Larger K is split into launches of
// at most this many sets (each launch re-reads the sources).
constexpr int kDsaMaxSetsPerLaunch = 16;

struct DsaSourceField {
  const int32_t* src = nullptr;  // first element of the region
  int64_t src_row_stride = 0;    // elements between rows (rows > 1 only)
  int64_t cols = 0;
  int32_t width = 1;             // elements per unit: 4 (int4 stores) or 1
  FastDivU32 units_per_row;      // ceil(cols / width)
};

struct DsaDstSet {
  int32_t* ptr[kDsaNumFields] = {};  // first element of each region, or null
  int64_t page_table_1_stride = 0;
  int64_t real_page_table_stride = 0;

  SGL_HD int64_t row_stride(int f) const {
    return f == kDsaPageTable1 ? page_table_1_stride
                               : (f == kDsaRealPageTable ? real_page_table_stride : 0);
  }
};

struct DsaCopyParams {
  DsaSourceField field[kDsaNumFields];
  int64_t end[kDsaNumFields] = {};  // exclusive prefix sums of the units per field
  DsaDstSet dst[kDsaMaxSetsPerLaunch];
  int32_t num_sets = 0;

  SGL_HD int64_t total_units() const { return end[kDsaNumFields - 1]; }
  SGL_HD int64_t begin(int f) const { return f == 0 ? 0 : end[f - 1]; }
};

// Where unit `local` of field `f` lies: element (row, col) and how many
// elements (1..width) it covers -- fewer at the end of a row.
struct DsaUnit {
  int64_t row;
  int64_t col;
  int32_t len;
};

SGL_HD DsaUnit dsa_locate(const DsaSourceField& fd, uint32_t local) {
  const uint32_t row = fd.units_per_row.div(local);
  const uint32_t v = local - row * fd.units_per_row.divisor;
  DsaUnit u;
  u.row = row;
  u.col = static_cast<int64_t>(v) * fd.width;
  u.len = static_cast<int32_t>(min_i64(fd.width, fd.cols - u.col));
  return u;
}

// CPU kernel (pure copies: no device value can be out of range).
void fused_metadata_copy_cpu(const DsaCopyParams& p);

// CUDA launcher; `stream` is a cudaStream_t. Returns nullptr on success, else
// the error text (the binding turns it into an exception naming the op).
const char* fused_metadata_copy_cuda(const DsaCopyParams& p, void* stream);

}  // namespace sgl_meta
