"""attn_implementation="flashpp" in Hugging Face transformers: a randomly
initialised Llama-architecture model (built from a config, nothing
downloaded) gives the logits and gradients of its "sdpa" run."""

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import flashpp.transformers  # noqa: E402,F401  (registers "flashpp")
from torch_devices import DEVICES  # noqa: E402


def tiny_llama(seed, device, **overrides):
    cfg = dict(vocab_size=256, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=256, attention_dropout=0.0)
    cfg.update(overrides)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**cfg))
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    return model.to(device=device, dtype=dtype)


def run(model, impl, ids, mask=None):
    model.set_attn_implementation(impl)
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids, attention_mask=mask).logits
    keep = torch.ones_like(ids, dtype=torch.bool) if mask is None else mask.bool()
    # A loss over real tokens only: padded positions carry no meaning in either run.
    loss = (logits.float().logsumexp(-1) * keep).sum() / keep.sum()
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads


def tolerances(device):
    # Both runs compute the same exact attention; differences are rounding in
    # the kernels' summation order, amplified through two layers.
    return dict(rtol=1e-4, atol=1e-4) if device == "cpu" else dict(rtol=2e-2, atol=2e-2)


def compare(a, b, keep, device):
    la, ga = a
    lb, gb = b
    torch.testing.assert_close(la[keep], lb[keep], **tolerances(device))
    assert ga.keys() == gb.keys() and ga
    for name in ga:
        torch.testing.assert_close(ga[name], gb[name], **tolerances(device), msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_logits_and_gradients_match_sdpa(device, seed):
    model = tiny_llama(seed % 2**31, device)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (2, 37), generator=g).to(device)
    keep = torch.ones_like(ids, dtype=torch.bool)
    with torch.profiler.profile() as prof:
        ours = run(model, "flashpp", ids)
    ran = {e.key for e in prof.key_averages()}
    assert {"flashpp::fwd", "flashpp::bwd"} <= ran, sorted(k for k in ran if "attention" in k or "flash" in k)
    compare(ours, run(model, "sdpa", ids), keep, device)
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("device", DEVICES)
def test_padded_batch_matches_sdpa(device, seed):
    model = tiny_llama(seed % 2**31, device)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (3, 29), generator=g).to(device)
    mask = torch.ones_like(ids)
    mask[1, :7] = 0  # left padding
    mask[2, :2] = 0
    keep = mask.bool()
    compare(run(model, "flashpp", ids, mask), run(model, "sdpa", ids, mask), keep, device)


def test_sliding_window_and_softcap_models(seed):
    # Mistral-style sliding window through the same attention function.
    torch.manual_seed(seed % 2**31)
    cfg = transformers.MistralConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, sliding_window=8,
                                     max_position_embeddings=128)
    model = transformers.MistralForCausalLM(cfg)
    ids = torch.randint(0, 256, (2, 30), generator=torch.Generator().manual_seed(seed))
    keep = torch.ones_like(ids, dtype=torch.bool)
    compare(run(model, "flashpp", ids), run(model, "sdpa", ids), keep, "cpu")


def test_generate_with_kv_cache_matches_sdpa(seed):
    model = tiny_llama(seed % 2**31, "cpu").eval()
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 256, (2, 11), generator=g)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    out = {}
    for impl in ("sdpa", "flashpp"):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            out[impl] = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False,
                                       pad_token_id=0)
    assert torch.equal(out["sdpa"], out["flashpp"])


def test_from_config_with_attn_implementation(seed):
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=64, num_hidden_layers=1,
                                   num_attention_heads=2, num_key_value_heads=2)
    model = transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="flashpp")
    assert model.config._attn_implementation == "flashpp"
    ids = torch.randint(0, 64, (1, 9), generator=torch.Generator().manual_seed(seed))
    assert torch.isfinite(model(input_ids=ids).logits).all()
