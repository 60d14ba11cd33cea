// Eager fast path: one call's arguments read straight from the Python objects.
//
// torch.ops costs ~0.5 us per tensor argument (Python argument parsing,
// dispatcher, stable-ABI boxing), more host time for an 18-tensor call than
// SGLang's tvm-ffi launcher. For plain eager calls every op's Python function
// hands its arguments as one tuple to the op's extern "C" entry (ctypes.PyDLL,
// sgl_meta/_fast.py; made by SGL_META_BIND, common/op_binding.h), which reads
// each tensor's metadata with PyTorch's DLPack C exchange API
// (`torch.Tensor.__dlpack_c_exchange_api__`: fills a DLTensor, no allocation,
// no refcount) into a TensorMeta and runs the op's own templated checks and
// launch (same errors, same kernels).
//
// Anything this path does not model is handed back to the dispatcher path
// (FastArgs returns false, the entry returns kFallback): a tensor that is not
// exactly torch.Tensor (subclasses, fake and functional tensors), a device
// other than CPU / CUDA, a dtype other than int32 / int64 / bool / bfloat16 /
// float16 / float32 (the dtypes an op description can name), more than 4 dims,
// None where a tensor is required, a non-int scalar. The wrappers also take
// the dispatcher path under torch.compile and while a TorchFunctionMode or
// TorchDispatchMode is active, so tracing and modes see the op as before.
#pragma once

#include <cstdint>
#include <exception>
#include <vector>

#include "common/tensor_meta.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: Python.h's own declaration

namespace sgl_meta {

// Return codes of the extern "C" fast entries.
enum FastResult : int { kFastDone = 0, kFastFallback = 1, kFastError = -1 };

// True once sgl_meta_fast_init() found a usable exchange API.
bool fast_path_ready();

// The positional arguments of one call (a tuple), read on demand.
class FastArgs {
 public:
  // `args` must be a tuple of exactly `n` items, else ok() is false.
  FastArgs(PyObject* args, int n);
  bool ok() const { return ok_; }
  // A torch.Tensor (exact type) on CPU or CUDA, of a dtype above, <= 4 dims.
  bool tensor(int i, TensorMeta& out) const;
  // None.
  bool none(int i) const;
  // A list or tuple of tensors as above.
  bool tensor_list(int i, std::vector<TensorMeta>& out) const;
  // A Python int (exact type) that fits int64.
  bool integer(int i, int64_t& out) const;
  // A list or tuple of such ints.
  bool integer_list(int i, std::vector<int64_t>& out) const;
  // True or False.
  bool boolean(int i, bool& out) const;

 private:
  PyObject* item(int i) const;
  PyObject* args_;
  bool ok_;
};

// Sets a Python RuntimeError (the dispatcher path's exception type for the
// ops' checks) for ctypes.PyDLL to raise.
void set_python_error(const char* what);

// Runs `body` (returns false to fall back) and maps it to a FastResult; a
// check failure (std::exception) becomes the Python error.
template <typename Body>
int fast_call(Body&& body) noexcept {
  if (!fast_path_ready()) return kFastFallback;
  try {
    return body() ? kFastDone : kFastFallback;
  } catch (const std::exception& e) {
    set_python_error(e.what());
    return kFastError;
  } catch (...) {
    set_python_error("sgl_meta: unknown error in the eager fast path");
    return kFastError;
  }
}

}  // namespace sgl_meta
