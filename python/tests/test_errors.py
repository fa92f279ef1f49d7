"""C statuses as Python exceptions; bad input, closed objects and freed models never crash."""

import gc
import pickle

import pytest

import geist
from conftest import PROMPT


def test_missing_file(tmp_path):
    with pytest.raises(geist.GeistFileNotFound) as e:
        geist.Model(tmp_path / "none.gguf")
    assert isinstance(e.value, FileNotFoundError)
    assert "none.gguf" in str(e.value)


def test_malformed_model_file(tmp_path):
    p = tmp_path / "bad.gguf"
    p.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\xff" * 64)
    with pytest.raises(geist.GeistFormatError) as e:
        geist.Model(p)
    assert e.value.status == 6 and e.value.message
    p.write_bytes(b"not a model at all")
    with pytest.raises(geist.GeistFormatError):
        geist.Model(p)


def test_bad_arguments(llama_path):
    m = geist.Model(llama_path)
    with pytest.raises(geist.GeistInvalidArgument):
        geist.Model(llama_path, backend="tpu")
    with pytest.raises(geist.GeistInvalidArgument):
        m.session(kv_mode="q3")
    with pytest.raises(TypeError):
        m.session(n_ctx="big")
    with pytest.raises(TypeError):
        m.session(temperature="hot")
    with pytest.raises(TypeError):
        m.session(flavour=1)
    with pytest.raises(TypeError):
        m.tokenize(12)
    with pytest.raises(TypeError):
        m.detokenize("abc")
    with pytest.raises(geist.GeistInvalidArgument) as e:
        m.detokenize([m.n_vocab + 5])
    assert e.value.message
    with pytest.raises(geist.GeistInvalidArgument):
        m.token_to_piece(-3)
    s = m.session(n_ctx=32)
    with pytest.raises(TypeError):
        s.prefill([1, "two"])
    with pytest.raises(TypeError):
        s.prefill([1.5])
    with pytest.raises(geist.GeistInvalidArgument):
        s.prefill([1, 2**40])
    with pytest.raises(geist.GeistInvalidArgument):
        s.prefill([1, m.n_vocab])
    with pytest.raises(TypeError):
        s.restore("text")
    with pytest.raises(TypeError):
        s.restore(None)
    with pytest.raises(TypeError):
        geist.Session("model")
    with pytest.raises(TypeError):
        geist.Llama(llama_path).load_state(b"bytes")
    assert s.position == 0


def test_state_errors(llama_path, tmp_path):
    m = geist.Model(llama_path)
    s = m.session(n_ctx=16)
    with pytest.raises(geist.GeistInvalidState):
        s.decode()
    with pytest.raises(geist.GeistInvalidState):
        s.logits()
    with pytest.raises(geist.GeistInvalidState):
        s.reset_to_prefix()
    with pytest.raises(geist.GeistTooManyTokens) as e:
        s.prefill(list(range(1, 40)))
    assert "max_seq_len" in str(e.value) or e.value.message
    assert s.position == 0
    s.prefill(list(range(1, 10)))
    assert len(s.generate(100)) <= 7  # stops at the full context, no exception
    with pytest.raises(geist.GeistFileNotFound):
        s.load(tmp_path / "missing.geist")
    (tmp_path / "junk.geist").write_bytes(b"\0" * 200)
    with pytest.raises(geist.GeistFormatError):
        s.load(tmp_path / "junk.geist")
    with pytest.raises(geist.GeistIOError):
        s.save(tmp_path / "no" / "such" / "dir" / "s.geist")


def test_exception_hierarchy():
    for cls in (geist.GeistFormatError, geist.GeistInvalidArgument, geist.GeistClosedError,
                geist.GeistTooManyTokens):
        assert issubclass(cls, geist.GeistError) and issubclass(cls, ValueError)
    assert issubclass(geist.GeistIOError, OSError)
    assert issubclass(geist.GeistOutOfMemory, MemoryError)


def test_closed_session(llama_path):
    m = geist.Model(llama_path)
    s = m.session()
    s.prefill(PROMPT)
    s.close()
    s.close()  # idempotent
    for call in (lambda: s.decode(), lambda: s.snapshot(), lambda: s.prefill([1]),
                 lambda: s.position, lambda: s.tokens, lambda: s.fork(),
                 lambda: pickle.dumps(s), lambda: s.restore(b"x" * 64)):
        with pytest.raises(geist.GeistClosedError):
            call()
    with geist.Model(llama_path) as m2:
        with m2.session() as t:
            t.prefill([1])
        assert t.closed


def test_session_keeps_its_model_alive(llama_path):
    s = geist.Model(llama_path).session(temperature=0)
    gc.collect()
    s.prefill(PROMPT)
    assert len(s.generate(8)) == 8


def test_session_after_its_model_was_closed(llama_path):
    m = geist.Model(llama_path)
    s = m.session()
    s.prefill(PROMPT)
    m.close()
    assert s.closed and m.closed
    with pytest.raises(geist.GeistClosedError, match="model was closed"):
        s.decode()
    with pytest.raises(geist.GeistClosedError):
        m.tokenize("hi")
    with pytest.raises(geist.GeistClosedError):
        m.session()
    llm = geist.Llama(llama_path)
    llm.close()
    with pytest.raises(geist.GeistClosedError):
        llm("Once")
    with pytest.raises(geist.GeistClosedError):
        llm.tokenize("Once")


def test_exceptions_pickle():
    e = pickle.loads(pickle.dumps(geist.GeistFormatError("snapshot checksum mismatch")))
    assert type(e) is geist.GeistFormatError and e.status == 6
    assert e.message == "snapshot checksum mismatch"
    assert str(e) == "GEIST_E_FORMAT: snapshot checksum mismatch"
    io = pickle.loads(pickle.dumps(geist.GeistIOError("disk full")))
    assert isinstance(io, OSError) and io.message == "disk full"


def test_random_images_and_arguments_never_crash(any_model_path):
    import random

    rng = random.Random(0)
    m = geist.Model(any_model_path)
    s = m.session(n_ctx=64, temperature=0.5, seed=1)
    s.prefill(PROMPT)
    image = s.snapshot()
    twin = s.fork()
    for i in range(150):
        b = bytearray(image)
        kind = i % 3
        if kind == 0:
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(len(b))] = rng.randrange(256)
        elif kind == 1:
            b = b[: rng.randrange(len(b))]
        else:
            b = bytearray(rng.randbytes(rng.randrange(1, 4096)))
        if bytes(b) == image:
            continue
        with pytest.raises(geist.GeistError):
            s.restore(bytes(b))
    for bad in ([-1], [2**31 - 1], [m.n_vocab], [0] * 100):
        with pytest.raises(geist.GeistError):
            s.prefill(bad)
    assert s.generate(8, stop_at_eog=False) == twin.generate(8, stop_at_eog=False)
