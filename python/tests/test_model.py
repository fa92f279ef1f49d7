"""Model queries, tokens, logits."""

import pytest

import geist
from conftest import PROMPT


def test_model_queries(any_model_path):
    m = geist.Model(any_model_path)
    assert m.n_vocab > 0 and m.n_ctx_train > 0
    assert m.is_eog(m.token_eos)
    assert "arch" in m.describe().lower() or m.describe()
    toks = m.tokenize(PROMPT)
    assert toks[0] == m.token_bos
    assert m.tokenize(PROMPT, add_special=False) == toks[1:]
    assert m.detokenize(toks[1:]).decode().strip() == PROMPT
    assert m.text(toks[1:]).strip() == PROMPT
    assert b"".join(m.token_to_piece(t) for t in toks[1:]).decode().strip() == PROMPT
    assert m.tokenize(b"") == m.tokenize("")


def test_logits_list_and_numpy(llama_path):
    np = pytest.importorskip("numpy")
    m = geist.Model(llama_path)
    s = m.session()
    s.prefill(PROMPT)
    a = s.logits()
    b = s.logits(numpy=True)
    assert len(a) == m.n_vocab == b.shape[0] and b.dtype == np.float32
    assert a == b.tolist()
    s.prefill(np.array([100, 200], dtype=np.int64))  # numpy ids are ints too
    assert s.position == len(m.tokenize(PROMPT)) + 2


def test_llama_properties(llama_path):
    llm = geist.Llama(llama_path, n_ctx=128, n_threads=1, kv_mode="f32", backend="cpu")
    assert llm.n_ctx() == 128 and llm.n_vocab() == llm.model.n_vocab
    assert llm.token_bos() == llm.model.token_bos
    llm.eval(llm.tokenize(PROMPT.encode()))
    assert llm.n_tokens == len(llm.input_ids) == len(llm.tokenize(PROMPT))
    with pytest.raises(TypeError):
        geist.Llama(llama_path, n_gpu_layers=3)
    with pytest.raises(geist.GeistUnsupported):
        llm("x", logprobs=3)
