// The eager fast path's argument reader (common/dlpack_args.h).
#include "common/dlpack_args.h"

#include <Python.h>

#include "common/dlpack_abi.h"

namespace sgl_meta {
namespace {

using torch::headeronly::ScalarType;
using namespace dlpack;

// Set once by sgl_meta_fast_init() (import time, under the GIL).
PyObject* g_tensor_type = nullptr;
const DLPackExchangeAPI* g_api = nullptr;

bool read_tensor(PyObject* obj, TensorMeta& out) {
  if (obj == nullptr || reinterpret_cast<PyObject*>(Py_TYPE(obj)) != g_tensor_type) return false;
  DLTensor dl;
  if (g_api->dltensor_from_py_object_no_sync(obj, &dl) != 0) {
    PyErr_Clear();  // not describable (e.g. a sparse tensor): the dispatcher says why
    return false;
  }
  ScalarType dtype;
  if (dl.dtype.lanes != 1) return false;
  if (dl.dtype.code == kDLInt && dl.dtype.bits == 32)
    dtype = ScalarType::Int;
  else if (dl.dtype.code == kDLInt && dl.dtype.bits == 64)
    dtype = ScalarType::Long;
  else if (dl.dtype.code == kDLBool && dl.dtype.bits == 8)
    dtype = ScalarType::Bool;  // per-group flags (vLLM's slot_mapping_enabled, dcp_sharded)
  else if (dl.dtype.code == kDLBfloat && dl.dtype.bits == 16)
    dtype = ScalarType::BFloat16;  // the floating set (_op.FLOATING): rows an op copies
  else if (dl.dtype.code == kDLFloat && dl.dtype.bits == 16)
    dtype = ScalarType::Half;
  else if (dl.dtype.code == kDLFloat && dl.dtype.bits == 32)
    dtype = ScalarType::Float;
  else
    return false;
  TensorMeta::DeviceType device;
  if (dl.device.device_type == kDLCPU)
    device = TensorMeta::DeviceType::kCPU;
  else if (dl.device.device_type == kDLCUDA)
    device = TensorMeta::DeviceType::kCUDA;
  else
    return false;
  if (dl.ndim < 0 || dl.ndim > TensorMeta::kMaxDim) return false;
  // No data behind a non-empty tensor (functionalize's C++ wrapper, ZeroTensor,
  // a freed storage): DLPack reports success with a null pointer; the
  // dispatcher path knows what to say about such a tensor.
  if (dl.data == nullptr) {
    bool empty = false;
    for (int32_t i = 0; i < dl.ndim; ++i) empty = empty || dl.shape[i] == 0;
    if (!empty) return false;
  }
  int64_t compact[TensorMeta::kMaxDim];
  const int64_t* strides = dl.strides;
  if (strides == nullptr) {  // DLPack: null strides = compact row-major
    int64_t s = 1;
    for (int32_t i = dl.ndim - 1; i >= 0; --i) {
      compact[i] = s;
      s *= dl.shape[i];
    }
    strides = compact;
  }
  out = TensorMeta(static_cast<char*>(dl.data) + dl.byte_offset, dtype, device,
                   device == TensorMeta::DeviceType::kCUDA ? dl.device.device_id : -1, dl.ndim,
                   dl.shape, strides);
  return true;
}

bool read_integer(PyObject* obj, int64_t& out) {
  if (obj == nullptr || Py_TYPE(obj) != &PyLong_Type) return false;  // bool, numpy ints: dispatcher
  const long long v = PyLong_AsLongLong(obj);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();  // out of int64: the dispatcher's error
    return false;
  }
  out = v;
  return true;
}

// A list or tuple whose every item `read` accepts.
template <typename V, typename Read>
bool read_sequence(PyObject* obj, std::vector<V>& out, Read read) {
  const bool is_list = PyList_Check(obj);
  if (!is_list && !PyTuple_Check(obj)) return false;
  const Py_ssize_t n = is_list ? PyList_Size(obj) : PyTuple_Size(obj);
  out.resize(static_cast<size_t>(n));
  for (Py_ssize_t k = 0; k < n; ++k)
    if (!read(is_list ? PyList_GetItem(obj, k) : PyTuple_GetItem(obj, k), out[k]))
      return false;
  return true;
}

}  // namespace

bool fast_path_ready() { return g_api != nullptr; }

FastArgs::FastArgs(PyObject* args, int n)
    : args_(args), ok_(args != nullptr && PyTuple_Check(args) && PyTuple_Size(args) == n) {}

PyObject* FastArgs::item(int i) const { return PyTuple_GetItem(args_, i); }

bool FastArgs::tensor(int i, TensorMeta& out) const { return read_tensor(item(i), out); }

bool FastArgs::none(int i) const { return item(i) == Py_None; }

bool FastArgs::tensor_list(int i, std::vector<TensorMeta>& out) const {
  return read_sequence(item(i), out, read_tensor);
}

bool FastArgs::integer(int i, int64_t& out) const { return read_integer(item(i), out); }

bool FastArgs::boolean(int i, bool& out) const {
  PyObject* obj = item(i);
  if (obj != Py_True && obj != Py_False) return false;
  out = obj == Py_True;
  return true;
}

bool FastArgs::integer_list(int i, std::vector<int64_t>& out) const {
  return read_sequence(item(i), out, read_integer);
}

void set_python_error(const char* what) { PyErr_SetString(PyExc_RuntimeError, what); }

}  // namespace sgl_meta

extern "C" {

// Enables the fast path for `tensor_type` (torch.Tensor) when it exposes a
// DLPack exchange API of a major version we read; 0 when enabled, else 1.
int sgl_meta_fast_init(PyObject* tensor_type) {
  PyObject* capsule = PyObject_GetAttrString(tensor_type, "__dlpack_c_exchange_api__");
  if (capsule == nullptr) {
    PyErr_Clear();
    return 1;
  }
  auto* api = static_cast<const sgl_meta::dlpack::DLPackExchangeAPI*>(
      PyCapsule_GetPointer(capsule, "dlpack_exchange_api"));
  Py_DECREF(capsule);  // the API struct is static in torch, not owned by the capsule
  if (api == nullptr) {
    PyErr_Clear();
    return 1;
  }
  if (api->header.version.major != sgl_meta::dlpack::kMajorVersion ||
      api->dltensor_from_py_object_no_sync == nullptr)
    return 1;
  Py_INCREF(tensor_type);
  sgl_meta::g_tensor_type = tensor_type;
  sgl_meta::g_api = api;
  return 0;
}

}  // extern "C"
