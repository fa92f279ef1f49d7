"""Python output equals the `geist run` CLI's, token for token."""

import subprocess

import pytest

import geist
from conftest import PROMPT

N = 48


def run_cli(cli, path, *args):
    r = subprocess.run([cli, "run", "-m", path, "-p", PROMPT, "-n", str(N), *args],
                       capture_output=True, text=True, check=True)
    return r.stdout


def test_greedy_tokens_equal_cli(cli, any_model_path):
    want = [int(t) for t in run_cli(cli, any_model_path, "--temp", "0", "--ids").split()]
    assert want
    llm = geist.Llama(any_model_path)
    got = []
    for tok in llm.generate(llm.tokenize(PROMPT, special=True), temp=0):
        if llm.model.is_eog(tok) or len(got) == N:
            break
        got.append(tok)
    assert got == want
    s = llm.model.session(temperature=0)
    s.prefill(PROMPT)
    assert s.generate(N) == want


def test_greedy_text_equals_cli(cli, any_model_path):
    want = run_cli(cli, any_model_path, "--temp", "0")
    llm = geist.Llama(any_model_path)
    out = llm(PROMPT, max_tokens=N, temperature=0)
    assert out["choices"][0]["text"] + "\n" == want
    assert out["usage"]["completion_tokens"] <= N


@pytest.mark.parametrize("seed", [1, 1234])
def test_sampled_with_seed_equals_cli(cli, any_model_path, seed):
    want = run_cli(cli, any_model_path, "--temp", "0.9", "--seed", str(seed))
    llm = geist.Llama(any_model_path)
    out = llm(PROMPT, max_tokens=N, temperature=0.9, seed=seed)
    assert out["choices"][0]["text"] + "\n" == want
