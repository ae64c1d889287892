"""ncnn attention layers (in progress)."""
