// fused_metadata_copy / fused_metadata_copy_multi: CPU kernel. The binding's
// region table (params.h) is shared with the CUDA kernel; here each region row
// is one memmove per destination set, so the CPU path runs at memcpy speed
// instead of walking the CUDA kernel's unit space element by element.
#include <cstring>

#include "dsa_metadata_copy/params.h"

namespace sgl_meta {

void fused_metadata_copy_cpu(const DsaCopyParams& p) {
  for (int f = 0; f < kDsaNumFields; ++f) {
    const DsaSourceField& fd = p.field[f];
    if (p.end[f] == p.begin(f)) continue;  // absent, or no rows / columns
    const int64_t rows = fd.rows;
    const size_t row_bytes = static_cast<size_t>(fd.cols) * sizeof(int32_t);
    for (int64_t r = 0; r < rows; ++r) {
      const int32_t* s = fd.src + r * fd.src_row_stride;
      for (int d = 0; d < p.num_sets; ++d) {
        const DsaDstSet& set = p.dst[d];
        std::memmove(set.ptr[f] + r * set.row_stride(f), s, row_bytes);
      }
    }
  }
}

}  // namespace sgl_meta
