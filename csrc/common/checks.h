// Host-side argument checks for the torch binding layer (LibTorch stable ABI).
// Cheap metadata reads only: no device values are looked at here.
//
// Every failure raises std::runtime_error (RuntimeError in Python) with a
// message "sgl_meta.<op>: <argument> <expected>, got <actual>". A wrong dtype
// reads "<argument> must have dtype int32 (torch.int32), got torch.int64": the
// "must have dtype int32" part is SGLang's own wording, which its tests match.
#pragma once

#include <algorithm>
#include <climits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "common/errors.h"

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
    case ScalarType::UInt16: return "torch.uint16";
    case ScalarType::UInt32: return "torch.uint32";
    case ScalarType::UInt64: return "torch.uint64";
    case ScalarType::ComplexHalf: return "torch.complex32";
    case ScalarType::ComplexFloat: return "torch.complex64";
    case ScalarType::ComplexDouble: return "torch.complex128";
    case ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    case ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case ScalarType::Float8_e5m2fnuz: return "torch.float8_e5m2fnuz";
    case ScalarType::Float8_e4m3fnuz: return "torch.float8_e4m3fnuz";
    case ScalarType::Float8_e8m0fnu: return "torch.float8_e8m0fnu";
    default: return torch::headeronly::toString(t);
  }
}

