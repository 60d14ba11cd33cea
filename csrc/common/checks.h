// Host-side argument checks for the torch binding layer (LibTorch stable ABI).
// Cheap metadata reads only: no device values are looked at here.
//
// Every failure raises std::runtime_error (RuntimeError in Python) with a
// message "sgl_meta.<op>: <argument> <expected>, got <actual>".
#pragma once

#include <optional>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

namespace sgl_meta {

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Short: return "torch.int16";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Bool: return "torch.bool";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::BFloat16: return "torch.bfloat16";
    default: return torch::headeronly::toString(t);
  }
}

// An argument's name in error messages; `index >= 0` names one element of a
// tensor-list argument ("page_table_1_dst[2]"). Built only from literals, so
// naming list elements costs nothing unless a check fails.
struct ArgName {
  const char* base;
  int64_t index = -1;
  ArgName(const char* name) : base(name) {}  // NOLINT: implicit on purpose
  ArgName(const char* name, int64_t i) : base(name), index(i) {}
};

inline std::ostream& operator<<(std::ostream& os, const ArgName& n) {
  os << n.base;
  if (n.index >= 0) os << "[" << n.index << "]";
  return os;
}

// What a tensor argument must look like; `checker.tensor(...)` checks it all.
struct Expect {
  enum class DType { kInt32, kInt64, kIndex /* int32 or int64 */ };
  static constexpr int64_t kAnyDim = -1;  // dtype and device only
  DType dtype;
  int64_t dim;                 // 1, 2 or kAnyDim
  int64_t min_rows = 0;        // size(0) >= min_rows
  int64_t min_cols = 0;        // size(1) >= min_cols (dim == 2)
  const char* rows_why = "";   // e.g. "bs" -- named in the error
  const char* cols_why = "";
};

// Streams "cpu" / "cuda:N" for a tensor when (and only when) an error message
// is built: check arguments are evaluated on every call, so anything passed to
// `require` must be cheap until it is printed.
struct DeviceOf {
  const Tensor& t;
};

inline std::ostream& operator<<(std::ostream& os, const DeviceOf& d) {
  if (d.t.is_cuda()) return os << "cuda:" << d.t.get_device_index();
  if (d.t.is_cpu()) return os << "cpu";
  return os << "device type " << static_cast<int>(d.t.device().type());
}

class ArgChecker {
 public:
  explicit ArgChecker(const char* op) : op_(op) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    std::ostringstream msg;
    msg << "sgl_meta." << op_ << ": ";
    ((msg << args), ...);
    throw std::runtime_error(msg.str());
  }

  // Message arguments are only formatted on failure; keep them cheap to pass
  // (literals, integers, DeviceOf): this runs on every call of every op.
  template <typename... Args>
  void require(bool cond, const Args&... args) const {
    if (C10_UNLIKELY(!cond)) fail(args...);
  }

  void non_negative(int64_t value, const char* name) const {
    require(value >= 0, name, " must be >= 0, got ", value);
  }

  // Checks dtype, rank, minimum sizes, unit inner stride (rows are addressed
  // with stride(0)) and that `t` lives on `device_of`'s device.
  void tensor(const Tensor& t, ArgName name, const Expect& e,
              const Tensor& device_of) const {
    const ScalarType st = t.scalar_type();
    switch (e.dtype) {
      case Expect::DType::kInt32:
        require(st == ScalarType::Int, name, " must have dtype torch.int32, got ",
                dtype_name(st));
        break;
      case Expect::DType::kInt64:
        require(st == ScalarType::Long, name, " must have dtype torch.int64, got ",
                dtype_name(st));
        break;
      case Expect::DType::kIndex:
        require(st == ScalarType::Int || st == ScalarType::Long, name,
                " must have dtype torch.int32 or torch.int64, got ", dtype_name(st));
        break;
    }
    // Each shape query is a shim call: read every value once.
    const int64_t dim = t.dim();
    if (e.dim != Expect::kAnyDim)
      require(dim == e.dim, name, " must be ", e.dim, "-D, got ", dim, "-D");
    require(t.device() == device_of.device(), name, " is on ", DeviceOf{t},
            " but the other tensors are on ", DeviceOf{device_of});
    if (e.dim == Expect::kAnyDim) return;
    const int64_t rows = t.size(0);
    require(rows >= e.min_rows, name, ".size(0) must be >= ", e.rows_why, " = ",
            e.min_rows, ", got ", rows);
    int64_t inner_size = rows;
    if (e.dim == 2) {
      inner_size = t.size(1);
      require(inner_size >= e.min_cols, name, ".size(1) must be >= ", e.cols_why,
              " = ", e.min_cols, ", got ", inner_size);
    }
    // A unit inner stride is what lets the kernels address rows with
    // stride(0); size-1 dimensions have no meaningful stride.
    if (inner_size > 1) {
      const int64_t inner = e.dim - 1;
      const int64_t stride = t.stride(inner);
      require(stride == 1, name, " must have inner stride 1, got stride(", inner,
              ") = ", stride);
    }
  }

  // The `rows` x `cols` region an op writes into `t` must not have rows that
  // share memory (an expand()ed or too-narrow strided view): rows written by
  // different CUDA blocks would race.
  void rows_disjoint(const Tensor& t, ArgName name, int64_t rows, int64_t cols) const {
    if (rows <= 1 || cols == 0) return;
    const int64_t stride = t.stride(0);
    require(stride >= cols, name, " rows overlap: stride(0) = ", stride, " < ", cols,
            " columns written per row");
  }

  void optional_tensor(const std::optional<Tensor>& t, ArgName name,
                       const Expect& e, const Tensor& device_of) const {
    if (t.has_value()) tensor(*t, name, e, device_of);
  }

  // `a` and `b` must be given together or not at all.
  template <typename A, typename B>
  void paired(const std::optional<A>& a, const char* a_name, const std::optional<B>& b,
              const char* b_name) const {
    require(a.has_value() == b.has_value(), a_name, " and ", b_name,
            " must be given together (got ", a_name, a.has_value() ? "" : "=None",
            ", ", b_name, b.has_value() ? "" : "=None", ")");
  }

  // A tensor-list argument must hold `expected` tensors (`why` says why).
  void list_size(const std::vector<Tensor>& list, const char* name, size_t expected,
                 const char* why) const {
    require(list.size() == expected, name, " must hold ", expected, " tensors (", why,
            "), got ", list.size());
  }

 private:
  const char* op_;
};

}  // namespace sgl_meta
