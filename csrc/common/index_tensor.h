// IndexArray views of checked torch tensors (binding layer only).
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include "common/index_array.h"

namespace sgl_meta {

// An int32/int64 1-D tensor that ArgChecker has already accepted (Expect's
// DType::kIndex), as the kernels' dtype-agnostic IndexArray.
inline IndexArray index_array_of(const torch::stable::Tensor& t) {
  return {t.const_data_ptr(), t.scalar_type() == torch::headeronly::ScalarType::Long};
}

}  // namespace sgl_meta
