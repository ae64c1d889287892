"""ncnn detection layers (in progress)."""
