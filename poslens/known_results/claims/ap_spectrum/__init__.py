"""Rows that read ``ap-spectrum``: the learned absolute-position table."""
