// The part of the DLPack C ABI (https://github.com/dmlc/dlpack, dlpack.h,
// major version 1) that the eager fast path reads. PyTorch ships dlpack.h as
// ATen/dlpack.h but refuses it under TORCH_TARGET_VERSION (stable-ABI builds),
// so the few layouts used are declared here, field for field as the spec
// defines them; sgl_meta_fast_init() checks the major version before use.
#pragma once

#include <cstdint>

namespace sgl_meta::dlpack {

constexpr uint32_t kMajorVersion = 1;
constexpr int32_t kDLCPU = 1;   // DLDeviceType
constexpr int32_t kDLCUDA = 2;  // DLDeviceType
constexpr uint8_t kDLInt = 0;     // DLDataTypeCode
constexpr uint8_t kDLFloat = 2;   // DLDataTypeCode (IEEE float16 / float32)
constexpr uint8_t kDLBfloat = 4;  // DLDataTypeCode (bfloat16)
constexpr uint8_t kDLBool = 6;    // DLDataTypeCode (8-bit, as torch.bool)

struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLDevice {
  int32_t device_type;  // DLDeviceType (a C enum: int-sized)
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // may be null: compact row-major
  uint64_t byte_offset;
};
struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};
// The function table behind `__dlpack_c_exchange_api__` (a PyCapsule named
// "dlpack_exchange_api"); only dltensor_from_py_object_no_sync is called.
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  // Fills `out` for a tensor of the exporting type; 0, or -1 with a Python error set.
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);
  void* current_work_stream;
};

}  // namespace sgl_meta::dlpack
