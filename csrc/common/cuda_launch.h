// Device guard + current stream for the torch binding layer (stable ABI).
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/tensor.h>

#include "common/checks.h"

namespace sgl_meta {

#ifdef SGL_META_WITH_CUDA
// Runs `launch(stream)` on `t`'s device and that device's current stream (not
// the process-wide "current" device), then turns a launch error into an
// exception naming the op.
template <typename Launch>
void launch_on_device_of(const ArgChecker& check, const Tensor& t, Launch&& launch) {
  const int32_t device = t.get_device_index();
  torch::stable::accelerator::DeviceGuard guard(device);
  void* stream = nullptr;
  check.require(aoti_torch_get_current_cuda_stream(device, &stream) == AOTI_TORCH_SUCCESS,
                "could not get the current CUDA stream of cuda:", device);
  const char* err = launch(stream);
  check.require(err == nullptr, "CUDA kernel launch failed: ", err ? err : "");
}
#else
template <typename Launch>
void launch_on_device_of(const ArgChecker& check, const Tensor&, Launch&&) {
  check.fail("this build of sgl_meta has no CUDA kernels (it was built without nvcc); "
             "reinstall a CUDA wheel or build with CUDA to run on GPU tensors");
}
#endif

// Wraps a binding's CUDA launch lambda. A CPU-only build has no CUDA
// launchers to link against, so the lambda is compiled out there.
#ifdef SGL_META_WITH_CUDA
#define SGL_CUDA_ONLY(...) __VA_ARGS__
#else
#define SGL_CUDA_ONLY(...) nullptr
#endif

// Dispatches a validated call: CPU tensors run `cpu()`, CUDA tensors
// `launch_on_device_of(..., cuda)`.
template <typename Cpu, typename Cuda>
void run_on_device(const ArgChecker& check, const Tensor& t, Cpu&& cpu, Cuda&& cuda) {
  if (t.is_cpu()) {
    cpu();
  } else if (t.is_cuda()) {
    launch_on_device_of(check, t, cuda);
  } else {
    check.fail("tensors on ", DeviceOf{t}, " are not supported");
  }
}

}  // namespace sgl_meta
