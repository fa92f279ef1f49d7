"""Prefix reuse with geist sessions: prefill a long system prompt once, fork per request.

    python3 examples/prefix_reuse.py MODEL.gguf
"""
import sys

import geist

model = geist.Model(sys.argv[1])
base = model.session(n_ctx=512, temperature=0)
base.prefill("Stories for children, told simply. ")  # the shared prefix: computed once
for request in ["Once upon a time", "The little dog", "One day, Tom"]:
    s = base.fork()  # the prefix's complete state, copied, not recomputed
    s.prefill(request, add_special=False)
    print(request + model.text(s.generate(24)))
