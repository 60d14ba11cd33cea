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

// The failure half of SGL_DEVICE_CHECK_COLD, out of line: printf marshals
// its arguments through a local-memory buffer and the assert call needs the
// calling convention, so inlined into a kernel it costs a stack frame, extra
// registers and instruction-cache lines on every launch, although it never
// runs. Behind a never-inlined call the hot path keeps one compare and branch.
// noreturn (the trap makes it so whatever __assert_fail is declared as): the
// caller need not keep any register alive across the call.
template <typename... Args>
__device__ __noinline__ __attribute__((noreturn)) void device_check_failed(
    const char* cond, const char* file, int line, const char* func, const char* fmt,
    Args... args) {
  printf(fmt, args...);
  __assert_fail(cond, file, line, func);
  __trap();
}

// SGL_DEVICE_CHECK with the failure path out of line (same message and assert).
#define SGL_DEVICE_CHECK_COLD(cond, fmt, ...)                                        \
  do {                                                                               \
    if (__builtin_expect(!(cond), 0)) {                                              \
      ::sgl_meta::device_check_failed("sgl_meta: " #cond, __FILE__, __LINE__, __func__, \
                                      "sgl_meta: " fmt "\n", ##__VA_ARGS__);          \
    }                                                                                \
  } while (0)

// A failure path of its own: out of line, called only once a check has
// failed, and never returning (it ends in __trap() after its asserts), so the
// caller keeps nothing live across the call and the hot path pays a compare
// and a branch. Declare as `SGL_FAILURE_PATH void name(...)`. Pass it the
// values its messages print, not the kernel's parameter struct: a reference
// makes the kernel form the generic address of its parameter space, a copy
// moves the whole struct through the stack (the vLLM combine kernel spilled
// with the struct and does not with the values).
#define SGL_FAILURE_PATH __device__ __noinline__ __attribute__((noreturn))

// Read-only global load through the non-coherent (texture) path.
template <typename T>
__device__ __forceinline__ T load_ro(const T* p) {
  return __ldg(p);
}

// Global load of data read once (ld.global.cs: evict-first in L2). For the
// first-level gathers of req_to_token, whose sectors a kernel reads once:
// they then leave L2 before data the same kernel reads again (v2p entries).
template <typename T>
__device__ __forceinline__ T load_once(const T* p) {
  return __ldcs(p);
}

// Inclusive prefix sum over the lanes of a warp (lane order = threadIdx.x
// order; unsigned T wraps). Only the first `lanes` lanes are summed exactly
// (later lanes get partial sums): the steps stop at the first power of two >=
// lanes, so a single live lane costs no shuffle. `lanes` is warp-uniform.
template <typename T>
__device__ __forceinline__ T warp_inclusive_sum(T v, int lanes = 32) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    if (d >= lanes) break;
    const T other = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += other;
  }
  return v;
}

}  // namespace sgl_meta
