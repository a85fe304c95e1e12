"""docs/performance.md generation and the plots, from a synthetic run."""

import contextlib
import importlib.util
import io
import tempfile
import unittest
from pathlib import Path

from bench.suite import cli

REPO = Path(__file__).resolve().parents[3]


def load_doc_script():
    spec = importlib.util.spec_from_file_location("make_performance_doc", REPO / "scripts" / "make_performance_doc.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None


@unittest.skipUnless(HAVE_MATPLOTLIB, "the plots need matplotlib")
class PerformanceDocTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.run_dir = Path(cls.tmp.name) / "runs" / "dry"
        with contextlib.redirect_stdout(io.StringIO()):
            cli.main(["run", "--dry-run", "--preset", "tiny", "--out", str(cls.run_dir), "--backends",
                      "ours,sdpa_cudnn,sdpa_flash", "--decode-backends", "ours,sdpa_flash", "--memory-backends",
                      "standard,ours", "--io-args=--no-sweep"])
        cls.script = load_doc_script()

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_the_run_has_every_stage(self):
        doc = (self.run_dir / "results.json").read_text()
        for key in ('"prefill"', '"decode"', '"memory"', '"gpt2"'):
            self.assertIn(key, doc)
        for png in ("prefill_fwd_full.png", "decode_bandwidth.png", "memory.png", "io_gpt2.png"):
            self.assertGreater((self.run_dir / "plots" / png).stat().st_size, 1000, png)

    def test_dry_runs_are_left_out_unless_allowed(self):
        out = Path(self.tmp.name) / "perf.md"
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            self.script.main([str(self.run_dir.parent), "--output", str(out), "--no-plots"])
        self.assertIn("No GPU results yet", out.read_text())

    def test_sections_tables_and_images(self):
        out = Path(self.tmp.name) / "perf-dry.md"
        with contextlib.redirect_stdout(io.StringIO()):
            self.script.main([str(self.run_dir.parent), "--output", str(out), "--allow-dry-run", "--no-plots"])
        text = out.read_text()
        self.assertIn("DRY RUN", text)
        for title in ("## Prefill", "## Decoding", "## Memory", "## IO: HBM traffic", "## Method"):
            self.assertIn(title, text)
        self.assertIn("| ours | sdpa_cudnn | sdpa_flash |", text.replace("| N | ", "| "))
        self.assertIn("prefill_fwd_full.png)", text)
        self.assertIn("commit `", text)


class GridSectionTest(unittest.TestCase):
    """The newest grid table (device_check.sh's grid step) is shown with where it came from."""

    def test_newest_dated_run_wins_and_h200_breaks_ties(self):
        script = load_doc_script()
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for name, gpu in (("h100-2026-01-02-a", "NVIDIA H100"), ("h200-2026-01-02-a", "NVIDIA H200"),
                              ("h200-2026-01-01-z", "NVIDIA H200"), ("no-date", "?")):
                (root / name).mkdir()
                (root / name / "grid_table.md").write_text(f"| hdim |\n|---|\n| {name} |\n")
                (root / name / "NOTES.md").write_text(f"# run {name}\n")
                (root / name / "summary.txt").write_text(f"name, driver\n{gpu}, 1\n")
            folder = script.newest_grid([root])
            self.assertEqual(folder.name, "h200-2026-01-02-a")
            text = "\n".join(script.grid_section(folder))
            self.assertIn("## Same-run grid", text)
            self.assertIn("| h200-2026-01-02-a |", text)
            self.assertIn("run h200-2026-01-02-a", text)
            self.assertIn("NVIDIA H200", text)
            self.assertEqual(script.grid_section(None), [])


if __name__ == "__main__":
    unittest.main()
