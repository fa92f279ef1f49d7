"""Sessions as values: snapshot, pickle, restore in a fresh process, fork, files; Llama's
save_state / load_state as llama-cpp-python tests it."""

import hashlib
import json
import pickle
import struct
import subprocess

import pytest

import geist
from conftest import PROMPT

SAMPLERS = {"greedy": dict(temperature=0.0), "sampled": dict(temperature=0.9, seed=42)}


def digest(logits):
    return hashlib.sha256(struct.pack(f"{len(logits)}f", *logits)).hexdigest()


def continuation(session, n=24):
    """The next n tokens and the logits' bits after them."""
    toks = session.generate(n, stop_at_eog=False)
    return toks, digest(session.logits())


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_pickle_restore_in_fresh_process_is_bit_identical(any_model_path, sampler, tmp_path,
                                                          python_env):
    m = geist.Model(any_model_path)
    s = m.session(n_ctx=256, **SAMPLERS[sampler])
    s.prefill(PROMPT)
    s.generate(5)  # some RNG draws and an owed forward in the state
    blob = pickle.dumps(s)
    want = continuation(s)
    (tmp_path / "s.pkl").write_bytes(blob)
    code = (
        "import hashlib, json, pickle, struct, sys\n"
        "s = pickle.load(open(sys.argv[1], 'rb'))\n"
        "t = s.generate(24, stop_at_eog=False)\n"
        "l = s.logits()\n"
        "print(json.dumps([t, hashlib.sha256(struct.pack(f'{len(l)}f', *l)).hexdigest()]))\n")
    env, py = python_env
    r = subprocess.run([py, "-c", code, str(tmp_path / "s.pkl")], env=env, capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got == [want[0], want[1]]


@pytest.mark.parametrize("sampler", list(SAMPLERS))
def test_snapshot_restore_fork_continue_identically(any_model_path, sampler):
    m = geist.Model(any_model_path)
    s = m.session(n_ctx=256, **SAMPLERS[sampler])
    s.prefill(PROMPT)
    image = s.snapshot()
    assert isinstance(image, bytes)
    f = s.fork()
    want = continuation(s)
    assert continuation(f) == want
    s.restore(image)
    assert continuation(s) == want
    u = pickle.loads(pickle.dumps(f))  # a used session pickles its current state
    f2 = f.fork()
    assert continuation(u) == continuation(f2)


def test_save_load_file(any_model_path, tmp_path):
    m = geist.Model(any_model_path)
    s = m.session(n_ctx=256, temperature=0.7, seed=9)
    s.prefill(PROMPT)
    s.save(tmp_path / "s.geist")
    want = continuation(s)
    t = m.session(n_ctx=256)
    t.load(str(tmp_path / "s.geist"))
    assert t.position == len(m.tokenize(PROMPT))
    assert continuation(t) == want


def test_refused_restore_leaves_session_as_it_was(any_model_path):
    m = geist.Model(any_model_path)
    s = m.session(n_ctx=256, temperature=0.8, seed=5)
    s.prefill(PROMPT)
    image = bytearray(s.snapshot())
    twin = s.fork()
    bad = bytearray(image)
    bad[len(bad) // 2] ^= 0xFF
    for junk in (bytes(bad), bytes(image[:100]), b"not a snapshot" * 10):
        with pytest.raises(geist.GeistError) as e:
            s.restore(junk)
        assert isinstance(e.value, (geist.GeistFormatError, geist.GeistInvalidArgument))
        assert e.value.message
    with pytest.raises(geist.GeistFormatError, match="checksum"):
        s.restore(bytes(bad))
    other_kv = m.session(n_ctx=256, kv_mode="f32")
    with pytest.raises(geist.GeistFormatError):
        other_kv.restore(bytes(image))
    assert continuation(s) == continuation(twin)


def test_llama_save_load_determinism(any_model_path):
    # As llama-cpp-python's test: draw, save, draw twice (the draws differ), load, draw again:
    # equal to the first draw after the save.
    llm = geist.Llama(any_model_path, seed=1337)
    opts = dict(max_tokens=12, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0)
    llm(PROMPT, **opts)
    state = llm.save_state()
    a = llm(PROMPT, **opts)["choices"][0]["text"]
    b = llm(PROMPT, **opts)["choices"][0]["text"]
    assert a != b
    llm.load_state(pickle.loads(pickle.dumps(state)))
    c = llm(PROMPT, **opts)["choices"][0]["text"]
    assert c == a


def test_llama_state_low_level_eval_sample(any_model_path):
    llm = geist.Llama(any_model_path, seed=3)
    llm.eval(llm.tokenize(PROMPT, special=True))
    state = llm.save_state()
    assert state.n_tokens == llm.n_tokens
    assert state.llama_state == state.image and state.llama_state_size == len(state.image)
    first = [llm.sample(temp=0.9) for _ in range(10)]
    llm.load_state(state)
    assert [llm.sample(temp=0.9) for _ in range(10)] == first


def test_pin_prefix_and_reset(llama_path):
    m = geist.Model(llama_path)
    s = m.session(temperature=0.8, seed=11)
    s.prefill("A system prompt. ")
    s.pin_prefix()
    assert s.pin_len == s.position
    s.prefill("Once")
    a = s.generate(10)
    s.reset_to_prefix()
    s.prefill("Once")
    assert s.generate(10) == a


def test_image_of_another_model_refused(llama_path, qwen35_path):
    a = geist.Model(llama_path).session(n_ctx=256)
    b = geist.Model(qwen35_path).session(n_ctx=256)
    a.prefill(PROMPT)
    b.prefill(PROMPT)
    with pytest.raises(geist.GeistFormatError, match="model"):
        b.restore(a.snapshot())
    assert b.position == len(b.model.tokenize(PROMPT))


def test_refused_load_state_changes_nothing(llama_path):
    llm = geist.Llama(llama_path, seed=8)
    llm.eval(llm.tokenize(PROMPT, special=True))
    good = llm.save_state()
    bad = geist.LlamaState(image=good.image[:-9] + b"garbage!!", n_tokens=good.n_tokens,
                           rng_state=None, seed=0)
    with pytest.raises(geist.GeistFormatError):
        llm.load_state(bad)
    opts = dict(max_tokens=6, temperature=1.0)
    a = llm(PROMPT, **opts)
    llm.load_state(good)
    assert llm(PROMPT, **opts)["choices"][0]["text"] == a["choices"][0]["text"]


@pytest.mark.parametrize("kv_mode", ["f16", "kivi2"])
def test_prefill_grid(llama_path, qwen35_path, kv_mode):
    """The grid is a fact of the layers: 64 for the hybrid, 1 for Llama, where a prefix state
    taken off any block boundary continues with the one-call prefill's bits."""
    assert geist.Model(qwen35_path).session(n_ctx=128, kv_mode=kv_mode).prefill_grid == 64
    m = geist.Model(llama_path)
    toks = [m.token_bos] + [3 + (i * 37) % 500 for i in range(80)]
    whole = m.session(n_ctx=128, kv_mode=kv_mode)
    assert whole.prefill_grid == 1
    whole.prefill(toks)
    want = digest(whole.logits())
    for k in (1, 33, 37, 64, 79):
        a = m.session(n_ctx=128, kv_mode=kv_mode)
        a.prefill(toks[:k])
        b = m.session(n_ctx=128, kv_mode=kv_mode)
        b.restore(a.snapshot())
        b.prefill(toks[k:])
        assert digest(b.logits()) == want, f"split at {k}"
        assert b.snapshot() == whole.snapshot(), f"split at {k}"


def test_peek_and_rewind(llama_path, qwen35_path):
    """peek draws decode's token without changing the session; rewind + prefill of another
    continuation equals the one-call prefill bitwise on Llama; the hybrid refuses to rewind."""
    m = geist.Model(llama_path)
    toks = [m.token_bos] + [3 + (i * 37) % 500 for i in range(80)]
    s = m.session(n_ctx=128, temperature=0.8, seed=9)
    s.prefill(toks)
    before = s.snapshot()
    t = s.peek()
    assert s.snapshot() == before
    assert s.decode() == t
    with pytest.raises(geist.GeistInvalidState):
        s.peek()  # the decoded token's forward is owed
    other = toks[:50] + [7 + (i * 11) % 400 for i in range(30)]
    whole = m.session(n_ctx=128, temperature=0.8, seed=9)
    whole.prefill(other)
    s.rewind(50)
    assert s.position == 50
    with pytest.raises(geist.GeistInvalidState):
        s.snapshot()  # no logits pending until a prefill
    s.set_sampler(temperature=0.8, seed=9)  # the RNG drew for the decoded token
    s.prefill(other[50:])
    assert digest(s.logits()) == digest(whole.logits())
    assert s.snapshot() == whole.snapshot()
    with pytest.raises(geist.GeistInvalidArgument):
        s.rewind(81)
    q = geist.Model(qwen35_path).session(n_ctx=128)
    q.prefill(toks[:40])
    with pytest.raises(geist.GeistInvalidState):
        q.rewind(20)
    assert q.position == 40
