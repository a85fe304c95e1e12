import unittest

from bench.suite import flops


class FlopsTest(unittest.TestCase):
    def test_forward_is_four_b_h_n2_d(self):
        # Default grid point: 16K tokens, hidden 2048, head dim 128 -> 16 heads, batch 1.
        self.assertEqual(flops.attention_fwd_flops(1, 16, 16384, 16384, 128), 4 * 16 * 16384**2 * 128)

    def test_causal_halves_and_backward_is_two_and_a_half(self):
        full = flops.attention_flops("fwd", 2, 8, 1024, 1024, 64)
        self.assertEqual(flops.attention_flops("fwd", 2, 8, 1024, 1024, 64, causal=True), full / 2)
        self.assertEqual(flops.attention_flops("bwd", 2, 8, 1024, 1024, 64), 2.5 * full)
        self.assertEqual(flops.attention_flops("fwd_bwd", 2, 8, 1024, 1024, 64), 3.5 * full)

    def test_head_dim_v_counts_in_the_second_matmul(self):
        self.assertEqual(flops.attention_fwd_flops(1, 1, 10, 20, 64, 128), 2 * 10 * 20 * (64 + 128))

    def test_rates(self):
        self.assertAlmostEqual(flops.tflops(2e12, 4.0), 500.0)
        self.assertAlmostEqual(flops.gbps(4e9, 1.0), 4000.0)
        self.assertIsNone(flops.tflops(1e12, 0))

    def test_decode_bytes_count_the_kv_cache_once(self):
        # batch 64, 16K cache, 8 KV heads, d 128, bf16: K and V.
        self.assertEqual(flops.decode_kv_bytes(64, 16384, 8, 128), 64 * 16384 * 8 * 256 * 2)
        total = flops.decode_total_bytes(64, 1, 16384, 32, 8, 128)
        self.assertEqual(total - flops.decode_kv_bytes(64, 16384, 8, 128), 64 * 32 * 256 * 2)


if __name__ == "__main__":
    unittest.main()
