class BlockTables:
    def gather_block_tables(self, idx_mapping, num_reqs_padded, out=None, out_ptrs=None, num_computed_tokens=None):
        raise AssertionError("vLLM's gather_block_tables ran")

    def compute_slot_mappings(self, idx_mapping, query_start_loc, positions, num_tokens_padded, out=None):
        raise AssertionError("vLLM's compute_slot_mappings ran")
