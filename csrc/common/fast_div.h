// Division by a run-time constant without a divide instruction (no torch
// headers; shared by CPU and CUDA code so the CPU tests exercise the same math).
//
// A GPU has no integer divider: `n / d` on 64-bit values is a ~70-instruction
// subroutine, 32-bit ~20. Kernels that turn a flat index into (row, column)
// once per element pay that on every element, so the divisor is prepared on
// the host as a multiply-high magic number (Granlund & Montgomery):
//   q = (umulhi(n, magic) + n) >> shift,  shift = ceil(log2(d)),
//   magic = floor(2^32 * (2^shift - d) / d) + 1.
// Exact for every n < 2^31 (the sum then fits 32 bits) and every d >= 1.
#pragma once

#include <cstdint>

#include "common/index_array.h"  // SGL_HD

namespace sgl_meta {

struct FastDivU32 {
  uint32_t divisor = 1;
  uint32_t magic = 1;
  uint32_t shift = 0;

  // `d` must be in [1, 2^31).
  static FastDivU32 make(uint32_t d) {
    FastDivU32 f;
    f.divisor = d;
    uint32_t s = 0;
    while ((uint64_t{1} << s) < d) ++s;
    f.shift = s;
    f.magic = static_cast<uint32_t>(
        ((uint64_t{1} << 32) * ((uint64_t{1} << s) - d)) / d + 1);
    return f;
  }

  // n / divisor for n < 2^31.
  SGL_HD uint32_t div(uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(n, magic);
#else
    const uint32_t hi =
        static_cast<uint32_t>((static_cast<uint64_t>(n) * magic) >> 32);
#endif
    return (hi + n) >> shift;
  }
};

}  // namespace sgl_meta
