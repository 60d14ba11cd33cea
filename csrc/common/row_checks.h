// The two checks of a row's scalars that the CPU kernels of several families
// make before writing, worded once: a request index outside req_to_token and
// a length outside [0, 2**31 - 1]. Host only; free of torch headers.
#pragma once

#include <cstdint>

#include "common/errors.h"
#include "common/index_array.h"

namespace sgl_meta {

// "req_pool_indices[b] = req is outside [0, req_to_token.size(0) = pool_size)".
[[noreturn]] inline void raise_request_index(const char* op, int64_t b, int64_t req, int64_t pool_size) {
  raise_error(op, "req_pool_indices[", b, "] = ", req, " is outside [0, req_to_token.size(0) = ", pool_size,
              ")");
}

inline void check_request_index(const char* op, int64_t b, int64_t req, int64_t pool_size) {
  if (req < 0 || req >= pool_size) raise_request_index(op, b, req, pool_size);
}

// "name[i] = len is negative" / "... does not fit int32".
inline void check_length(const char* op, const char* name, int64_t i, int64_t len) {
  if (!length_fits(len))
    raise_error(op, name, "[", i, "] = ", len, len < 0 ? " is negative" : " does not fit int32");
}

}  // namespace sgl_meta
