"""Figures of a benchmark run (bench/plots/figures.py)."""
