"""flashpp's benchmark suite: TFLOP/s of prefill forward and backward, decode
bandwidth, peak memory and HBM traffic, ours beside every attention
implementation importable on the machine. Entry point: `python3 -m
bench.suite` (bench/suite/README.md)."""
