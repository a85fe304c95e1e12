"""HBM traffic of attention: Nsight Compute measurements beside the analytic
IO model, and the FlashAttention paper's GPT-2 medium table on this GPU.
Entry point: `python3 -m bench.io_report` (see bench/suite/README.md)."""
