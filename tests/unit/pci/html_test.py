#!/usr/bin/env python3
"""bardrive topo --html in a real browser: Debian's chromium --headless loads the page written from the
dual-socket fixture and from the DGX-2 hwloc XML, and the DOM it renders must hold every function and
host bridge of the model, no page error or console message, and for picked pairs the exact text of
'bardrive topo p2p A B'. Also: nothing on the page can load from the network, the embedded JSON is
'topo --json --all', and a name holding '</script>' stays data.
usage: html_test.py BARDRIVE FIXTURES_DIR SHARED_TOPOLOGIES_DIR"""
import html.parser
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

cli, fixtures, shared = sys.argv[1:4]
snap = os.path.join(fixtures, 'dual-socket.snapshot')
dgx2 = os.path.join(shared, 'nvidia-dgx2h-16xv100-hwloc', 'nvidiaDGX2.v2.xml')
genoa = os.path.join(shared, 'asus-esc8000a-e12-4xrtx6000ada-2s-genoa', 'lspci-tv.txt')
failures = []

chromium = shutil.which('chromium') or shutil.which('chromium-browser')
if not chromium:
    print('SKIPPED: no chromium to load the page in (Debian package chromium; scripts/setup.sh installs it)')
    sys.exit(77)


def check(cond, what):
    if not cond:
        failures.append(what)
    return cond


def topo(*args):
    p = subprocess.run([cli, 'topo', *args], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, f'topo {" ".join(args)}: exit {p.returncode}\n{p.stderr}')
    return p.stdout


VOID = {'area', 'base', 'br', 'col', 'embed', 'hr', 'img', 'input', 'link', 'meta', 'source', 'track', 'wbr'}


class Dom(html.parser.HTMLParser):
    """The serialized DOM chromium dumps, as nested [tag, attrs, children] with text children."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = ['#root', {}, []]
        self.stack = [self.root]
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        node = [tag, dict(attrs), []]
        self.stack[-1][2].append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1][2].append(data)

    def find(self, pred, node=None):
        node = node or self.root
        for c in node[2]:
            if isinstance(c, list):
                if pred(c):
                    return c
                hit = self.find(pred, c)
                if hit:
                    return hit
        return None

    def by_id(self, id_):
        return self.find(lambda n: n[1].get('id') == id_)

    @staticmethod
    def text(node):
        if node is None:
            return ''
        return ''.join(c if isinstance(c, str) else Dom.text(c) for c in node[2])


def load(tmp, page, fragment=''):
    """chromium's DOM of the page after its scripts ran, with what the page and chromium reported."""
    cmd = [chromium, '--headless', '--disable-gpu', '--enable-logging=stderr', '--v=0',
           '--user-data-dir=' + os.path.join(tmp, 'profile'), '--virtual-time-budget=5000',
           '--disable-ipc-flooding-protection',  # EVERY_PAIR sets the address hundreds of times
           '--dump-dom', 'file://' + page + fragment]
    if os.geteuid() == 0:
        cmd.insert(1, '--no-sandbox')  # chromium refuses to run as root with its sandbox
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    what = f'{os.path.basename(page)}{fragment}'
    check(p.returncode == 0 and '</html>' in p.stdout, f'{what}: chromium exit {p.returncode}\n{p.stderr[-2000:]}')
    dom = Dom(p.stdout)
    errors = dom.by_id('page-errors')
    check(errors is not None and Dom.text(errors) == '', f'{what}: page errors: {Dom.text(errors)}')
    console = [line for line in p.stderr.splitlines() if ':CONSOLE' in line or 'Uncaught' in line]
    check(not console, f'{what}: console messages:\n' + '\n'.join(console))
    return dom


def embedded_json(page):
    text = open(page, encoding='utf-8').read()
    m = re.search(r'<script type="application/json" id="topology">(.*?)</script>', text, re.S)
    try:
        return text, json.loads(m.group(1))
    except (AttributeError, ValueError) as e:  # no element, or a name cut the script element short
        check(False, f'{page}: no JSON in the topology script element: {e}')
        return text, None


