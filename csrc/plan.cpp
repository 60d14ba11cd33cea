// Bound calls: recording and replay of validated launches (common/plan.h).
// The C entry points are reached from Python with ctypes (sgl_meta/plan.py);
// _C stays an empty limited-API module and the ops themselves are reached
// through the dispatcher as always.
#include <exception>
#include <memory>
#include <vector>

#include "common/dlpack_args.h"  // set_python_error
#include "common/plan.h"

namespace sgl_meta {
namespace {

struct Plan {
  std::vector<std::unique_ptr<SavedLaunch>> launches;
};

thread_local Plan* g_recording = nullptr;

}  // namespace

bool plan_recording() { return g_recording != nullptr; }

void plan_record(std::unique_ptr<SavedLaunch> launch) {
  g_recording->launches.push_back(std::move(launch));
}

}  // namespace sgl_meta

extern "C" {

// Starts recording on this thread; 0 on success, 1 if this thread is already
// recording (recordings do not nest).
int sgl_meta_plan_begin() {
  if (sgl_meta::g_recording != nullptr) return 1;
  sgl_meta::g_recording = new sgl_meta::Plan();
  return 0;
}

// Stops recording; returns the plan (free it with sgl_meta_plan_free).
void* sgl_meta_plan_end() {
  sgl_meta::Plan* plan = sgl_meta::g_recording;
  sgl_meta::g_recording = nullptr;
  return plan;
}

// Number of launches a plan repeats (0 for a recorded no-op, e.g. bs == 0).
int64_t sgl_meta_plan_size(void* plan) {
  if (plan == nullptr) return -1;
  return static_cast<int64_t>(static_cast<sgl_meta::Plan*>(plan)->launches.size());
}

// Repeats the plan's launches. Called through ctypes.PyDLL (the GIL is
// held): 0 on success, else -1 with a Python RuntimeError set, which ctypes
// raises. One argument, so the hot call converts nothing but the handle.
int sgl_meta_plan_run(void* plan) {
  if (plan == nullptr) {
    sgl_meta::set_python_error("no plan (null handle)");
    return -1;
  }
  try {
    for (const auto& launch : static_cast<sgl_meta::Plan*>(plan)->launches) {
      if (const char* e = launch->run()) {
        sgl_meta::set_python_error(e);
        return -1;
      }
    }
    return 0;
  } catch (const std::exception& e) {
    sgl_meta::set_python_error(e.what());
    return -1;
  }
}

void sgl_meta_plan_free(void* plan) { delete static_cast<sgl_meta::Plan*>(plan); }

}  // extern "C"
