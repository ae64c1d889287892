"""ncnn spectral layers (in progress)."""
