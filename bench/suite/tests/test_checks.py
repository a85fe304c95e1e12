"""The correctness check (needs torch; skipped without it)."""

import random
import time
import unittest

try:
    import torch
except ImportError:  # the rest of the suite's tests need no torch
    torch = None

from bench.suite import checks


@unittest.skipIf(torch is None, "torch is not installed")
class ChecksTest(unittest.TestCase):
    def setUp(self):
        self.seed = int(time.time() * 1e6) % (2**31)
        self.gen = torch.Generator().manual_seed(self.seed)

    def randn(self, *shape):
        return torch.randn(*shape, generator=self.gen)

    def test_positions_are_the_same_in_every_process_and_cover_the_tensor(self):
        shape = (3, 50, 4, 16)
        a = checks._positions(torch, shape, 123, 0)
        b = checks._positions(torch, shape, 123, 0)
        for x, y, size in zip(a, b, shape):
            self.assertTrue(torch.equal(x, y))
            self.assertEqual(int(x.max()) + 1, size, f"seed {self.seed}")
        self.assertFalse(torch.equal(a[1], checks._positions(torch, shape, 123, 1)[1]))

    def test_take_reads_strided_views_like_contiguous_tensors(self):
        bhnd = self.randn(2, 4, 33, 8)
        view = bhnd.transpose(1, 2)  # canonical (b, n, h, d) view of a (b, h, n, d) tensor
        got = checks.take(torch, view, 5, 0)
        want = checks.take(torch, view.contiguous(), 5, 0)
        self.assertTrue(torch.equal(got, want), f"seed {self.seed}")

    def test_compare_passes_rounding_and_fails_a_wrong_result(self):
        ref = {"out": self.randn(4096), "dq": self.randn(4096)}
        bf16 = {k: v.bfloat16().float() for k, v in ref.items()}
        result = checks.compare(torch, bf16, ref, "bf16")
        self.assertEqual(result["status"], "pass", f"seed {self.seed}: {result}")
        self.assertGreater(result["err"]["out"], 0)
        wrong = dict(bf16)
        wrong["dq"] = bf16["dq"].clone()
        wrong["dq"][random.Random(self.seed).randrange(4096)] += 1.0  # one element off by O(1)
        result = checks.compare(torch, wrong, ref, "bf16")
        self.assertEqual(result["status"], "fail", f"seed {self.seed}: {result}")
        self.assertLessEqual(result["err"]["out"], result["tol"]["out"])

    def test_non_finite_output_fails(self):
        ref = {"out": self.randn(64)}
        got = {"out": ref["out"].clone()}
        got["out"][3] = float("nan")
        self.assertEqual(checks.compare(torch, got, ref, "bf16")["status"], "fail")
        self.assertFalse(checks.finite(torch, {"out": got["out"]}))

    def test_self_check_accepts_exact_attention_and_rejects_a_transposed_one(self):
        from bench.suite.backends.standard import standard_attention

        b, n, h, d = 2, 40, 4, 16
        q, k, v, dout = (self.randn(b, n, h, d) for _ in range(4))
        leaves = [t.transpose(1, 2).clone().requires_grad_() for t in (q, k, v)]
        out = standard_attention(torch, *leaves, d ** -0.5)
        grads = torch.autograd.grad(out, leaves, dout.transpose(1, 2))
        canon_out = out.detach().transpose(1, 2)
        canon_grads = [g.transpose(1, 2) for g in grads]
        job = {"dtype": "fp32"}
        good = checks.self_check(torch, job, q, k, v, dout, canon_out, canon_grads, d ** -0.5, False)
        self.assertEqual(good["status"], "pass", f"seed {self.seed}: {good}")
        bad = checks.self_check(torch, job, q, k, v, dout, canon_out.flip(1), canon_grads, d ** -0.5, False)
        self.assertEqual(bad["status"], "fail", f"seed {self.seed}: {bad}")

    def test_reference_files_round_trip(self):
        import tempfile

        values = {"out": self.randn(10)}
        with tempfile.TemporaryDirectory() as tmp:
            self.assertIsNone(checks.load_reference(torch, tmp, "k"))
            checks.save_reference(torch, tmp, "k", values, "ours", "cpu")
            back = checks.load_reference(torch, tmp, "k")
        self.assertTrue(torch.equal(back["values"]["out"], values["out"]))
        self.assertEqual(back["backend"], "ours")


if __name__ == "__main__":
    unittest.main()
