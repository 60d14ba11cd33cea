// fused_metadata_copy / fused_metadata_copy_multi: CPU kernel. Walks the same
// unit space as the CUDA kernel (same dsa_locate, same vector widths), so the
// CPU tests also cover the CUDA kernel's index arithmetic.
#include "dsa_metadata_copy/params.h"

namespace sgl_meta {

void fused_metadata_copy_cpu(const DsaCopyParams& p) {
  for (int f = 0; f < kDsaNumFields; ++f) {
    const DsaSourceField& fd = p.field[f];
    const int64_t units = p.end[f] - p.begin(f);
    for (int64_t local = 0; local < units; ++local) {
      const DsaUnit u = dsa_locate(fd, static_cast<uint32_t>(local));
      const int32_t* s = fd.src + u.row * fd.src_row_stride + u.col;
      for (int d = 0; d < p.num_sets; ++d) {
        const DsaDstSet& set = p.dst[d];
        int32_t* t = set.ptr[f] + u.row * set.row_stride(f) + u.col;
        for (int32_t e = 0; e < u.len; ++e) t[e] = s[e];
      }
    }
  }
}

}  // namespace sgl_meta
