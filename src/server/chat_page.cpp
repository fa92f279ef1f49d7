// GET /: a small self-contained chat page (no framework, no CDN). It streams replies from
// /v1/chat/completions (or a session's), folds reasoning, shows cached / prompt tokens and
// the time to first token of each reply, and saves / forks the conversation as a session.
#include <httplib.h>

#include "server/server.h"

namespace geist_server {

namespace {

const char kPage[] = R"HTML(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>geist</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:15px/1.45 system-ui,sans-serif;margin:0;display:flex;flex-direction:column;height:100vh;background:#fafafa}
header{padding:8px 12px;background:#222;color:#eee;display:flex;gap:8px;align-items:center;flex-wrap:wrap}
header input{width:9em}
#log{flex:1;overflow:auto;padding:12px}
.msg{max-width:52em;margin:6px 0;padding:8px 10px;border-radius:8px;white-space:pre-wrap}
.user{background:#dde8ff;margin-left:auto}.assistant{background:#fff;border:1px solid #ddd}
.stats{font-size:12px;color:#666;margin-top:4px}
details{color:#555;font-size:13px}
form{display:flex;gap:8px;padding:8px 12px;border-top:1px solid #ddd;background:#fff}
textarea{flex:1;height:3.2em;font:inherit}
</style></head><body>
<header><b>geist</b><span id="model"></span>
<label>temp <input id="temp" type="number" step="0.1" min="0" max="2" value="0.8"></label>
<label>max <input id="max" type="number" min="1" value="256"></label>
<label>key <input id="key" type="password" placeholder="API key"></label>
<button id="save" type="button">Save session</button><button id="fork" type="button">Fork</button>
<span id="sess"></span></header>
<div id="log"></div>
<form id="f"><textarea id="in" placeholder="Message (Enter sends, Shift+Enter: new line)"></textarea>
<button id="send">Send</button></form>
<script>
'use strict';
const $ = (id) => document.getElementById(id);
let messages = [];   // the conversation (sent whole unless a session holds it)
let session = null;  // id of the session this page continues, if any
let pending = [];    // messages not yet in the session
$('key').value = localStorage.getItem('geist_key') || '';
$('key').onchange = () => localStorage.setItem('geist_key', $('key').value);
function headers() {
  const h = {'Content-Type': 'application/json'};
  if ($('key').value) h.Authorization = 'Bearer ' + $('key').value;
  return h;
}
function add(role, text) {
  const d = document.createElement('div');
  d.className = 'msg ' + role;
  d.textContent = text;
  $('log').appendChild(d);
  $('log').scrollTop = 1e9;
  return d;
}
fetch('/v1/models', {headers: headers()}).then((r) => r.json()).then((j) => { $('model').textContent = j.data[0].id; }).catch(() => {});
async function send(text) {
  const user = {role: 'user', content: text};
  add('user', text);
  const box = add('assistant', '');
  const think = document.createElement('details');
  think.innerHTML = '<summary>reasoning</summary><div class="r"></div>';
  const content = document.createElement('div');
  content.className = 'content';
  const stats = document.createElement('div');
  stats.className = 'stats';
  box.append(think, content, stats);
  think.hidden = true;
  const body = {messages: session ? [...pending, user] : [...messages, user], stream: true,
                stream_options: {include_usage: true},
                temperature: Number($('temp').value), max_tokens: Number($('max').value)};
  const url = session ? `/v1/sessions/${session}/chat/completions` : '/v1/chat/completions';
  const t0 = performance.now();
  let ttft = null, reply = '', reasoning = '';
  const r = await fetch(url, {method: 'POST', headers: headers(), body: JSON.stringify(body)});
  if (!r.ok) { content.textContent = 'error: ' + (await r.text()); return; }
  const reader = r.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const {value, done} = await reader.read();
    if (done) break;
    buf += dec.decode(value, {stream: true});
    let i;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const frame = buf.slice(0, i);
      buf = buf.slice(i + 2);
      if (!frame.startsWith('data: ')) continue;  // ':' pings
      const data = frame.slice(6);
      if (data === '[DONE]') continue;
      const c = JSON.parse(data);
      if (c.error) { content.textContent += '\nerror: ' + c.error.message; continue; }
      if (c.usage && c.choices.length === 0) {
        const u = c.usage;
        stats.textContent = `cached ${u.prompt_tokens_details.cached_tokens} / prompt ${u.prompt_tokens} tokens · ` +
          `TTFT ${ttft === null ? '-' : ttft.toFixed(0)} ms · ${u.completion_tokens} generated`;
        stats.dataset.cached = u.prompt_tokens_details.cached_tokens;
        stats.dataset.prompt = u.prompt_tokens;
      }
      const d = c.choices[0] && c.choices[0].delta;
      if (!d) continue;
      if ((d.content || d.reasoning_content) && ttft === null) ttft = performance.now() - t0;
      if (d.reasoning_content) { reasoning += d.reasoning_content; think.hidden = false; think.querySelector('.r').textContent = reasoning; }
      if (d.content) { reply += d.content; content.textContent = reply; $('log').scrollTop = 1e9; }
    }
  }
  const asst = {role: 'assistant', content: reply};
  messages.push(user, asst);
  pending = [];
}
$('f').onsubmit = (e) => { e.preventDefault(); const t = $('in').value.trim(); if (!t) return; $('in').value = ''; send(t); };
$('in').onkeydown = (e) => { if (e.key === 'Enter' && !e.shiftKey) { e.preventDefault(); $('f').requestSubmit(); } };
$('save').onclick = async () => {
  if (!messages.length) return;
  const r = await fetch('/v1/sessions', {method: 'POST', headers: headers(), body: JSON.stringify({messages})});
  const j = await r.json();
  if (r.ok) { session = j.id; pending = []; $('sess').textContent = 'session ' + session + ' (' + j.n_tokens + ' tokens)'; }
  else { $('sess').textContent = j.error.message; }
};
$('fork').onclick = async () => {
  if (!session) return;
  const r = await fetch(`/v1/sessions/${session}/fork`, {method: 'POST', headers: headers(), body: '{}'});
  const j = await r.json();
  if (r.ok) { session = j.id; $('sess').textContent = 'session ' + session + ' (fork)'; }
};
</script></body></html>
)HTML";

}  // namespace

void register_chat_page(httplib::Server& h) {
  h.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(kPage, sizeof kPage - 1, "text/html; charset=utf-8");
  });
}

}  // namespace geist_server
