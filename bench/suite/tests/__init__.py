"""Tests of the benchmark suite's own logic (no GPU needed):
python3 -m pytest bench/suite/tests"""
