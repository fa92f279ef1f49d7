"""Several sessions on several threads; the GIL is released while geist computes."""

import threading
import time

import geist
from conftest import PROMPT


def run(m, seed, out, i):
    s = m.session(n_ctx=256, temperature=0.8, seed=seed)
    s.prefill(PROMPT)
    out[i] = s.generate(32, stop_at_eog=False)


def test_sessions_on_threads_equal_sequential(any_model_path):
    m = geist.Model(any_model_path)
    seeds = [1, 2, 3, 4]
    want = [None] * 4
    for i, sd in enumerate(seeds):
        run(m, sd, want, i)
    got = [None] * 4
    threads = [threading.Thread(target=run, args=(m, sd, got, i)) for i, sd in enumerate(seeds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == want
    assert len({tuple(w) for w in want}) > 1


def test_gil_released_during_forward(qwen35_path):
    m = geist.Model(qwen35_path)
    s = m.session(n_ctx=1024, n_threads=1)
    toks = m.tokenize("Once upon a time there was a dog. " * 60)[:900]
    window = {}

    def work():
        window["t0"] = time.perf_counter()
        s.prefill(toks)  # one long C call
        window["t1"] = time.perf_counter()

    stamps = []
    t = threading.Thread(target=work)
    t.start()
    while t.is_alive():
        stamps.append(time.perf_counter())  # pure Python: runs only while the GIL is free
    t.join()
    t0, t1 = window["t0"], window["t1"]
    assert t1 - t0 > 0.05
    inside = [x for x in stamps if t0 + 0.01 < x < t1 - 0.01]
    # With the GIL held for the call, this thread could not run at all inside the window.
    assert len(inside) > 100, (len(inside), t1 - t0)


def test_one_session_shared_by_threads_is_serialised(llama_path):
    m = geist.Model(llama_path)
    s = m.session(n_ctx=512, temperature=0)
    s.prefill(PROMPT)
    errors = []

    def step():
        try:
            for _ in range(20):
                s.decode()
        except geist.GeistError as e:
            errors.append(e)

    threads = [threading.Thread(target=step) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert s.position == len(m.tokenize(PROMPT)) + 80


def test_model_closed_while_threads_generate(llama_path):
    m = geist.Model(llama_path)
    outcomes = []

    def work(seed):
        try:
            s = m.session(n_ctx=512, temperature=0.8, seed=seed)
            s.prefill(PROMPT)
            deadline = time.monotonic() + 60  # closed long before
            while time.monotonic() < deadline:
                s.fork().generate(4)
            outcomes.append("finished")
        except geist.GeistClosedError:
            outcomes.append("closed")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    m.close()
    for t in threads:
        t.join()
    assert outcomes == ["closed"] * 4
    assert m.closed
