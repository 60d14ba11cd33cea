// Bound calls ("plans"): a validated launch saved so that it can be repeated
// without the PyTorch dispatcher (sgl_meta/plan.py).
//
// Recording: sgl_meta_plan_begin() sets a thread-local flag; the op is then
// called as usual (torch.ops, or the DSA copies' eager fast path: every host
// check runs), and where it
// would launch, run_on_device() saves a copy of its plain params struct and
// its CPU / CUDA entry points instead (nothing is written). sgl_meta_plan_end()
// hands the saved launches to Python as an opaque handle, and
// sgl_meta_plan_run(handle) repeats them on the device's current stream.
//
// A saved launch holds raw pointers into the tensors of the recorded call;
// the Python Plan object keeps those tensors' storages alive (plan.py), so a
// pointer can never dangle.
#pragma once

#include <cstdint>
#include <memory>

namespace sgl_meta {

// One saved launch (type-erased params + entry points).
struct SavedLaunch {
  virtual ~SavedLaunch() = default;
  // nullptr on success, else the error text (CPU kernels raise; CUDA
  // launches report launch errors).
  virtual const char* run() const = 0;
};

// True while the calling thread records a plan.
bool plan_recording();

// Appends a launch to the plan being recorded by this thread.
void plan_record(std::unique_ptr<SavedLaunch> launch);

}  // namespace sgl_meta
