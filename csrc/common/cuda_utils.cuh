// Device-side helpers for the pure CUDA kernels (no torch headers).
#pragma once

#include <cassert>
#include <cstdio>
#include <cuda_runtime.h>

namespace sgl_meta {

// A device-side assert that fires whatever NDEBUG says: a hostile index must
// stop the kernel with a message naming the op and argument, never read or
// write out of bounds. `__assert_fail` is what CUDA's assert() expands to; the
// message shows up as "device-side assert triggered" on the host, and the
// printf above it carries the offending value.
#define SGL_DEVICE_CHECK(cond, fmt, ...)                                   \
  do {                                                                     \
    if (!(cond)) {                                                         \
      printf("sgl_meta: " fmt "\n", ##__VA_ARGS__);                        \
      __assert_fail("sgl_meta: " #cond, __FILE__, __LINE__, __func__);     \
    }                                                                      \
  } while (0)

// Read-only global load through the non-coherent (texture) path.
template <typename T>
__device__ __forceinline__ T load_ro(const T* p) {
  return __ldg(p);
}

}  // namespace sgl_meta
