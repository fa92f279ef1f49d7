#!/usr/bin/python3
"""Writes test_jinja_cases.inc: each case rendered by Python Jinja2 (render_reference.py's env).
Usage: test_jinja_cases_gen.py FIXTURES_DIR > tests/chat/test_jinja_cases.inc"""
# (name, template, context) — expectations are rendered by Python Jinja2 with HF's settings.
C = [
 # whitespace control
 ("trim_blocks", "{% if true %}\nA\n{% endif %}\nB", {}),
 ("lstrip_blocks", "x\n    {% if true %}\n    y\n    {% endif %}\nz", {}),
 ("dash_strip", "a  \n  {{- 'b' -}}  \n  c", {}),
 ("dash_block", "a\n{%- if true -%}\n  b  \n{%- endif -%}\n c", {}),
 ("plus_keeps", "a\n    {%+ if true %}b{% endif +%}\nc", {}),
 ("comment", "a {# hidden #} b\n{# line #}\nc {#- x -#}  d", {}),
 ("raw", "{% raw %}{{ not rendered }}{% endraw %}|{%- raw -%}  {% x %}  {%- endraw -%}  |", {}),
 ("trailing_newline", "x\n", {}),
 ("crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\n", {}),
 ("var_no_lstrip", "  {{ 'v' }}\n  {% if 1 %}w{% endif %}", {}),
 # undefined
 ("undef_render", "[{{ nope }}][{{ d.missing }}][{{ nope is defined }}][{{ d.missing is undefined }}]", {"d": {"a": 1}}),
 ("undef_falsy", "{% if nope %}y{% else %}n{% endif %}{% for x in nope %}{{x}}{% else %}empty{% endfor %}{{ nope|length }}", {}),
 ("undef_default", "{{ nope|default('dflt') }} {{ ''|default('e', true) }} {{ none|default('n') }} {{ 0|d('z', boolean=true) }}", {}),
 ("undef_eq", "{{ nope == none }} {{ nope != 1 }} {{ 'a' ~ nope ~ 'b' }}", {}),
 # loop
 ("loop_vars", "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}", {}),
 ("loop_prev_next", "{% for x in [1,2,3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
 ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a','b') }}{% endfor %}", {}),
 ("loop_filter_else", "{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}E{% endfor %}", {}),
 ("loop_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
 ("loop_scope", "{% set y = 0 %}{% for x in [1,2] %}{% set y = y + x %}{{ y }}{% endfor %}|{{ y }}", {}),
 ("loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1,2],[3,4]] %}{{ a*b }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
 ("loop_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"z": 1, "a": 2}}),
 ("loop_string", "{% for c in 'héy' %}[{{ c }}]{% endfor %}", {}),
 ("nested_loop", "{% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{{ j }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
 # filters: strings
 ("f_trim", "[{{ '  a b \n'|trim }}][{{ 'xxaxx'|trim('x') }}]", {}),
 ("f_case_unicode", "{{ 'Ærøskøbing ÉLAN straße ΑΒΓ σς Привет ŁÓDŹ'|upper }} {{ 'ÆRØ ÉLAN ΣΑΒΓ ПРИВЕТ ŁÓDŹ Ÿ'|lower }} {{ 'ünïcode'.upper() }}", {}),
 ("f_case", "{{ 'hello World'|upper }} {{ 'HeLLo'|lower }} {{ 'hello wORLD-foo(bar'|title }} {{ 'hELLO wORLD'|capitalize }}", {}),
 ("f_replace", "{{ 'aaa'|replace('a','b') }} {{ 'aaa'|replace('a','b',2) }} {{ 'abc'|replace('','-') }}", {}),
 ("f_indent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent('> ', blank=true) }}", {}),
 ("f_center_trunc", "[{{ 'ab'|center(7) }}][{{ 'abc'|center(8) }}][{{ 'hello world foo bar baz'|truncate(12) }}][{{ 'hello world foo bar baz'|truncate(12, true) }}][{{ 'short'|truncate(10) }}]", {}),
 ("f_wordcount", "{{ 'one two  three'|wordcount }} {{ ''|wordcount }}", {}),
 ("f_format", "{{ '%s-%d-%05.2f-%%'|format('x', 7, 3.14159) }} {{ '%s and %s' % ('a', 'b') }} {{ 'v=%r' % 'q' }}", {}),
 ("f_escape", "{{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|safe }} {{ ('<i>'|safe + '<j>') }} {{ '<k>' + '<l>'|safe }}", {}),
 ("f_string", "{{ [1,'a',none,true,1.5]|string }} {{ {'a': [1, {'b': 'c'}]}|string }} {{ (1,)|string }} {{ ('x', 2)|string }}", {}),
 # filters: sequences
 ("f_length", "{{ [1,2,3]|length }} {{ 'héllo'|length }} {{ {'a':1}|count }}", {}),
 ("f_join", "{{ [1,2,3]|join(', ') }} {{ ['a','b']|join }} {{ users|join(',', attribute='name') }}", {"users": [{"name": "x"}, {"name": "y"}]}),
 ("f_first_last", "{{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first }} {{ []|first is undefined }}", {}),
 ("f_list", "{{ 'ab'|list }} {{ {'x':1,'y':2}|list }} {{ (1,2)|list }}", {}),
 ("f_items", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}{{ d|dictsort }} {{ d|dictsort(reverse=true) }} {{ d|dictsort(by='value') }}", {"d": {"b": 2, "a": 3, "C": 1}}),
 ("f_map", "{{ users|map(attribute='name')|join('|') }} {{ ['a','b']|map('upper')|list }} {{ users|map(attribute='age', default=0)|list }}", {"users": [{"name": "x", "age": 3}, {"name": "y"}]}),
 ("f_select", "{{ [1,2,3,4,5]|select('odd')|list }} {{ [0,1,'',none,'a']|select|list }} {{ [1,2,3]|reject('even')|list }} {{ [1,5,9]|select('gt', 3)|list }}", {}),
 ("f_selectattr", "{{ users|selectattr('admin')|map(attribute='name')|list }} {{ users|rejectattr('admin')|map(attribute='name')|list }} {{ users|selectattr('name', 'equalto', 'y')|list }} {{ users|selectattr('role', 'defined')|list|length }}", {"users": [{"name": "x", "admin": True, "role": "r"}, {"name": "y", "admin": False}]}),
 ("f_unique_sort", "{{ [3,1,2,1,'A','a']|unique|list }} {{ [3,1,2]|sort }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} {{ [3,1,2]|sort(reverse=true) }} {{ users|sort(attribute='age')|map(attribute='n')|join }}", {"users": [{"n": "a", "age": 3}, {"n": "b", "age": 1}]}),
 ("f_reverse", "{{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }}", {}),
 ("f_numbers", "{{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(0, 'ceil') }} {{ 2.9|round(method='floor') }} {{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 'y'|float }} {{ 5|float }}", {}),
 ("f_sum_min_max", "{{ [1,2,3]|sum }} {{ [1.5,2]|sum }} {{ users|sum(attribute='v') }} {{ [3,1,2]|min }} {{ [3,1,2]|max }} {{ ['b','A']|min }} {{ users|max(attribute='v') }}", {"users": [{"v": 1}, {"v": 5}]}),
 ("f_batch", "{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 'x')|list }}", {}),
 # tojson
 ("tojson_basic", "{{ {'a': 1, 'b': [true, none, 1.5, 'é\"\\n'], 'c': {}}|tojson }}", {}),
 ("tojson_indent", "{{ d|tojson(indent=2) }}|{{ []|tojson(indent=2) }}|{{ d|tojson(indent='\t') }}", {"d": {"x": [1, {"y": None}], "z": "w"}}),
 ("tojson_seps_sort", "{{ d|tojson(separators=(',', ':')) }} {{ d|tojson(sort_keys=true) }}", {"d": {"b": [1, 2], "a": "x"}}),
 ("tojson_floats", "{{ [1.0, 0.1, 1e20, 1e-7, 123456789.123, 1e16, 1e15, -0.0, 3.0e-5]|tojson }} {{ 1e16 }} {{ 0.5 }} {{ 1/3 }}", {}),
 ("tojson_unicode", "{{ ['日本', '🙂', 'tab\\t', '\\u0001', '<>&']|tojson }}", {}),
 ("tojson_input", "{{ x|tojson }}", {"x": {"k": [1, 2.5, "s", None, True], "big": 12345678901234}}),
 # tests
 ("tests_types", "{{ 1 is number }}{{ 1.5 is float }}{{ 1 is integer }}{{ true is integer }}{{ true is number }}{{ 'a' is string }}{{ {} is mapping }}{{ [] is sequence }}{{ 'a' is iterable }}{{ none is none }}{{ true is boolean }}{{ false is false }}{{ true is true }}{{ range is callable }}", {}),
 ("tests_cmp", "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 2 is in [1,2] }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 2 is le 2 }}{{ 2 is ge 3 }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ none is sameas none }}{{ 1 is equalto 1 }}", {}),
 ("tests_not", "{{ x is not defined }}{{ 1 is not string }}{{ none is not none }}", {}),
 # operators
 ("ops_arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1 / 4 }} {{ 4 / 2 }} {{ 1 + 2.0 }} {{ 3 * 1.5 }} {{ true + 1 }}", {}),
 ("ops_str", "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ [1] * 3 }} {{ [1] + [2] }} {{ 1 ~ 2 ~ none }} {{ 'x' ~ [1] }}", {}),
 ("ops_in", "{{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ 'z' not in 'abc' }}", {}),
 ("ops_logic", "{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ none or [] }} {{ not 0 }} {{ not [1] }}", {}),
 ("ops_chain", "{{ 1 < 2 < 3 }} {{ 1 < 3 < 2 }} {{ 1 == 1.0 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ (1,2) == (1,2) }} {{ [1] == (1,) }}", {}),
 ("ops_cond", "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] {{ 1 if 0 else 2 if 0 else 3 }}", {}),
 ("ops_neg_pow", "{{ -2 ** 2 }} {{ -3|abs }} {{ -(3) }} {{ +4 }}", {}),
 ("ops_str_out", "{{ true }} {{ none }} {{ 1.0 }} {{ [1, 'a', none] }} {{ {'a': 'b'} }} {{ ('a',) }} {{ \"it's\" }} {{ ['it\\'s', 'q\"'] }}", {}),
 # slicing, subscripts
 ("slice", "{{ 'hello'[::-1] }} {{ [1,2,3,4][1:3] }} {{ [1,2,3,4][-2:] }} {{ 'abcdef'[::2] }} {{ [1,2,3][:-1] }} {{ 'héllo'[1:3] }} {{ [1,2,3][5:] }} {{ [1,2,3,4,5][4:0:-2] }}", {}),
 ("subscript", "{{ d['a'] }} {{ d.a }} {{ l[0] }} {{ l[-1] }} {{ l.0 }} {{ 'abc'[1] }} {{ d['items'] is defined }} {{ d.get('zz', 'dflt') }} {{ d.get('a') }}", {"d": {"a": 1}, "l": [5, 6]}),
 ("dict_key_attr", "{{ d.items is callable }}|{{ d['keys'] }}|{{ m.content }}", {"d": {"items": 7, "keys": 8}, "m": {"content": "c"}}),
 # macros / call / namespace / set
 ("macro_basic", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}", {}),
 ("macro_filter", "{% macro m(x) %}  {{ x }}  {% endmacro %}[{{ m('v')|trim }}][{{ m('w')|upper }}][{{ m('z')|length }}]", {}),
 ("macro_varargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", {}),
 ("macro_recursive", "{% macro r(n) %}{% if n > 0 %}{{ n }}{{ r(n - 1) }}{% endif %}{% endmacro %}{{ r(4) }}", {}),
 ("macro_sees_globals", "{% macro m() %}{{ g }}{% endmacro %}{% set g = 'late' %}{{ m() }}", {}),
 ("call_block", "{% macro wrap(t) %}<{{ t }}>{{ caller() }}</{{ t }}>{% endmacro %}{% call wrap('b') %}inner{% endcall %}", {}),
 ("call_block_args", "{% macro each(xs) %}{% for x in xs %}{{ caller(x) }}{% endfor %}{% endmacro %}{% call(v) each([1,2]) %}[{{ v }}]{% endcall %}", {}),
 ("namespace", "{% set ns = namespace(a=1, found=false) %}{% for x in [1,2,3] %}{% set ns.a = ns.a + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.a }} {{ ns.found }}", {}),
 ("set_block", "{% set body %}\n  Hello {{ 'x' }}\n{% endset %}[{{ body }}]{% set up | upper %}abc{% endset %}{{ up }}", {}),
 ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, %}{{ t }}", {}),
 ("filter_block", "{% filter upper %}hello {{ 'x' }}{% endfilter %}|{% filter trim|upper %}  y  {% endfilter %}", {}),
 ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
 ("generation", "{% generation %}gen {{ 1 }}{% endgeneration %}", {}),
 # recursive loops, loop.changed / depth, groupby
 ("loop_recursive", "{% for item in tree recursive %}{{ item.n }}{{ loop.depth }}{{ loop.depth0 }}{% if item.c %}[{{ loop(item.c) }}]{% endif %}{% endfor %}", {"tree": [{"n": "a", "c": [{"n": "b", "c": [{"n": "c"}]}, {"n": "d"}]}, {"n": "e"}]}),
 ("loop_recursive_vars", "{% for x in t recursive %}<{{ loop.index }}/{{ loop.length }}{{ loop.first }}{{ loop.last }}:{{ x.v }}{% if x.k is defined %}{{ loop(x.k)|upper }}{% endif %}>{% else %}none{% endfor %}", {"t": [{"v": "p", "k": [{"v": "q"}, {"v": "r", "k": []}]}]}),
 ("loop_recursive_filter", "{% for x in t if x.on recursive %}{{ x.v }}{% if x.k %}({{ loop(x.k) }}){% endif %}{% endfor %}", {"t": [{"v": 1, "on": True, "k": [{"v": 2, "on": False}, {"v": 3, "on": True}]}, {"v": 4, "on": False}]}),
 ("loop_changed", "{% for x in [1,1,2,3,3,1] %}{% if loop.changed(x) %}{{ x }}{% endif %}{% endfor %}|{% for u in us %}{% if loop.changed(u.a, u.b) %}{{ loop.index }}{% endif %}{% endfor %}", {"us": [{"a": 1, "b": 1}, {"a": 1, "b": 1}, {"a": 1, "b": 2}]}),
 ("f_groupby", "{% for g in us|groupby('city') %}{{ g.grouper }}:{{ g.list|map(attribute='n')|join(',') }};{% endfor %}|{% for city, items in us|groupby('city')|reverse %}{{ city }}={{ items|length }} {% endfor %}|{{ us|groupby('x', default='?')|map(attribute='grouper')|list }}|{{ us|groupby('city')|list|length }}", {"us": [{"n": "a", "city": "Oslo"}, {"n": "b", "city": "Bergen", "x": "z"}, {"n": "c", "city": "Oslo"}]}),
 ("f_groupby_case", "{% for g in ws|groupby('k') %}{{ g.grouper }}{{ g.list|length }} {% endfor %}|{% for g in ws|groupby('k', case_sensitive=true) %}{{ g.grouper }}{{ g.list|length }} {% endfor %}|{% for k, v in [[2, 'a'], [1, 'b'], [2, 'c']]|groupby(0) %}{{ k }}{{ v|length }}{% endfor %}", {"ws": [{"k": "b"}, {"k": "A"}, {"k": "a"}]}),
 # printf-style and str.format specs
 ("percent_specs", "[{{ '%d|%5d|%-5d|%05d|%+d|% d|%i' % (42, 42, 42, 42, 42, 42, -7) }}][{{ '%x|%X|%o|%#x|%5x' % (255, 255, 8, 255, 10) }}][{{ '%.2f|%5.1f|%-8.3f|%08.2f|%f|%.0f' % (3.14159, 2.25, 1.5, -2.5, 1, 2.5) }}][{{ '%s|%5s|%-5s|%.2s|%r' % ('ab', 'ab', 'ab', 'abc', 'q') }}][{{ '%e|%.3e|%g|%g|%G|%c|%c' % (12345.678, 0.00012, 0.0001, 1e20, 1e-20, 65, 'z') }}]", {}),
 ("percent_dict_star", "{{ '%(a)s-%(b)05.1f' % {'a': 'x', 'b': 2.345} }} {{ '%*d|%-*s|%.*f' % (4, 7, 3, 'a', 2, 3.14159) }} {{ '%d%%' % 50 }} {{ '%s' % [1, 2] }} {{ '%s' % none }} {{ '%d' % 3.9 }} {{ '%d' % true }}", {}),
 ("f_format_specs", "{{ '%5.1f'|format(3.14159) }}|{{ '%-5s|'|format('ab') }}{{ '%x'|format(255) }}|{{ '%(a)s=%(b)d'|format(a='k', b=3) }}|{{ '%s, %s!'|format('Hello', 'World') }}", {}),
 ("str_format_specs", "[{{ '{:d}|{:5}|{:<5}|{:>5}|{:^5}|{:*^7}'.format(42, 42, 'ab', 'ab', 'ab', 'ab') }}][{{ '{:.2f}|{:8.3f}|{:<8.1f}|{:+.1f}|{:.0f}|{:.3}|{:g}|{:e}'.format(3.14159, 2.5, 1.25, 2, 2.5, 3.14159, 0.0001, 1234.5) }}][{{ '{:x}|{:X}|{:o}|{:b}|{:#x}|{:05d}|{:,}|{:_}|{:08.2f}'.format(255, 255, 8, 5, 255, 42, 1234567, 1234567, -3.5) }}][{{ '{0:>4}{1:<3}|{name:^6}|{0}'.format('a', 'b', name='mid') }}][{{ '{:.2%}|{:%}'.format(0.256, 0.5) }}][{{ '{!r}|{!s:>4}|{:}'.format('q', 'w', 'e') }}][{{ '{:5}|{:<5}|{:.1s}'.format(true, 'n', 'xyz') }}]", {}),
 ("str_format_index", "{{ '{0[0]}-{0[1]}|{d[k]}|{u.n}'.format(['x', 'y'], d={'k': 'v'}, u={'n': 'm'}) }} {{ '{{literal}} {}'.format(1) }}", {}),
 # methods
 ("str_methods", "{{ 'a,b,,c'.split(',') }} {{ 'a b  c'.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x '.strip() }}|{{ 'xxa'.lstrip('x') }}|{{ 'axx'.rstrip('x') }}", {}),
 ("str_methods2", "{{ 'abc'.startswith('a') }} {{ 'abc'.endswith(('x','c')) }} {{ 'hello'.replace('l', 'L') }} {{ 'Hello'.upper() }} {{ 'Hello'.lower() }} {{ 'hello world'.title() }} {{ 'hello'.capitalize() }} {{ 'hello'.find('l') }} {{ 'hello'.find('z') }} {{ 'hello'.count('l') }} {{ '-'.join(['a','b']) }} {{ '{} and {}'.format(1, 'x') }} {{ '{n}!'.format(n=3) }}", {}),
 ("list_methods", "{{ [1,2,3].index(2) }} {{ [1,1,2].count(1) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}", {"d": {"a": 1, "b": 2}}),
 ("globals", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }} {{ dict(a=1, b=2) }} {{ strftime_now('%Y-%m-%d %H:%M %B %d') }}", {}),
]
# (name, template, context) that must raise; the error text is in the table for reference
E = [
 ("err_undef_attr", "{{ nope.x }}", {}),
 ("err_undef_item", "{{ d.missing.x }}", {"d": {}}),
 ("err_undef_call", "{{ nope() }}", {}),
 ("err_concat", "{{ 'a' + [1] }}", {}),
 ("err_concat_none", "{{ 'a' + none }}", {}),
 ("err_add_types", "{{ 1 + 'a' }}", {}),
 ("err_raise", "{{ raise_exception('custom message') }}", {}),
 ("err_append", "{% set x = [1] %}{{ x.append(2) }}", {}),
 ("err_update", "{% set d = {} %}{{ d.update({'a': 1}) }}", {}),
 ("err_none_iter", "{% for x in none %}{% endfor %}", {}),
 ("err_in_none", "{{ 'a' in none }}", {}),
 ("err_len_none", "{{ none|length }}", {}),
 ("err_items_str", "{{ 'abc'|items|list }}", {}),
 ("err_generator_json", "{{ [1]|map('string')|tojson }}", {}),
 ("err_undef_json", "{{ nope|tojson }}", {}),
 ("err_div_zero", "{{ 1 / 0 }}", {}),
 ("err_unknown_filter", "{{ 1|no_such_filter }}", {}),
 ("err_unknown_test", "{{ 1 is no_such_test }}", {}),
 ("err_unpack", "{% for a, b in [[1,2,3]] %}{% endfor %}", {}),
 ("err_range", "{{ range(100001)|length }}", {}),
 ("err_str_attr", "{{ 'abc'.nope() }}", {}),
 ("err_none_elem", "{{ none[0].x }}", {}),
 ("err_ns_assign", "{% set d = {} %}{% set d.x = 1 %}", {}),
 ("err_syntax_endfor", "{% for x in y %}", {}),
 ("err_syntax_tag", "{% frobnicate %}", {}),
 ("err_syntax_expr", "{{ 1 + }}", {}),
 ("err_syntax_string", "{{ 'abc }}", {}),
 ("err_syntax_comment", "{# abc", {}),
 ("err_lt_types", "{{ 1 < 'a' }}", {}),
 ("err_percent_type", "{{ '%d' % 'a' }}", {}),
 ("err_percent_few", "{{ '%s %s' % ('a',) }}", {}),
 ("err_format_type", "{{ '{:d}'.format('a') }}", {}),
 ("err_format_spec", "{{ '{:q}'.format(1) }}", {}),
 ("err_format_mixed", "{{ '%s %(a)s'|format('x', a=1) }}", {}),
 ("err_loop_outside", "{% for x in [1] %}{% endfor %}{{ loop(x) }}", {}),
]
import sys, json, importlib.util
spec=importlib.util.spec_from_file_location('rr',sys.argv[1] + '/templates/render_reference.py'); rr=importlib.util.module_from_spec(spec); spec.loader.exec_module(rr)
e=rr.env()
def cstr(s):
    out='"'
    for ch in s:
        o=ord(ch)
        if ch=='\\': out+='\\\\'
        elif ch=='"': out+='\\"'
        elif ch=='\n': out+='\\n'
        elif ch=='\t': out+='\\t'
        elif ch=='\r': out+='\\r'
        elif o<0x20: out+='\\x%02x""'%o
        else: out+=ch
    return out+'"'
lines=[]
for name,src,ctx in C:
    out=e.from_string(src).render(**ctx)
    lines.append('    {%s,\n     %s,\n     %s,\n     %s},' % (cstr(name), cstr(src), cstr(json.dumps(ctx, ensure_ascii=False)), cstr(out)))
print("// Generated by tests/chat/test_jinja_cases_gen.py: each template rendered with Python Jinja2 3.1.2 set up as")
print("// render_reference.py does (HF's settings); never edited by hand.")
print("const Case kCases[] = {")
print("\n".join(lines))
print("};")
lines=[]
for name,src,ctx in E:
    try:
        e.from_string(src).render(**ctx); msg="NO ERROR"
    except Exception as ex:
        msg=f"{type(ex).__name__}: {ex}"
    lines.append('    {%s,\n     %s,\n     %s,\n     %s},' % (cstr(name), cstr(src), cstr(json.dumps(ctx, ensure_ascii=False)), cstr(msg)))
print("// Each raises in Jinja2; the last field is Jinja2's error (type: message), as it printed it.")
print("const Case kErrors[] = {")
print("\n".join(lines))
print("};")