// Bytes per element of the dtypes sgl_meta reads or writes.
inline int64_t element_size(ScalarType t) {
  switch (t) {
    case ScalarType::Long:
    case ScalarType::Double: return 8;
    case ScalarType::Int:
    case ScalarType::Float: return 4;
    case ScalarType::Short:
    case ScalarType::Half:
    case ScalarType::BFloat16: return 2;
    default: return 1;
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
  enum class DType {
    kInt32,
    kInt64,
    kIndex /* int32 or int64 */,
    kBool,
    kFloating /* bfloat16, float16 or float32: values an op copies, never reads as numbers */
  };
  static constexpr int64_t kAnyDim = -1;  // dtype and device only
  DType dtype;
  int64_t dim;                 // 1, 2 or kAnyDim
  int64_t min_rows = 0;        // size(0) >= min_rows
  int64_t min_cols = 0;        // size(1) >= min_cols (dim == 2)
  const char* rows_why = "";   // e.g. "bs" -- named in the error ("": the number alone)
  const char* cols_why = "";
};

// Streams "cpu" / "cuda:N" for a tensor when (and only when) an error message
// is built: check arguments are evaluated on every call, so anything passed to
// `require` must be cheap until it is printed.
// Templated on the tensor type: the dispatcher's stable tensors and the eager
// fast path's TensorMeta (common/tensor_meta.h) go through the same checks.
template <typename T>
struct DeviceOf {
  const T& t;
};
template <typename T>
DeviceOf(const T&) -> DeviceOf<T>;

template <typename T>
std::ostream& operator<<(std::ostream& os, const DeviceOf<T>& d) {
  if (d.t.is_cuda()) return os << "cuda:" << d.t.get_device_index();
  if (d.t.is_cpu()) return os << "cpu";
  return os << "device type " << static_cast<int>(d.t.device().type());
}

// Streams a size bound: "bs = 4", or "1" alone when the bound has no name.
struct AtLeast {
  const char* why;
  int64_t n;
};

inline std::ostream& operator<<(std::ostream& os, const AtLeast& a) {
  if (*a.why) os << a.why << " = ";
  return os << a.n;
}

class ArgChecker {
 public:
  explicit ArgChecker(const char* op) : op_(op) {}

  template <typename... Args>
  [[noreturn]] void fail(const Args&... args) const {
    raise_error(op_, args...);
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
  template <typename T>
  void tensor(const T& t, ArgName name, const Expect& e, const T& device_of) const {
    // torch.ops hands None for a Tensor argument over as an undefined tensor,
    // whose dtype query would fail with a message naming neither.
    require(t.defined(), name, " must be a Tensor, got None");
    const ScalarType st = t.scalar_type();
    switch (e.dtype) {
      case Expect::DType::kInt32:
        require(st == ScalarType::Int, name, " must have dtype int32 (torch.int32), got ",
                dtype_name(st));
        break;
      case Expect::DType::kInt64:
        require(st == ScalarType::Long, name, " must have dtype int64 (torch.int64), got ",
                dtype_name(st));
        break;
      case Expect::DType::kBool:
        require(st == ScalarType::Bool, name, " must have dtype bool (torch.bool), got ",
                dtype_name(st));
        break;
      case Expect::DType::kIndex:
        require(st == ScalarType::Int || st == ScalarType::Long, name,
                " must have dtype int32 or int64 (torch.int32 or torch.int64), got ",
                dtype_name(st));
        break;
      case Expect::DType::kFloating:
        require(st == ScalarType::BFloat16 || st == ScalarType::Half || st == ScalarType::Float, name,
                " must have dtype bfloat16, float16 or float32 (torch.bfloat16, torch.float16 or "
                "torch.float32), got ",
                dtype_name(st));
        break;
    }
    // A non-empty tensor without data (a freed or never allocated storage)
    // would be dereferenced as a null pointer by the kernels.
    if (C10_UNLIKELY(t.data_ptr() == nullptr))
      require(t.numel() == 0, name, " has no data (its storage is not allocated)");
    // Each shape query is a shim call: read every value once.
    const int64_t dim = t.dim();
    if (e.dim != Expect::kAnyDim)
      require(dim == e.dim, name, " must be ", e.dim, "-D, got ", dim, "-D");
    require(t.device() == device_of.device(), name, " is on ", DeviceOf{t},
            " but the other tensors are on ", DeviceOf{device_of});
    if (e.dim == Expect::kAnyDim) return;
    const int64_t rows = t.size(0);
    require(rows >= e.min_rows, name, ".size(0) must be >= ", AtLeast{e.rows_why, e.min_rows}, ", got ", rows);
    int64_t inner_size = rows;
    if (e.dim == 2) {
      inner_size = t.size(1);
      require(inner_size >= e.min_cols, name, ".size(1) must be >= ", AtLeast{e.cols_why, e.min_cols}, ", got ",
              inner_size);
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
  template <typename T>
  void rows_disjoint(const T& t, ArgName name, int64_t rows, int64_t cols) const {
    if (rows <= 1 || cols == 0) return;
    const int64_t stride = t.stride(0);
    require(stride >= cols, name, " rows overlap: stride(0) = ", stride, " < ", cols,
            " columns written per row");
  }

  // A scalar the kernel stores or computes with in a narrower type must fit it
  // (e.g. seqlen_offset is added into int32 cache_seqlens): out-of-range values
  // raise instead of wrapping.
  void in_range(int64_t value, int64_t lo, int64_t hi, const char* name,
                const char* why) const {
    require(value >= lo && value <= hi, name, " = ", value, " is outside [", lo, ", ",
            hi, "] (", why, ")");
  }

  // One output region of a call: `rows` rows of `cols` elements of `t`, rows
  // stride(0) apart (rows == 1 for a 1-D output), starting `offset` elements
  // into `t`. Absent (null) tensors and empty regions are ignored.
  template <typename T>
  struct WrittenOf {
    ArgName name;
    const T* t;
    int64_t rows;
    int64_t cols;
    int64_t offset = 0;
  };

  // The whole of an input tensor as a region (what the kernel may read).
  template <typename T>
  static WrittenOf<T> whole(ArgName name, const T* t) {
    if (t == nullptr) return {name, nullptr, 0, 0};
    const int64_t dim = t->dim();
    if (dim == 2) return {name, t, t->size(0), t->size(1)};
    return {name, t, 1, dim == 1 ? t->size(0) : t->numel()};
  }

  // No two output regions of one call may share memory (e.g. cache_seqlens
  // passed as cu_seqlens_k), and no output may share memory with an input the
  // kernel reads (e.g. page_table passed as req_to_token, seq_lens inside
  // cu_seqlens_k): the kernels write from different threads in no fixed order
  // while other threads read, so an alias gives silently wrong results or
  // indexes with values it just wrote. Inputs may alias each other. Exact for
  // row-strided regions with equal row strides (two tables interleaved in one
  // buffer are fine); regions of different row strides whose address ranges
  // overlap are rejected. Sort + sweep: O(n log n) unless ranges interleave.
  // Call as disjoint<T>({...}, {...}) (braced lists deduce no T).
  template <typename T>
  void disjoint(const std::vector<WrittenOf<T>>& outputs,
                const std::vector<WrittenOf<T>>& inputs = {}) const {
    struct Span {
      const WrittenOf<T>* w;
      bool input;
      uintptr_t begin, end;  // bytes; end = one past the last written byte
      int64_t rows, stride, width;  // stride and width in bytes
    };
    std::vector<Span> spans;
    spans.reserve(outputs.size() + inputs.size());
    auto add = [&](const WrittenOf<T>& w, bool input) {
      if (w.t == nullptr || w.rows <= 0 || w.cols <= 0) return;
      const int64_t esz = element_size(w.t->scalar_type());
      const int64_t stride = w.rows > 1 ? w.t->stride(0) * esz : w.cols * esz;
      const auto begin =
          reinterpret_cast<uintptr_t>(w.t->data_ptr()) + uintptr_t(w.offset * esz);
      spans.push_back({&w, input, begin,
                       begin + uintptr_t((w.rows - 1) * stride + w.cols * esz), w.rows, stride,
                       w.cols * esz});
    };
    for (const WrittenOf<T>& w : outputs) add(w, false);
    const size_t num_outputs = spans.size();
    if (num_outputs == 0) return;
    for (const WrittenOf<T>& w : inputs) add(w, true);
    if (spans.size() < 2) return;
    // Stable: regions that start together keep argument order, so an error
    // names the same pair in the same order every time.
    std::stable_sort(spans.begin(), spans.end(),
                     [](const Span& x, const Span& y) { return x.begin < y.begin; });
    for (size_t i = 0; i < spans.size(); ++i) {
      for (size_t j = i + 1; j < spans.size() && spans[j].begin < spans[i].end; ++j) {
        if (spans[i].input && spans[j].input) continue;
        if (!overlaps(spans[i], spans[j])) continue;
        const Span& out = spans[i].input ? spans[j] : spans[i];
        const Span& other = spans[i].input ? spans[i] : spans[j];
        if (other.input)
          fail(out.w->name, " (written) and ", other.w->name,
               " (read) overlap in memory (an output must not alias an input)");
        fail(spans[i].w->name, " and ", spans[j].w->name,
             " overlap in memory (distinct outputs of one call must not alias)");
      }
    }
  }

  template <typename T>
  void optional_tensor(const std::optional<T>& t, ArgName name, const Expect& e,
                       const T& device_of) const {
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

  // `b` holds the same kind of values as `a` (e.g. a copy's source and
  // destination): the same dtype, no conversion.
  template <typename T>
  void same_dtype(const T& a, ArgName a_name, const T& b, ArgName b_name) const {
    const ScalarType at = a.scalar_type();
    const ScalarType bt = b.scalar_type();
    require(at == bt, b_name, " must have the dtype of ", a_name, " (", dtype_name(at), "), got ",
            dtype_name(bt));
  }

  // A tensor-list argument must hold `expected` tensors (`why` says why).
  template <typename T>
  void list_size(const std::vector<T>& list, const char* name, size_t expected,
                 const char* why) const {
    require(list.size() == expected, name, " must hold ", expected, " tensors (", why,
            "), got ", list.size());
  }

 private:
  // a.begin <= b.begin < a.end (address ranges overlap). Do elements collide?
  template <typename Span>
  static bool overlaps(const Span& a, const Span& b) {
    const int64_t d = static_cast<int64_t>(b.begin - a.begin);
    if (a.rows == 1) return d < a.width;  // b starts inside a's one row
    const int64_t s = a.stride;
    // b must walk a's rows with the same period; otherwise assume a collision.
    if (a.width > s || (b.rows > 1 ? b.stride != s || b.width > s : b.width > s))
      return true;
    // With d = q*s + r, an element of b's row k meets a's row q+k (r < width
    // of a) or wraps into a's row q+k+1 (r + b's width > s).
    const int64_t q = d / s, r = d % s;
    return (r < a.width && q < a.rows) || (r + b.width > s && q + 1 < a.rows);
  }

  const char* op_;
};

}  // namespace sgl_meta
