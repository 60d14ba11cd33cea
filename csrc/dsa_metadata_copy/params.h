// fused_metadata_copy / fused_metadata_copy_multi: the argument bundle shared
// by the CPU and CUDA kernels (plain data, no torch types).
//
// Every field the DSA backend refreshes is one rectangular int32 region,
// `rows x cols`, copied from one source to each destination set of a launch.
// 1-D fields are regions of one row. The binding resolves the forward mode,
// the `[1:]` offsets of the cumulative sums and the absent optional fields
// into this table, so the kernels only copy regions.
//
// Work is cut into *tiles*: kDsaTileElems consecutive elements of one row (the
// last tile of a row may be short). A CUDA thread block copies one tile per
// step, 4 elements per thread, so the row/column arithmetic is done once per
// tile, not per element. Per field, `width` is 4 when every destination of the
// field in this launch starts 16-byte aligned with a row stride that is a
// multiple of 4 elements (16-byte vector stores), else 1. Source alignment
// does not enter: the CUDA kernel picks the widest load each address allows.
// The tiles of all fields form one flat index space, field after field;
// `end[f]` is the first tile after field f.
#pragma once

#include <cstdint>

#include "common/fast_div.h"
#include "common/index_array.h"

namespace sgl_meta {

enum DsaForwardMode : int { kDsaDecode = 0, kDsaTargetVerify = 1, kDsaDraftExtend = 2 };

// The regions, in tile-space order. Small 1-D fields first: they are a tile
// or two each and land in the first blocks.
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

// Elements per tile: 256 threads x 4 elements (one 16-byte vector each).
constexpr int kDsaTileElems = 1024;

struct DsaSourceField {
  const int32_t* src = nullptr;  // first element of the region
  int64_t src_row_stride = 0;    // elements between rows (rows > 1 only)
  int64_t rows = 0;
  int64_t cols = 0;
  int32_t width = 1;             // 4: 16-byte stores into every destination; else 1
  FastDivU32 tiles_per_row;      // ceil(cols / kDsaTileElems)
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
  int64_t end[kDsaNumFields] = {};  // exclusive prefix sums of the tiles per field
  DsaDstSet dst[kDsaMaxSetsPerLaunch];
  int32_t num_sets = 0;

  SGL_HD int64_t total_tiles() const { return end[kDsaNumFields - 1]; }
  SGL_HD int64_t begin(int f) const { return f == 0 ? 0 : end[f - 1]; }
};

// CPU kernel (pure copies: no device value can be out of range).
void fused_metadata_copy_cpu(const DsaCopyParams& p);

// CUDA launcher; `stream` is a cudaStream_t. Returns nullptr on success, else
// the error text (the binding turns it into an exception naming the op).
const char* fused_metadata_copy_cuda(const DsaCopyParams& p, void* stream);

}  // namespace sgl_meta