def write_page(tmp, name, *args):
    page = os.path.join(tmp, name)
    out = topo('--html', page, *args)
    check(out.startswith('wrote ' + page), f'--html {name}: {out}')
    return page


def check_static(page, expect_json, source_args):
    text, doc = embedded_json(page)
    check(not re.search(r'https?://', text, re.I), f'{page}: holds an http(s) URL')
    code = re.sub(r'<script type="application/json".*?</script>', '', text, flags=re.S)
    for loader in ('<link', ' src=', 'url(', '@import', 'fetch(', 'XMLHttpRequest', 'WebSocket', 'import('):
        check(loader not in code, f'{page}: page code holds {loader!r}: it must load nothing')
    check(doc == expect_json, f'{page}: embedded JSON differs from topo --json --all {" ".join(source_args)}')
    return doc


def check_model_on_page(dom, doc, what):
    tree = Dom.text(dom.by_id('tree'))
    missing = [d['bdf'] for d in doc['devices'] if d['bdf'] not in tree]
    missing += [h['name'] for h in doc['host_bridges'] if h['name'] not in tree]
    check(not missing, f'{what}: not in the rendered tree: {missing}')
    rows = [n for n in iter_nodes(dom.root) if 'dev' in n[1].get('class', '').split()]
    check(len(rows) == len(doc['devices']), f'{what}: {len(rows)} device rows for {len(doc["devices"])} functions')
    picks = {p['initiator'] for p in doc['pairs']}
    options = [n for n in iter_nodes(dom.by_id('pick-a')) if n[0] == 'option']
    check(len(options) == len(picks) + 1, f'{what}: {len(options)} initiator options for {len(picks)} devices')


def nvlink_tag(node):
    return 'c-nv' in node[1].get('class', '').split()


def iter_nodes(node):
    for c in (node or ['', {}, []])[2]:
        if isinstance(c, list):
            yield c
            yield from iter_nodes(c)


def check_pair(tmp, page, source_args, a, b, expect_head):
    cli_text = topo('p2p', a, b, *source_args)
    check(cli_text.startswith(f'{a} -> {b}: {expect_head}\n'), f'CLI p2p {a} {b}: expected {expect_head}:\n{cli_text}')
    dom = load(tmp, page, f'#a={a}&b={b}')
    shown = Dom.text(dom.by_id('p2p-text'))
    check(shown == cli_text.rstrip('\n'), f'page pair {a} -> {b}:\n--- page\n{shown}\n--- topo p2p\n{cli_text}')
    return dom


def with_script(page, name, script, doc=None):
    """A copy of the page that runs `script` after its own, with `doc` as its data if given."""
    text = open(page, encoding='utf-8').read()
    if doc is not None:
        text = re.sub(r'(<script type="application/json" id="topology">).*?(</script>)',
                      lambda m: m.group(1) + json.dumps(doc).replace('<', '\\u003c') + m.group(2), text, flags=re.S)
    copy = os.path.join(os.path.dirname(page), name)
    with open(copy, 'w', encoding='utf-8') as f:
        f.write(text.replace('</body>', '<script>' + script + '</script></body>'))
    return copy


# Picks every ordered pair through the two selects and writes the page's texts into <pre id="all-pairs">.
EVERY_PAIR = '''
var a = document.getElementById('pick-a'), b = document.getElementById('pick-b'), out = [];
var bdfs = Array.from(a.options).map(function (o) { return o.value; }).filter(Boolean);
bdfs.forEach(function (x) {
    bdfs.forEach(function (y) {
        if (x === y) return;
        a.value = x;
        b.value = y;
        b.dispatchEvent(new Event('change'));
        out.push(document.getElementById('p2p-text').textContent);
    });
});
var pre = document.createElement('pre');
pre.id = 'all-pairs';
pre.textContent = out.join('\\n');
document.body.appendChild(pre);
'''


