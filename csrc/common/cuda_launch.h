// Device guard + current stream for the torch binding layer (stable ABI).
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>

#ifdef SGL_META_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

#include "common/checks.h"

namespace sgl_meta {

#ifdef SGL_META_WITH_CUDA
// Calls `launch(stream)` with `device` current and that device's current
// stream; nullptr or the error text. The device is switched (and restored)
// only when it is not already current: the usual case needs no guard, which
// costs a heap allocation and device queries through the shim per call.
template <typename Launch>
const char* with_device(int32_t device, Launch&& launch) {
  auto on_current_stream = [&]() -> const char* {
    void* stream = nullptr;
    if (aoti_torch_get_current_cuda_stream(device, &stream) != AOTI_TORCH_SUCCESS)
      return "could not get the current CUDA stream";
    return launch(stream);
  };
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current == device) return on_current_stream();
  torch::stable::accelerator::DeviceGuard guard(device);
  return on_current_stream();
}

// Runs `launch(stream)` on `t`'s device and that device's current stream (not
// the process-wide "current" device), then turns a launch error into an
// exception naming the op.
template <typename T, typename Launch>
void launch_on_device_of(const ArgChecker& check, const T& t, Launch&& launch) {
  const char* err = with_device(t.get_device_index(), launch);
  check.require(err == nullptr, "CUDA kernel launch failed: ", err ? err : "");
}
#else
template <typename T, typename Launch>
void launch_on_device_of(const ArgChecker& check, const T&, Launch&&) {
  check.fail("this build of sgl_meta has no CUDA kernels (it was built without nvcc); "
             "reinstall a CUDA wheel or build with CUDA to run on GPU tensors");
}
#endif

// Wraps a binding's CUDA launcher (run_on_device's last argument). A CPU-only
// build has no CUDA launchers to link against, so it is nullptr there.
#ifdef SGL_META_WITH_CUDA
#define SGL_CUDA_ONLY(...) __VA_ARGS__
#else
#define SGL_CUDA_ONLY(...) nullptr
#endif

template <typename P>
using CpuKernel = void (*)(const P&);
template <typename P>
using CudaLauncher = const char* (*)(const P&, void*);
// Keeps a parameter out of template argument deduction (SGL_CUDA_ONLY(fn) is
// nullptr in CPU-only builds, from which P cannot be deduced).
template <typename T>
struct NonDeduced {
  using type = T;
};

// Dispatches a validated call with plain params `p` to the CPU kernel or the
// CUDA launcher by `t`'s device. Pass the CUDA launcher as SGL_CUDA_ONLY(fn)
// so CPU-only builds compile.
template <typename P, typename T>
void run_on_device(const ArgChecker& check, const T& t, const P& p, CpuKernel<P> cpu,
                   typename NonDeduced<CudaLauncher<P>>::type cuda) {
  if (t.is_cpu()) {
    cpu(p);
  } else if (t.is_cuda()) {
    launch_on_device_of(check, t, [&](void* stream) { return cuda(p, stream); });
  } else {
    check.fail("tensors on ", DeviceOf{t}, " are not supported");
  }
}

}  // namespace sgl_meta
