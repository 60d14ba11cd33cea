// TensorMeta: a tensor's metadata read once into plain fields, with the
// subset of torch::stable::Tensor's interface the host checks use.
//
// The eager fast path (common/dlpack_args.h) fills it from a DLTensor that
// PyTorch's DLPack C exchange API writes without allocating, so the binding
// code that is templated on the tensor type (checks.h, cuda_launch.h) runs the
// same checks on it as on the dispatcher's stable tensors.
#pragma once

#include <cstdint>

#include <torch/headeronly/core/ScalarType.h>

namespace sgl_meta {

class TensorMeta {
 public:
  static constexpr int kMaxDim = 4;
  enum class DeviceType : int32_t { kCPU = 0, kCUDA = 1 };
  struct Device {
    DeviceType type_;
    int32_t index;
    DeviceType type() const { return type_; }
    bool operator==(const Device& o) const { return type_ == o.type_ && index == o.index; }
    bool operator!=(const Device& o) const { return !(*this == o); }
  };

  TensorMeta() = default;
  // `sizes` / `strides` in elements; dim <= kMaxDim (the caller checks).
  TensorMeta(void* data, torch::headeronly::ScalarType dtype, DeviceType device_type,
             int32_t device_index, int32_t dim, const int64_t* sizes, const int64_t* strides)
      : data_(data), dtype_(dtype), device_{device_type, device_index}, dim_(dim) {
    for (int32_t i = 0; i < dim; ++i) {
      sizes_[i] = sizes[i];
      strides_[i] = strides[i];
    }
  }

  bool defined() const { return true; }  // the fast path refuses None before filling one
  torch::headeronly::ScalarType scalar_type() const { return dtype_; }
  int64_t dim() const { return dim_; }
  int64_t size(int64_t i) const { return sizes_[i]; }
  int64_t stride(int64_t i) const { return strides_[i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int32_t i = 0; i < dim_; ++i) n *= sizes_[i];
    return n;
  }
  // PyTorch's definition: strides of a row-major layout, size-1 dims ignored.
  bool is_contiguous() const {
    if (numel() == 0) return true;
    int64_t expected = 1;
    for (int32_t i = dim_ - 1; i >= 0; --i) {
      if (sizes_[i] == 1) continue;
      if (strides_[i] != expected) return false;
      expected *= sizes_[i];
    }
    return true;
  }
  Device device() const { return device_; }
  bool is_cpu() const { return device_.type_ == DeviceType::kCPU; }
  bool is_cuda() const { return device_.type_ == DeviceType::kCUDA; }
  int32_t get_device_index() const { return device_.index; }
  void* data_ptr() const { return data_; }
  template <typename T>
  const T* const_data_ptr() const {
    return static_cast<const T*>(data_);
  }
  template <typename T>
  T* mutable_data_ptr() const {
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  torch::headeronly::ScalarType dtype_ = torch::headeronly::ScalarType::Undefined;
  Device device_{DeviceType::kCPU, -1};
  int32_t dim_ = 0;
  int64_t sizes_[kMaxDim] = {};
  int64_t strides_[kMaxDim] = {};
};

}  // namespace sgl_meta