def check_every_pair(tmp, page, source_args, what):
    """Every pair the page offers against 'topo p2p --all' (the same devices, in the same order)."""
    dom = load(tmp, with_script(page, 'every-pair.html', EVERY_PAIR))
    shown = Dom.text(dom.by_id('all-pairs')).split('\n')
    cli_lines = topo('p2p', '--all', *source_args).rstrip('\n').split('\n')
    diff = next((i for i, (x, y) in enumerate(zip(shown, cli_lines)) if x != y), None)
    if diff is None and len(shown) != len(cli_lines):
        diff = min(len(shown), len(cli_lines))
    check(diff is None, f'{what}: every pair: line {diff} differs:\n--- page\n' + '\n'.join(shown[diff:diff + 3] if diff
          is not None else []) + '\n--- topo p2p --all\n' + '\n'.join(cli_lines[diff:diff + 3] if diff is not None else []))
    return sum(1 for line in shown if not line.startswith(' '))


with tempfile.TemporaryDirectory() as tmp:
    # The two-socket fixture: the whole model, several pairs of every verdict, a click-picked pair.
    src = ['--sysfs', snap]
    page = write_page(tmp, 'dual-socket.html', *src)
    doc = check_static(page, json.loads(topo('--json', '--all', *src)), src)
    endpoints = [d for d in doc['devices'] if d['role'] == 'endpoint']
    check(len(doc['pairs']) == len(endpoints) * (len(endpoints) - 1), 'pairs of every two endpoints')
    for a, b, head in [('0000:1a:00.0', '0000:1b:00.0', 'PIX, supported'),
                       ('0000:1a:00.0', '0000:af:00.0', 'SYS, platform-dependent'),
                       ('0000:1a:00.0', '0000:b1:00.0', 'SYS, unsupported')]:
        dom = check_pair(tmp, page, src, a, b, head)
    check_model_on_page(dom, doc, 'dual-socket')
    check(dom.find(nvlink_tag) is None, 'NVLink shown for a pair without the nvlinks field')
    tree = Dom.text(dom.by_id('tree'))
    check('5GT/s x2 (capable 8GT/s x4)' in tree, 'downgraded NVMe link on the page')

    check(check_every_pair(tmp, page, src, 'dual-socket') == 110, 'dual-socket: 110 pairs picked')

    # Picking by clicking: two clicks on the tree's rows pick initiator and target and set the address.
    # The pair also gets the optional "nvlinks" field, which the page shows beside the class.
    for p in doc['pairs']:
        if (p['initiator'], p['target']) == ('0000:1b:00.0', '0000:1c:00.0'):
            p['nvlinks'] = 12
    dom = load(tmp, with_script(page, 'clicked.html', '''
document.querySelector('.dev[data-bdf="0000:1b:00.0"]').click();
document.querySelector('.dev[data-bdf="0000:1c:00.0"]').click();
document.body.dataset.hash = location.hash;
''', doc))
    check(Dom.text(dom.by_id('p2p-text')) == topo('p2p', '0000:1b:00.0', '0000:1c:00.0', *src).rstrip('\n'),
          'clicked pair 1b -> 1c: ' + Dom.text(dom.by_id('p2p-text')))
    check(Dom.text(dom.find(nvlink_tag)) == 'NV12', 'nvlinks of the pair: ' + Dom.text(dom.by_id('verdict-head')))
    body = dom.find(lambda n: n[0] == 'body')
    check(body and body[1].get('data-hash') == '#a=0000:1b:00.0&b=0000:1c:00.0', f'address after clicks: {body and body[1]}')

    # Filters pick the devices to pair; the page names the endpoints left out.
    gpus = write_page(tmp, 'gpus.html', *src, '--class', 'gpu')
    _, only = embedded_json(gpus)
    check(only and len(only['pairs']) == 6 and all(devs['kind'] == 'gpu' for devs in only['devices']
                                                  if devs['bdf'] in {p['initiator'] for p in only['pairs']}),
          '--class gpu: pairs of the three GPUs')
    dom = load(tmp, gpus, '#a=1a:00.0&b=0000:1c:00.0')
    hint = Dom.text(dom.by_id('pair-hint'))
    check('0000:1c:00.0 is not among the devices this page pairs' in hint and '3 of 11 endpoints can be paired.' in hint
          and '0000:3b:00.0' in hint.split('left out')[-1], 'a device the filter left out, in the address: ' + hint)

    # Bad requests fail with a message, and write nothing.
    for args, rc, message in [(['--html', os.path.join(tmp, 'no', 'such', 'x.html')], 1, 'check that the folder exists'),
                              (['--html', os.path.join(tmp, 'x.html'), '--json'], 2, 'give at most one of them')]:
        p = subprocess.run([cli, 'topo', '--sysfs', snap, *args], capture_output=True, text=True, timeout=60)
        check(p.returncode == rc and message in p.stderr and not os.path.exists(os.path.join(tmp, 'x.html')),
              f'topo {" ".join(args)}: exit {p.returncode}: {p.stderr}')

    # A name that would end the script element, or hold markup, stays data.
    hostile = os.path.join(tmp, 'hostile.snapshot')
    name = '</script><b>x</b><!--&amp;"\'\\'
    text = open(snap, encoding='utf-8').read()
    check('\nens1f1\n' in text, 'fixture net name')
    with open(hostile, 'w', encoding='utf-8') as f:
        f.write(text.replace('\nens1f1\n', '\n' + name + '\n'))
    page = write_page(tmp, 'hostile.html', '--sysfs', hostile)
    raw, doc = embedded_json(page)
    check('</script><b>' not in raw and doc and doc['devices'][[d['bdf'] for d in doc['devices']].index('0000:1c:00.1')]
          ['os_names'] == ['net:' + name], 'hostile name escaped in the page, intact in its JSON')
    dom = load(tmp, page, '#a=0000:99:00.0&b=1a:00.0')
    check('0000:99:00.0 is not a function of this topology' in Dom.text(dom.by_id('pair-hint')), 'unknown BDF in the hash')
    if doc:
        check_model_on_page(dom, doc, 'hostile')
    check('net:' + name in Dom.text(dom.by_id('tree')), 'hostile name shown as text')
    check(dom.find(lambda n: n[0] == 'b') is None, 'hostile name made no element')

    # DGX-2 size: 84 functions below a 3-level PLX tree on two sockets.
    if os.path.exists(dgx2):
        src = ['--hwloc-xml', dgx2]
        page = write_page(tmp, 'dgx2.html', *src)
        check(os.path.getsize(page) < 2 << 20, f'DGX-2 page is {os.path.getsize(page)} bytes')
        doc = check_static(page, json.loads(topo('--json', '--all', *src)), src)
        check(check_every_pair(tmp, page, src, 'DGX-2') == 28 * 27, 'DGX-2: every pair picked')
        check_model_on_page(check_pair(tmp, page, src, '0000:34:00.0', '0000:e7:00.0', 'SYS, platform-dependent'), doc,
                            'DGX-2')
    else:
        print(f'note: {dgx2} missing: DGX-2 page not checked')

    # 198 functions, 139 endpoints: the page pairs 64 of them and says which it left out.
    if os.path.exists(genoa):
        src = ['--lspci-tv', genoa]
        page = os.path.join(tmp, 'genoa.html')
        p = subprocess.run([cli, 'topo', '--html', page, *src], capture_output=True, text=True, timeout=60)
        check(p.returncode == 0 and 'the page pairs 64 of 139 devices' in p.stderr, f'Genoa --html:\n{p.stderr}')
        _, doc = embedded_json(page)
        if doc:
            check(len({x['initiator'] for x in doc['pairs']}) == 64 and len(doc['pairs']) == 64 * 63, 'Genoa: 64 devices')
            dom = check_pair(tmp, page, src, '0000:01:00.0', '0000:41:00.0', 'SYS, platform-dependent')
            check_model_on_page(dom, doc, 'Genoa')
            hint = Dom.text(dom.by_id('pair-hint'))
            check('64 of 139 endpoints can be paired.' in hint and '75 left out' in hint, 'Genoa hint: ' + hint[:300])
    else:
        print(f'note: {genoa} missing: the page limit not checked')

for f in failures:
    print('FAIL:', f)
print(f'{len(failures)} failures')
sys.exit(1 if failures else 0)
