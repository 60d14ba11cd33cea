import flashinfer  # noqa: F401  (vLLM's module imports it at the top: the tests take it away)

from vllm.v1.worker.gpu.input_batch import _Jit

_copy_page_indices_kernel = _Jit("page_indices", "block_table", "block_table_stride", "cu_num_blocks", "BLOCK_SIZE")


class FlashInferMetadataBuilder:
    def _compute_flashinfer_kv_metadata(self, num_blocks_np, seq_lens_np, block_table_tensor, num_reqs, page_size):
        paged_kv_indptr = self.paged_kv_indptr.copy_to_gpu(num_reqs + 1)
        paged_kv_indices = self.paged_kv_indices[: self.paged_kv_indptr.np[num_reqs]]
        _copy_page_indices_kernel[(num_reqs,)](
            paged_kv_indices,
            block_table_tensor,
            block_table_tensor.stride(0),
            paged_kv_indptr,
            BLOCK_SIZE=1024,
        )
        return paged_kv_indices
