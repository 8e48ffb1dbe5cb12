"""Rows that read ``attention-window``'s streaming setting (Xiao et al., ICLR 2024, StreamingLLM)."""
