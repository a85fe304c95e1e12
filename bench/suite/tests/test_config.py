import unittest

from bench.suite import config


class GridTest(unittest.TestCase):
    def test_default_prefill_grid_matches_the_design(self):
        grid, _, _ = config.preset("default")
        jobs, skipped = config.prefill_jobs(grid, ["ours"], run_seed=1)
        self.assertEqual(skipped, [])
        self.assertEqual(len(jobs), 3 * 6 * 2)
        for job in jobs:
            self.assertEqual(job["batch"] * job["seqlen_q"], 16384)
            self.assertEqual(job["heads"] * job["hdim"], 2048)
            self.assertEqual(job["dtype"], "bf16")
        self.assertEqual({j["hdim"] for j in jobs}, {64, 128, 256})
        self.assertEqual({j["seqlen_q"] for j in jobs}, {512, 1024, 2048, 4096, 8192, 16384})
        self.assertEqual(jobs[0]["hdim"], 128, "head dim 128 goes first so budgets cut the others")

    def test_backends_of_one_problem_share_key_and_seed(self):
        grid, _, _ = config.preset("default")
        jobs, _ = config.prefill_jobs(grid, ["ours", "sdpa_flash"], run_seed=7)
        by_key = {}
        for job in jobs:
            by_key.setdefault(job["key"], []).append(job)
        self.assertEqual(len(by_key), 36)
        for group in by_key.values():
            self.assertEqual({j["backend"] for j in group}, {"ours", "sdpa_flash"})
            self.assertEqual(len({j["seed"] for j in group}), 1)
        self.assertEqual(len({j["id"] for j in jobs}), len(jobs))

    def test_run_seed_changes_inputs(self):
        key = config.prefill_key("bf16", 1, 16, 16, 1024, 1024, 128, 128, False)
        self.assertNotEqual(config.job_seed(1, key), config.job_seed(2, key))

    def test_quick_caps_the_materializing_backends(self):
        grid, settings, caps = config.preset("quick")
        self.assertLess(settings.reps, config.Settings().reps)
        jobs, skipped = config.prefill_jobs(grid, ["ours", "sdpa_math"], 1, caps)
        self.assertTrue(skipped)
        self.assertTrue(all(j["backend"] == "sdpa_math" and j["seqlen_q"] > 4096 for j, _ in skipped))
        self.assertEqual(sum(j["backend"] == "ours" for j in jobs), 36)

    def test_decode_grid_and_paged_shares_the_contiguous_reference(self):
        grid, _, _ = config.preset("full")
        jobs = config.decode_jobs(grid, ["ours"], 3)
        self.assertEqual(len(jobs), 3 * 3 * 2)
        self.assertEqual({(j["heads"], j["heads_kv"], j["hdim"]) for j in jobs}, {(32, 8, 128)})
        contiguous = {j["check_key"]: j for j in jobs if j["page_size"] == 0}
        for job in (j for j in jobs if j["page_size"]):
            self.assertIn(job["check_key"], contiguous)
            self.assertEqual(job["seed"], contiguous[job["check_key"]]["seed"])
            self.assertNotEqual(job["key"], contiguous[job["check_key"]]["key"])

    def test_memory_grid_reaches_128k(self):
        grid, _, _ = config.preset("default")
        jobs = config.memory_jobs(grid, ["standard", "ours"], 1)
        self.assertEqual(max(j["seqlen_q"] for j in jobs), 128 * 1024)
        self.assertTrue(all(j["passes"] == ["fwd", "bwd"] for j in jobs))

    def test_unknown_preset(self):
        with self.assertRaises(ValueError):
            config.preset("nope")


if __name__ == "__main__":
    unittest.main()
