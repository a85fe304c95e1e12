import unittest

from bench.io_report import model, ncu

RAW = '''==PROF== Connected to process 4242
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","dram__bytes_read.sum","dram__bytes_write.sum"
"","","","","","","","","","","","byte","Kbyte"
"0","4242","python3","h","gemm_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","1,048,576","2"
"1","4242","python3","h","softmax_kernel","1","7","(128, 1, 1)","(64, 1, 1)","0","9.0","4096","0.5"
'''

DETAILS = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","fwd","1","7","(128,1,1)","(8,1,1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Mbyte","1.5"
"0","1","python3","h","fwd","1","7","(128,1,1)","(8,1,1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","byte","100"
"1","1","python3","h","bwd","1","7","(128,1,1)","(8,1,1)","0","9.0","Command line profiler metrics","dram__bytes_read.sum","Gbyte","2"
"1","1","python3","h","bwd","1","7","(128,1,1)","(8,1,1)","0","9.0","Command line profiler metrics","dram__bytes_write.sum","Kbyte","3"
'''


class NcuParseTest(unittest.TestCase):
    def test_raw_page_with_units_row_and_thousands_separators(self):
        kernels = ncu.parse_csv(RAW)
        self.assertEqual([k["name"] for k in kernels], ["gemm_kernel", "softmax_kernel"])
        self.assertEqual(kernels[0]["read"], 1048576)
        self.assertEqual(kernels[0]["write"], 2000)
        totals = ncu.totals(kernels)
        self.assertEqual(totals["kernels"], 2)
        self.assertEqual(totals["bytes"], 1048576 + 2000 + 4096 + 500)

    def test_details_page_one_row_per_metric(self):
        kernels = ncu.parse_csv(DETAILS)
        self.assertEqual(len(kernels), 2)
        self.assertEqual(kernels[0], {"name": "fwd", "read": 1.5e6, "write": 100.0})
        self.assertEqual(kernels[1]["read"], 2e9)
        self.assertEqual(kernels[1]["write"], 3e3)

    def test_nothing_profiled(self):
        self.assertEqual(ncu.parse_csv("==PROF== No kernels were profiled.\n"), [])

    def test_profile_command_has_the_required_flags(self):
        cmd = ncu.profile_command("ncu", "/tmp/r", ["python3", "-m", "x"])
        text = " ".join(cmd)
        self.assertIn("--clock-control none", text)
        self.assertIn("--metrics dram__bytes_read.sum,dram__bytes_write.sum", text)
        self.assertIn("--profile-from-start off", text)
        self.assertEqual(cmd[-3:], ["python3", "-m", "x"])


class IoModelTest(unittest.TestCase):
    def test_standard_is_quadratic_and_larger_tiles_read_less(self):
        small = model.standard(1, 1, 1024, 64)
        big = model.standard(1, 1, 4096, 64)
        self.assertGreater(big / small, 14)  # N^2 dominates: 16x minus the N d terms
        # Without L2 reuse the tiled traffic is N^2 d / Br: bigger query tiles (more SRAM) read less.
        self.assertLess(model.tiled(1, 1, 4096, 64, block_m=256), model.tiled(1, 1, 4096, 64, block_m=128))
        self.assertLess(model.tiled(1, 1, 4096, 64), 0.3 * big)

    def test_bounds_are_ordered(self):
        for n in (512, 1024, 4096):
            c, t, s = model.compulsory(64, 16, n, 64), model.tiled(64, 16, n, 64), model.standard(64, 16, n, 64)
            self.assertLess(c, t)
            self.assertLess(t, s)

    def test_gpt2_compulsory_traffic(self):
        # 12 passes over (64 * 16) heads x 1024 x 64 bf16 elements.
        self.assertAlmostEqual(model.compulsory(64, 16, 1024, 64) / 1e9, 12 * 1024 * 1024 * 64 * 2 / 1e9)

    def test_recomputation_adds_one_matmul(self):
        standard = model.matmul_flops(64, 16, 1024, 64, recompute=False)
        tiled = model.matmul_flops(64, 16, 1024, 64, recompute=True)
        self.assertAlmostEqual(tiled / standard, 7 / 6)
        self.assertAlmostEqual(tiled, 3.5 * 4 * 64 * 16 * 1024**2 * 64)

    def test_causal_reads_fewer_tiles(self):
        self.assertLess(model.tiled(1, 1, 8192, 128, causal=True), model.tiled(1, 1, 8192, 128))


if __name__ == "__main__":
    unittest.main()


class IoMeasureTest(unittest.TestCase):
    """The profiling plumbing with a stand-in ncu and the CPU: the driver runs
    under the profiler, its report is read back and summed."""

    @classmethod
    def setUpClass(cls):
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise unittest.SkipTest("torch is not installed")

    def setUp(self):
        import tempfile
        from pathlib import Path

        from bench.io_report import report

        self.report = report
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name)
        for sub in ("logs", "ncu"):
            (self.out / sub).mkdir()
        self.fake = str(Path(__file__).with_name("fake_ncu.py"))
        self.args = report.parse_args(["--device", "cpu", "--quick", "--reps", "2", "--backends", "standard"])
        self.shape = {"batch": 1, "heads": 2, "seqlen": 64, "hdim": 32}

    def tearDown(self):
        self.tmp.cleanup()

    def test_bytes_are_summed_over_the_kernels_and_the_runtime_kept(self):
        rec = self.report.measure("standard", self.shape, self.args, self.fake, self.out, 120)
        self.assertEqual(rec["status"], "ok", rec)
        self.assertEqual(rec["kernels"], 2)
        self.assertAlmostEqual(rec["hbm_gb"], 5.0)
        self.assertAlmostEqual(rec["hbm_read_gb"], 3.5)
        self.assertGreater(rec["runtime_ms"], 0)
        self.assertTrue((self.out / "ncu" / "standard-b1-h2-n64-d32.csv").exists())

    def test_an_ncu_without_counters_falls_back_to_timing_only(self):
        import os

        doc = {"gpt2": [], "sweep": [], "gpt2_shape": self.report.GPT2}
        os.environ["FAKE_NCU_BROKEN"] = "1"
        try:
            self.report.measure_points(doc, [("gpt2", "standard", self.shape)], self.args, self.fake, self.out,
                                       log=lambda line: None)
        finally:
            del os.environ["FAKE_NCU_BROKEN"]
        rec = doc["gpt2"][0]
        self.assertIn("unusable", doc["ncu"]["status"])
        self.assertIn("LibraryNotLoaded", doc["ncu"]["status"])
        self.assertEqual(rec["status"], "ok")
        self.assertNotIn("hbm_gb", rec)
        self.assertGreater(rec["runtime_ms"], 0)
        self.assertTrue((self.out / "io_report.md").exists())
