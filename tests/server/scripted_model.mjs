// A GGUF built for a test: a Llama-architecture model whose greedy reply to any chat prompt is a
// fixed script of tokens. The fixture models cannot be made to call a tool, so the tool-call
// streaming test serves this one through the ordinary `geist serve` (no test hook in the server).
//
// How it answers: every layer's weights are zero, so the last hidden state is the token's
// embedding, a one-hot vector; output.weight maps token t's dimension to the logit of next(t).
// The script's tokens are vocabulary entries of their own (no merge produces them, so no prompt
// contains them), chained one after the other from the prompt's last token ("\n" after
// "<|im_start|>assistant") and ending with <|im_end|>.
import { writeFileSync } from 'node:fs';

// GPT-2's byte-level alphabet (the text of a byte in a byte-level BPE vocabulary).
function byteToUnicode() {
  const bs = [];
  for (let b = 33; b <= 126; b++) bs.push(b);
  for (let b = 161; b <= 172; b++) bs.push(b);
  for (let b = 174; b <= 255; b++) bs.push(b);
  const cs = [...bs];
  let n = 0;
  for (let b = 0; b < 256; b++) {
    if (!bs.includes(b)) { bs.push(b); cs.push(256 + n); n++; }
  }
  const map = new Map();
  bs.forEach((b, i) => map.set(b, String.fromCodePoint(cs[i])));
  return map;
}

class Writer {
  constructor() { this.parts = []; this.size = 0; }
  push(buf) { this.parts.push(buf); this.size += buf.length; }
  u32(v) { const b = Buffer.alloc(4); b.writeUInt32LE(v); this.push(b); }
  i32(v) { const b = Buffer.alloc(4); b.writeInt32LE(v); this.push(b); }
  u64(v) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); this.push(b); }
  f32(v) { const b = Buffer.alloc(4); b.writeFloatLE(v); this.push(b); }
  str(s) { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.push(b); }
  pad(align) { const r = this.size % align; if (r) this.push(Buffer.alloc(align - r)); }
}

const T = { U32: 4, I32: 5, F32: 6, BOOL: 7, STR: 8, ARR: 9 };

