// SM count of the current device, shared by the launchers that size their
// grid to one resident wave (no torch headers).
#include <atomic>

#include <cuda_runtime.h>

#include "common/sm_count.h"

namespace sgl_meta {

int current_device_sm_count(int fallback) {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return fallback;
  // Cached per device: the attribute query is cheap, not free.
  static std::atomic<int> cache[64];
  if (dev >= 0 && dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int c = 0;
  if (cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess || c <= 0)
    return fallback;
  if (dev >= 0 && dev < 64) cache[dev].store(c, std::memory_order_relaxed);
  return c;
}

}  // namespace sgl_meta
