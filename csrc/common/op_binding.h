// An op's entry points, made from its one host function.
//
// Each op's host function (csrc/<family>/binding.cpp) is a template over the
// tensor type: `op<torch::stable::Tensor>` is the dispatcher's kernel (boxed
// with TORCH_BOX for the CPU and CUDA keys), `op<TensorMeta>` serves the eager
// fast path (common/dlpack_args.h), whose extern "C" entry reads the Python
// argument tuple by the host function's own parameter types. Both run the same
// checks and the same launch; only the way a tensor's metadata is read differs.
// The schema lives in torch_bindings.cpp; SGL_META_BIND(op) after the host
// function's definition is all an op needs besides.
#pragma once

#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/tensor.h>

#include "common/dlpack_args.h"
#include "common/tensor_meta.h"

namespace sgl_meta {
namespace fast {

// Reads argument `i` of a call as one host-function parameter type; false
// hands the call to the dispatcher path.
template <typename V>
struct Reader;
template <>
struct Reader<TensorMeta> {
  static bool read(const FastArgs& a, int i, TensorMeta& v) { return a.tensor(i, v); }
};
template <>
struct Reader<std::vector<TensorMeta>> {
  static bool read(const FastArgs& a, int i, std::vector<TensorMeta>& v) {
    return a.tensor_list(i, v);
  }
};
template <>
struct Reader<int64_t> {
  static bool read(const FastArgs& a, int i, int64_t& v) { return a.integer(i, v); }
};
template <>
struct Reader<std::vector<int64_t>> {
  static bool read(const FastArgs& a, int i, std::vector<int64_t>& v) {
    return a.integer_list(i, v);
  }
};
template <>
struct Reader<bool> {
  static bool read(const FastArgs& a, int i, bool& v) { return a.boolean(i, v); }
};

// An optional argument: None, or what V's reader accepts.
template <typename V>
struct Reader<std::optional<V>> {
  static bool read(const FastArgs& a, int i, std::optional<V>& v) {
    if (a.none(i)) return true;
    V value;
    if (!Reader<V>::read(a, i, value)) return false;
    v = value;
    return true;
  }
};

template <typename Fn>
struct Entry;
template <typename... P>
struct Entry<void (*)(P...)> {
  template <void (*Fn)(P...)>
  static int call(PyObject* args) noexcept {
    return fast_call([&] {
      const FastArgs a(args, static_cast<int>(sizeof...(P)));
      if (!a.ok()) return false;
      std::tuple<std::decay_t<P>...> values;
      if (!read_all(a, values, std::index_sequence_for<P...>{})) return false;
      std::apply(Fn, std::move(values));
      return true;
    });
  }

 private:
  template <typename Tuple, size_t... I>
  static bool read_all(const FastArgs& a, Tuple& values, std::index_sequence<I...>) {
    return (Reader<std::tuple_element_t<I, Tuple>>::read(a, static_cast<int>(I),
                                                         std::get<I>(values)) &&
            ...);
  }
};

template <auto Fn>
int entry(PyObject* args) noexcept {
  return Entry<decltype(Fn)>::template call<Fn>(args);
}

}  // namespace fast
}  // namespace sgl_meta

// Registers `sgl_meta::name<Tensor>` for the CPU and CUDA keys (CPU-only
// builds register CUDA too, so that a CUDA tensor gets the op's own "built
// without CUDA" error) and defines the fast entry `sgl_meta_fast_<name>`
// (returns kFastDone, kFastFallback or kFastError with a Python error set).
// Use at global scope after the definition of the host function template.
#define SGL_META_BIND(name)                                                        \
  STABLE_TORCH_LIBRARY_IMPL(sgl_meta, CPU, m) {                                    \
    m.impl(#name, TORCH_BOX(&sgl_meta::name<torch::stable::Tensor>));              \
  }                                                                                \
  STABLE_TORCH_LIBRARY_IMPL(sgl_meta, CUDA, m) {                                   \
    m.impl(#name, TORCH_BOX(&sgl_meta::name<torch::stable::Tensor>));              \
  }                                                                                \
  extern "C" int sgl_meta_fast_##name(PyObject* args) {                            \
    return sgl_meta::fast::entry<&sgl_meta::name<sgl_meta::TensorMeta>>(args);     \
  }
