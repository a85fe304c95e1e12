"""The run loop end to end with synthetic workers (--dry-run): failures of
every kind are recorded and the run goes on."""

import contextlib
import importlib.util
import io
import json
import os
import tempfile
import unittest
from pathlib import Path

from bench.suite import cli

KEY128 = "prefill-bf16-b4-h4-hkv4-sq128-sk128-d64-dv64-full"
KEY256 = "prefill-bf16-b2-h4-hkv4-sq256-sk256-d64-dv64-full"


@contextlib.contextmanager
def environment(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def run(out, *args):
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cli.main(["run", "--dry-run", "--preset", "tiny", "--out", str(out), *args])
    doc = json.loads((Path(out) / "results.json").read_text())
    return code, doc, buffer.getvalue()


def by_id(doc, kind="prefill"):
    return {r["id"]: r for r in doc[kind]}


class RunnerTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.out = Path(self.tmp.name) / "run"

    def tearDown(self):
        self.tmp.cleanup()

    def test_every_job_gets_a_record_and_files_are_written(self):
        code, doc, printed = run(self.out, "--stages", "prefill,decode,memory,plots", "--backends",
                                 "ours,sdpa_flash,flashinfer", "--decode-backends", "ours,sdpa_cudnn",
                                 "--memory-backends", "standard,ours")
        self.assertEqual(code, 0)
        self.assertEqual(len(doc["prefill"]), 4 * 3)
        self.assertEqual(len(doc["decode"]), 4 * 2)
        self.assertEqual(len(doc["memory"]), 3 * 2)
        self.assertTrue(doc["meta"]["dry_run"])
        for name in ("prefill.csv", "decode.csv", "memory.csv", "summary.txt", "progress.log"):
            self.assertTrue((self.out / name).exists(), name)
        if importlib.util.find_spec("matplotlib") is not None:  # the plots need it
            self.assertTrue(list((self.out / "plots").glob("prefill_fwd_*.png")))
        self.assertIn("Prefill TFLOP/s", printed.split("flashpp benchmark summary")[-1])
        ours = by_id(doc)[f"ours|{KEY128}"]
        self.assertEqual(ours["check"]["status"], "reference")
        self.assertGreater(ours["fwd_tflops"], 0)
        infer = by_id(doc)[f"flashinfer|{KEY128}"]
        self.assertEqual(infer["bwd_status"], "unsupported")
        self.assertGreater(infer["fwd_tflops"], 0)
        # ours runs first on every problem: its output is the others' reference
        order = [r["backend"] for r in doc["prefill"]]
        self.assertEqual(order[0::3], ["ours"] * 4)

    def test_a_hang_is_killed_and_the_next_job_runs(self):
        with environment(BENCH_SUITE_FAKE_HANG=f"sdpa_flash|{KEY128}"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours,sdpa_flash", "--job-timeout", "3")
        records = by_id(doc)
        self.assertEqual(records[f"sdpa_flash|{KEY128}"]["status"], "timeout")
        self.assertEqual(records[f"sdpa_flash|{KEY256}"]["status"], "ok")

    def test_a_crash_is_recorded_and_the_worker_restarted(self):
        with environment(BENCH_SUITE_FAKE_CRASH=f"sdpa_flash|{KEY128}"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours,sdpa_flash")
        records = by_id(doc)
        self.assertEqual(records[f"sdpa_flash|{KEY128}"]["status"], "crashed")
        self.assertIn("exited with code 7", records[f"sdpa_flash|{KEY128}"]["reason"])
        self.assertEqual(records[f"sdpa_flash|{KEY256}"]["status"], "ok")

    def test_repeated_crashes_stop_the_backend_not_the_run(self):
        with environment(BENCH_SUITE_FAKE_CRASH="sdpa_flash|"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours,sdpa_flash")
        statuses = [r["status"] for r in doc["prefill"] if r["backend"] == "sdpa_flash"]
        self.assertEqual(statuses, ["crashed"] * 3 + ["skipped"])
        self.assertTrue(all(r["status"] == "ok" for r in doc["prefill"] if r["backend"] == "ours"))

    def test_an_error_is_recorded_with_its_reason(self):
        with environment(BENCH_SUITE_FAKE_ERROR=f"ours|{KEY256}"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours")
        record = by_id(doc)[f"ours|{KEY256}"]
        self.assertEqual(record["status"], "error")
        self.assertIn("injected", record["reason"])

    def test_a_stage_budget_skips_what_does_not_fit(self):
        with environment(BENCH_SUITE_FAKE_DELAY="0.3"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours,sdpa_flash",
                            "--stage-budget", "prefill=1")
        self.assertEqual(doc["prefill"][0]["status"], "ok")
        skipped = [r for r in doc["prefill"] if r["status"] == "skipped"]
        self.assertTrue(skipped)
        self.assertTrue(all("this stage's time budget" in r["reason"] for r in skipped))

    def test_a_backend_budget_stops_only_that_backend(self):
        with environment(BENCH_SUITE_FAKE_DELAY="0.2"):
            _, doc, _ = run(self.out, "--stages", "prefill", "--backends", "ours,flex", "--backend-budget",
                            "flex=0.1")
        flex = [r for r in doc["prefill"] if r["backend"] == "flex"]
        self.assertEqual(flex[0]["status"], "ok")
        self.assertTrue(all("flex's time budget" in r["reason"] for r in flex[1:]))
        self.assertTrue(all(r["status"] == "ok" for r in doc["prefill"] if r["backend"] == "ours"))

    def test_out_of_memory_skips_longer_sequences(self):
        # The synthetic device has 140 GiB; standard attention needs 4 N^2 bytes per head.
        _, doc, _ = run(self.out, "--stages", "memory", "--memory-backends", "standard,ours",
                        "--memory-seqlens", "65536,131072,262144")
        standard = {r["seqlen_q"]: r["status"] for r in doc["memory"] if r["backend"] == "standard"}
        self.assertEqual(standard[131072], "oom")
        self.assertEqual(standard[262144], "skipped")
        self.assertEqual(standard[65536], "ok")

    def test_unknown_backend_is_refused(self):
        with self.assertRaises(SystemExit):
            run(self.out, "--backends", "nonesuch")

    def test_summary_command_reprints(self):
        run(self.out, "--stages", "prefill", "--backends", "ours,sdpa_cudnn")
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            cli.main(["summary", str(self.out)])
        self.assertIn("sdpa_cudnn", buffer.getvalue())
        self.assertIn("DRY RUN", buffer.getvalue())


if __name__ == "__main__":
    unittest.main()
