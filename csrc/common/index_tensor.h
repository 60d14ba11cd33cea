// IndexArray views of checked tensors (binding layer only).
#pragma once

#include <torch/headeronly/core/ScalarType.h>

#include "common/index_array.h"

namespace sgl_meta {

// An int32/int64 1-D tensor that ArgChecker has already accepted (Expect's
// DType::kIndex), as the kernels' dtype-agnostic IndexArray.
template <typename T>
IndexArray index_array_of(const T& t) {
  return {t.data_ptr(), t.scalar_type() == torch::headeronly::ScalarType::Long};
}

}  // namespace sgl_meta