// Writes the model to `file`; `script` is the reply as a list of token texts (each at least
// two bytes and distinct, so none is a byte token). `template` is the chat template.
export function writeScriptedModel(file, { script, template }) {
  const b2u = byteToUnicode();
  const enc = (s) => [...Buffer.from(s, 'utf8')].map((x) => b2u.get(x)).join('');
  const tokens = [];
  const types = [];
  for (let b = 0; b < 256; b++) { tokens.push(b2u.get(b)); types.push(1); }
  const special = ['<|endoftext|>', '<|im_start|>', '<|im_end|>'];
  const id = {};
  for (const s of special) { id[s] = tokens.length; tokens.push(s); types.push(3); }
  const scriptIds = script.map((s) => { tokens.push(enc(s)); types.push(1); return tokens.length - 1; });
  const nVocab = tokens.length;
  const nEmbd = 512;
  const nHead = 4;
  const nFf = 64;
  if (nVocab > nEmbd) throw new Error('script too long for the embedding width');
  // next(t): the prompt's last token "\n" starts the script, each script token leads to the next.
  const next = new Map();
  next.set(10, scriptIds[0]);
  for (let i = 0; i + 1 < scriptIds.length; i++) next.set(scriptIds[i], scriptIds[i + 1]);
  next.set(scriptIds[scriptIds.length - 1], id['<|im_end|>']);

  const f32 = (n) => new Float32Array(n);
  const tensors = [];
  const add = (name, ne, data) => tensors.push({ name, ne, data });
  const embd = f32(nEmbd * nVocab);
  for (let t = 0; t < nVocab; t++) embd[t * nEmbd + t] = 1;  // row t: one-hot at t
  add('token_embd.weight', [nEmbd, nVocab], embd);
  const ones = () => f32(nEmbd).fill(1);
  add('blk.0.attn_norm.weight', [nEmbd], ones());
  add('blk.0.ffn_down.weight', [nFf, nEmbd], f32(nFf * nEmbd));
  add('blk.0.ffn_gate.weight', [nEmbd, nFf], f32(nEmbd * nFf));
  add('blk.0.ffn_up.weight', [nEmbd, nFf], f32(nEmbd * nFf));
  add('blk.0.ffn_norm.weight', [nEmbd], ones());
  add('blk.0.attn_k.weight', [nEmbd, nEmbd], f32(nEmbd * nEmbd));
  add('blk.0.attn_output.weight', [nEmbd, nEmbd], f32(nEmbd * nEmbd));
  add('blk.0.attn_q.weight', [nEmbd, nEmbd], f32(nEmbd * nEmbd));
  add('blk.0.attn_v.weight', [nEmbd, nEmbd], f32(nEmbd * nEmbd));
  add('output_norm.weight', [nEmbd], ones());
  const out = f32(nEmbd * nVocab);
  for (const [t, u] of next) out[u * nEmbd + t] = 1;  // logit u reads dimension t
  add('output.weight', [nEmbd, nVocab], out);

  const kv = [
    ['general.architecture', T.STR, 'llama'],
    ['general.name', T.STR, 'scripted tool caller (test)'],
    ['llama.block_count', T.U32, 1],
    ['llama.context_length', T.U32, 2048],
    ['llama.embedding_length', T.U32, nEmbd],
    ['llama.feed_forward_length', T.U32, nFf],
    ['llama.attention.head_count', T.U32, nHead],
    ['llama.attention.head_count_kv', T.U32, nHead],
    ['llama.rope.freq_base', T.F32, 10000],
    ['llama.attention.layer_norm_rms_epsilon', T.F32, 1e-5],
    ['llama.vocab_size', T.U32, nVocab],
    ['llama.rope.dimension_count', T.U32, nEmbd / nHead],
    ['general.file_type', T.U32, 0],
    ['tokenizer.ggml.model', T.STR, 'gpt2'],
    ['tokenizer.ggml.pre', T.STR, 'qwen2'],
    ['tokenizer.ggml.tokens', T.ARR, [T.STR, tokens]],
    ['tokenizer.ggml.token_type', T.ARR, [T.I32, types]],
    ['tokenizer.ggml.merges', T.ARR, [T.STR, [`${b2u.get(32)} ${b2u.get(32)}`]]],
    ['tokenizer.ggml.bos_token_id', T.U32, id['<|endoftext|>']],
    ['tokenizer.ggml.eos_token_id', T.U32, id['<|im_end|>']],
    ['tokenizer.ggml.add_bos_token', T.BOOL, false],
    ['tokenizer.chat_template', T.STR, template],
  ];
  const w = new Writer();
  w.push(Buffer.from('GGUF'));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(kv.length);
  const value = (type, v) => {
    if (type === T.U32) w.u32(v);
    else if (type === T.I32) w.i32(v);
    else if (type === T.F32) w.f32(v);
    else if (type === T.BOOL) w.push(Buffer.from([v ? 1 : 0]));
    else if (type === T.STR) w.str(v);
  };
  for (const [key, type, v] of kv) {
    w.str(key);
    w.u32(type);
    if (type === T.ARR) {
      const [et, items] = v;
      w.u32(et);
      w.u64(items.length);
      for (const it of items) value(et, it);
    } else {
      value(type, v);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.ne.length);
    for (const d of t.ne) w.u64(d);
    w.u32(0);  // F32
    w.u64(offset);
    offset += t.data.byteLength;
    offset = Math.ceil(offset / 32) * 32;
  }
  w.pad(32);
  for (const t of tensors) {
    w.push(Buffer.from(t.data.buffer));
    w.pad(32);
  }
  writeFileSync(file, Buffer.concat(w.parts));
}
