"""ncnn rnn layers (in progress)."""
