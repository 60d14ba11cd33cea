// The host-time floor of one kernel launch from Python (benchmarks/bound_calls.py
// compiles this with nvcc when it is on PATH and calls it through ctypes, the
// way a bound call reaches the extension): an empty kernel with a parameter
// block of the given size, launched on the legacy default stream (torch's
// current stream unless one is set).
#include <cuda_runtime.h>

template <int Bytes>
struct Block {
  char bytes[Bytes];
};

template <int Bytes>
__global__ void empty_kernel(const __grid_constant__ Block<Bytes> p) {
  if (p.bytes[threadIdx.x % Bytes] == 123 && blockIdx.x == 1u << 30) asm volatile("trap;");
}

template <int Bytes>
int launch() {
  Block<Bytes> p{};
  empty_kernel<Bytes><<<1, 32>>>(p);
  return cudaGetLastError() == cudaSuccess ? 0 : 1;
}

extern "C" {
int floor_noop() { return 0; }
int floor_launch_64() { return launch<64>(); }
int floor_launch_512() { return launch<512>(); }
int floor_launch_2048() { return launch<2048>(); }
}
