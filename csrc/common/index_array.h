// Plain C++/CUDA helpers shared by the CPU and CUDA kernels (no torch headers).
#pragma once

#include <climits>
#include <cstdint>

#if defined(__CUDACC__)
#define SGL_HD __host__ __device__ __forceinline__
#else
#define SGL_HD inline
#endif

namespace sgl_meta {

// A read-only 1-D index tensor that may be int32 or int64. Resolving the dtype
// with one predictable branch per load keeps a single kernel instantiation for
// every (req_pool_indices, seq_lens, qlens) dtype combination instead of 2^3.
struct IndexArray {
  const void* data = nullptr;
  bool is64 = false;

  SGL_HD int64_t operator[](int64_t i) const {
    return is64 ? static_cast<const int64_t*>(data)[i]
                : static_cast<int64_t>(static_cast<const int32_t*>(data)[i]);
  }
  // operator[] through the read-only (non-coherent) cache path on the GPU,
  // for tables a kernel only reads (slot mappings, page translations).
  SGL_HD int64_t ldg(int64_t i) const {
#if defined(__CUDA_ARCH__)
    return is64 ? __ldg(static_cast<const int64_t*>(data) + i)
                : static_cast<int64_t>(__ldg(static_cast<const int32_t*>(data) + i));
#else
    return (*this)[i];
#endif
  }
  // operator[] with the dtype known at compile time (a kernel instantiated
  // per dtype: one plain load, no predicated pair).
  template <bool k64>
  SGL_HD int64_t at(int64_t i) const {
    return k64 ? static_cast<const int64_t*>(data)[i]
               : static_cast<int64_t>(static_cast<const int32_t*>(data)[i]);
  }
  SGL_HD bool present() const { return data != nullptr; }
};

// Floor division by a positive divisor, as torch.floor_divide: -1 // 64 == -1.
// (C++ '/' truncates toward zero, as Triton's '//' does; the eager PyTorch
// path floors, and the op contract keeps the eager meaning.)
SGL_HD int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && a < 0) ? q - 1 : q;
}

// Page-size divisor with a shift fast path: an arithmetic right shift IS floor
// division for powers of two, negative values included, and avoids the ~40
// instruction 64-bit integer division on the GPU for the common page sizes.
struct PageDivisor {
  int64_t page_size = 1;
  int shift = -1;  // log2(page_size) when it is a power of two, else -1

  static PageDivisor make(int64_t page_size) {
    PageDivisor d;
    d.page_size = page_size;
    if (page_size > 0 && (page_size & (page_size - 1)) == 0) {
      int s = 0;
      while ((int64_t{1} << s) != page_size) ++s;
      d.shift = s;
    }
    return d;
  }
  SGL_HD int64_t div(int64_t a) const {
    return shift >= 0 ? (a >> shift) : floor_div(a, page_size);
  }
  // ceil(a / page_size), 0 for a <= 0. Not div(a + page_size - 1): that sum
  // overflows int64 for page sizes near 2**63.
  SGL_HD int64_t ceil_div(int64_t a) const { return a <= 0 ? 0 : div(a - 1) + 1; }

  // div() of an int32 value (slots, int32 lengths) in 32-bit arithmetic: the
  // GPU has no 64-bit divide instruction (a ~70-instruction subroutine), and
  // 32-bit shifts are single instructions. Same results as div(a).
  SGL_HD int64_t div32(int32_t a) const {
    if (shift >= 0) return shift >= 31 ? (a >> 31) : (a >> shift);
    if (page_size > INT32_MAX) return a < 0 ? -1 : 0;  // |a| <= 2**31 < page_size
    const int32_t d = static_cast<int32_t>(page_size);
    const int32_t q = a / d;
    return (a % d != 0 && a < 0) ? q - 1 : q;
  }
  // ceil_div() of an int32 length, 0 for a <= 0.
  SGL_HD int64_t ceil_div32(int32_t a) const { return a <= 0 ? 0 : div32(a - 1) + 1; }
};

// Lengths (token counts) follow one contract in every op: a length lies in
// [0, 2**31 - 1], the range of the int32 length outputs (cache_seqlens,
// cu_seqlens_*); a negative one, or one whose result does not fit, is an error
// (RuntimeError on CPU, a named device assert on CUDA). One unsigned compare:
// a negative value turns into a huge unsigned one.
SGL_HD bool length_fits(int64_t v) { return static_cast<uint64_t>(v) <= INT32_MAX; }

// A running sum of lengths as the kernels form it, mod 2**32, every term
// already known to pass length_fits. At the first row whose true sum passes
// INT32_MAX the sum is still below 2**32 (the sum before it and the new term
// are each below 2**31), so it reads as a negative int32: checking the sign of
// every written sum finds every overflow without 64-bit sums.
SGL_HD bool running_sum_fits(uint32_t sum) { return sum <= INT32_MAX; }

SGL_HD int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
SGL_HD int64_t max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

}  // namespace sgl_meta
