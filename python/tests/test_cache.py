"""Llama with a PrefixCache: a completion's tokens and logits are the same bits whatever the
cache holds (restored prefixes are exactly the blockwise prefill's state)."""

import pytest

import geist

SYSTEM = ("<|im_start|>system\nYou are a storyteller. You tell short, happy stories about "
          "animals and children, in simple words.<|im_end|>\n")
PROMPTS = [SYSTEM + "<|im_start|>user\nA cat.<|im_end|>\n",
           SYSTEM + "<|im_start|>user\nA dog.<|im_end|>\n",
           SYSTEM + "<|im_start|>user\nA cow.<|im_end|>\n",
           SYSTEM + "<|im_start|>user\nA dog.<|im_end|>\n<|im_start|>assistant\nOnce",
           SYSTEM + "<|im_start|>user\nA dog.<|im_end|>\n"]


def run(llm, prompt, temperature):
    out = llm(prompt, max_tokens=12, seed=5, temperature=temperature)["choices"][0]["text"]
    return out, llm.logits()


@pytest.mark.parametrize("temperature", [0.0, 0.9])
def test_cached_completions_equal_cold_ones_bit_for_bit(any_model_path, temperature):
    cold = geist.Llama(any_model_path)
    cold_cache = geist.PrefixCache(block=16)
    cold.set_cache(cold_cache)
    want = []
    for p in PROMPTS:
        cold_cache.clear()  # every prompt prefilled from nothing, in blocks
        want.append(run(cold, p, temperature))
    llm = geist.Llama(any_model_path)
    cache = geist.PrefixCache(block=16)
    llm.set_cache(cache)
    assert [run(llm, p, temperature) for p in PROMPTS] == want
    assert cache.hits >= 3
    # the second prompt cached a block boundary inside the shared system prompt
    system_len = len(llm.tokenize(SYSTEM, special=True))
    dog = tuple(llm.tokenize(PROMPTS[1], special=True))
    assert any(len(k) % 16 == 0 and system_len - 16 < len(k) < len(dog) and dog[: len(k)] == k
               for k in cache._entries)


def test_cache_without_reuse_matches_greedy_text(any_model_path):
    # blockwise and one-shot prefill agree on the greedy text of these prompts
    plain = geist.Llama(any_model_path)
    llm = geist.Llama(any_model_path)
    llm.set_cache(geist.PrefixCache(block=16))
    for p in PROMPTS[:2]:
        assert run(llm, p, 0.0)[0] == run(plain, p, 0.0)[0]


def test_cache_capacity_evicts_oldest(llama_path):
    llm = geist.Llama(llama_path)
    llm.eval(llm.tokenize("Story number 10: once", special=True))
    image = len(llm.save_state().image)
    cache = geist.PrefixCache(capacity_bytes=3 * image)
    llm.set_cache(cache)
    for i in range(12):
        llm(f"Story number {i}: once", max_tokens=2, temperature=0)
    assert cache.cache_size <= cache.capacity_bytes
    assert 0 < len(cache) < 12
    with pytest.raises(TypeError):
        llm.set_cache({})
    with pytest.raises(ValueError):
        geist.PrefixCache(block=0)
