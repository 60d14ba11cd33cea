// SM count of the current CUDA device (the binding's device guard makes it the
// tensors' device); `fallback` when the query fails.
#pragma once

namespace sgl_meta {

int current_device_sm_count(int fallback);

}  // namespace sgl_meta
