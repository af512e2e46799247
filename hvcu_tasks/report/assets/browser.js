(() => {
  const data = JSON.parse(document.getElementById('chain-data').textContent);
  const FILTERS = ['model', 'family', 'aspect', 'base', 'context', 'delta', 'id'];
  const LEVELS = ['L1 perception', 'L2 bridge', 'L3 connotation'];
  const SETTINGS = ['base', 'context'];
  const $ = id => document.getElementById(id);
  const el = (tag, cls, text) => {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  };
  let state = {};
  const hasPairs = data.models.length >= 2 && $('pairs') !== null;
  const PAIR_FIELDS = ['a', 'b', 'setting', 'rule'];
  const RULES = { official: 'the authors\' rule', ours: 'this toolkit\'s rule' };
  const DISCORDANT = ['a-holds', 'b-holds'].flatMap(g => [g, g + '-L1', g + '-L2', g + '-L3']);

  const fill = (id, values) => values.forEach(([value, label]) => {
    const option = el('option', null, label);
    option.value = value;
    $(id).appendChild(option);
  });
  fill('f-model', data.models.map(m => [m, m]));
  fill('f-family', data.families);
  fill('f-aspect', data.aspects.map(([family, aspect]) => [aspect, aspect + ' (' + family + ')']));
  if (hasPairs) ['p-a', 'p-b'].forEach(id => fill(id, data.models.map(m => [m, m])));

  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    state = {};
    for (const [key, value] of params) state[key] = value;
    FILTERS.forEach(f => { $('f-' + f).value = state[f] || ''; });
    if (hasPairs) {
      const chosen = pairChoice();
      PAIR_FIELDS.forEach(f => { $('p-' + f).value = chosen[f]; });
    }
  }
  function writeHash() {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(state)) if (value) params.set(key, value);
    history.replaceState(null, '', '#' + params.toString());
  }

  function matches(card) {
    if (state.model && data.models[card.model] !== state.model) return false;
    if (state.family && card.family !== state.family) return false;
    if (state.aspect && card.aspect !== state.aspect) return false;
    for (const s of SETTINGS) if (state[s] && !(card[s] && card[s].first === state[s])) return false;
    if (state.delta) {
      if (!card.base || !card.context) return false;
      const base = card.base.full, context = card.context.full;
      if (state.delta === 'base-only' && !(base === true && context === false)) return false;
      if (state.delta === 'context-only' && !(base === false && context === true)) return false;
      if (state.delta !== 'base-only' && state.delta !== 'context-only') return false;
    }
    if (state.id && !card.id.toLowerCase().includes(state.id.toLowerCase())) return false;
    return true;
  }

  // A card judged by one parsing rule: ours in the card list (its filters), the chosen one in the two-model view.
  function verdictBadge(setting, chain, rule) {
    if (!chain) return el('span', 'badge', setting + ': not run');
    const first = rule === 'official' ? chain.first_official : chain.first;
    const text = first === 'none' ? 'all right' : first === 'incomplete' ? 'chain incomplete' : 'first wrong ' + first;
    const by = rule === 'official' ? ' (authors\' rule)' : '';
    return el('span', 'badge ' + (first === 'none' ? 'right' : 'wrong'), setting + ': ' + text + by);
  }

  function questionCell(card, k) {
    const td = el('td');
    const own = SETTINGS.map(s => card[s]).filter(c => c && c.questions[k] !== undefined);
    if (!own.length) return td;
    const [question, options] = data.questions[own[0].questions[k]];
    const gold = own[0].gold[k];
    td.appendChild(el('p', 'question', question));
    if (options) {
      const list = el('ul', 'options');
      for (const [key, text] of options) {
        const li = el('li', key === gold ? 'gold' : null, key + '. ' + text + (key === gold ? ' ✓' : ''));
        for (const s of SETTINGS) {
          if (card[s] && card[s].parsed[k] === key) li.appendChild(el('span', 'pick', '← ' + s));
        }
        list.appendChild(li);
      }
      td.appendChild(list);
    }
    for (const other of own.slice(1)) {
      if (other.questions[k] !== own[0].questions[k]) {
        td.appendChild(el('p', 'note', 'asked in the context setting as: ' + data.questions[other.questions[k]][0]));
      }
    }
    return td;
  }

  function replyCell(chain, k, rule) {
    const td = el('td');
    if (!chain) { td.appendChild(el('span', 'empty', 'not run')); return td; }
    if (chain.parsed[k] === undefined) { td.appendChild(el('span', 'empty', 'not asked (chain cut)')); return td; }
    const right = (rule === 'official' ? chain.correct_official : chain.correct)[k];
    const line = el('div', null);
    line.appendChild(el('span', right ? 'ok' : 'bad', right ? '✓ ' : '✗ '));
    const letters = (chain.parsed[k] || '—') + ' (authors\' ' + (chain.official[k] || '—') + ')';
    line.appendChild(document.createTextNode(letters));
    if (!chain.parsed[k] || !chain.official[k]) line.appendChild(el('span', 'note', ' (—: no letter read)'));
    td.appendChild(line);
    const reply = chain.replies[k];
    if (chain.failed[k] && !reply) td.appendChild(el('pre', 'reply empty', '(no reply)'));
    else td.appendChild(el('pre', 'reply', reply));
    if (chain.cut[k]) {
      td.appendChild(el('p', 'note', '… ' + chain.cut[k] + ' more characters not shown (see the samples file)'));
    }
    return td;
  }

  function cardElement(card, rule = 'ours') {
    const article = el('article', 'card');
    article.setAttribute('data-model', data.models[card.model]);
    article.setAttribute('data-id', card.id);
    const head = el('h2', null, card.id);
    head.appendChild(el('span', 'meta', [card.family, card.aspect, data.models[card.model]].join(' · ')));
    SETTINGS.forEach(s => head.appendChild(verdictBadge(s, card[s], rule)));
    article.appendChild(head);
    const figure = el('div', 'figure');
    if (card.image) {
      const button = el('button', 'thumb');
      button.type = 'button';
      const img = el('img');
      img.loading = 'lazy';
      img.alt = 'image of ' + card.id;
      img.src = 'thumbs/' + card.image + '.jpg';
      button.appendChild(img);
      button.addEventListener('click', () => {
        $('lightbox').querySelector('img').src = 'images/' + card.image + '.jpg';
        $('lightbox').hidden = false;
      });
      figure.appendChild(button);
    } else {
      figure.appendChild(el('div', 'placeholder', 'no image'));
      figure.appendChild(el('p', 'note', card.note));
    }
    article.appendChild(figure);
    const table = el('table');
    const cols = el('colgroup');
    ['level', 'question', 'gold', 'reply', 'reply'].forEach(c => cols.appendChild(el('col', c)));
    table.appendChild(cols);
    const headRow = el('tr');
    const heads = ['Level', 'Question and options', 'Gold', 'Base: reply', 'Context: reply'];
    heads.forEach(t => headRow.appendChild(el('th', null, t)));
    table.appendChild(el('thead')).appendChild(headRow);
    const body = el('tbody');
    const depth = Math.max(...SETTINGS.map(s => card[s] ? card[s].questions.length : 0));
    for (let k = 0; k < depth; k++) {
      const row = el('tr');
      row.appendChild(el('th', null, LEVELS[k] || 'L' + (k + 1)));
      row.appendChild(questionCell(card, k));
      const chain = card.base || card.context;
      row.appendChild(el('td', null, chain.gold[k]));
      SETTINGS.forEach(s => row.appendChild(replyCell(card[s], k, rule)));
      body.appendChild(row);
    }
    table.appendChild(body);
    article.appendChild(el('div', 'scroll')).appendChild(table);
    const sources = SETTINGS.filter(s => card[s]).map(s => s + ': ' + card[s].source).join('   ');
    article.appendChild(el('p', 'sources', sources));
    return article;
  }

  // ---- the two-model view (the same grouping as hvcu_tasks/report/pairs.py) ----

  function pairChoice() {
    return {
      a: state.a || data.models[0],
      b: state.b || data.models.find(m => m !== (state.a || data.models[0])),
      setting: state.setting || 'base', rule: state.rule || 'official',
    };
  }

  function pairProblem(p) {
    if (p.a === p.b) return 'Model A and model B are both ' + p.a + ': pick two different models.';
    for (const m of [p.a, p.b]) if (!data.models.includes(m)) return 'No model ' + m + ' on this page.';
    if (!SETTINGS.includes(p.setting)) return 'No setting ' + p.setting + ' (base or context).';
    if (!RULES[p.rule]) return 'No parsing rule ' + p.rule + ' (official or ours).';
    if (state.pair && !DISCORDANT.includes(state.pair)) return 'No group ' + state.pair + ' to list.';
    return null;
  }

  function pairKey(firstA, firstB) {
    if (firstA === 'incomplete' || firstB === 'incomplete') return 'incomplete';
    if (firstA === 'none' && firstB === 'none') return 'both-hold';
    if (firstA === 'none') return 'a-holds-' + firstB;
    if (firstB === 'none') return 'b-holds-' + firstA;
    return 'both-break';
  }

  function pairGroups(p) {
    const field = p.rule === 'ours' ? 'first' : 'first_official';
    const chains = { a: new Map(), b: new Map() };
    const order = [];
    for (const card of data.cards) {
      const model = data.models[card.model];
      const side = model === p.a ? 'a' : model === p.b ? 'b' : null;
      if (!side || !card[p.setting]) continue;
      const key = JSON.stringify([card.family, card.id]);
      if (!chains.a.has(key) && !chains.b.has(key)) order.push(key);
      chains[side].set(key, card);
    }
    const groups = {};
    for (const key of order) {
      const a = chains.a.get(key), b = chains.b.get(key);
      const group = !b ? 'only-a' : !a ? 'only-b' : pairKey(a[p.setting][field], b[p.setting][field]);
      (groups[group] = groups[group] || []).push({ a, b });
    }
    return groups;
  }

  function linkTo(changes) {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries({ ...state, ...changes })) if (value) params.set(key, value);
    params.delete('page');
    return '#' + params.toString();
  }

  function countCell(groups, keys, linked) {
    const n = keys.reduce((sum, k) => sum + (groups[k] || []).length, 0);
    const td = el('td');
    td.setAttribute('data-key', keys.length === 1 ? keys[0] : keys[0].replace(/-L1$/, ''));
    if (linked && n) {
      const a = el('a', null, String(n));
      a.href = linkTo({ pair: td.getAttribute('data-key') });
      td.appendChild(a);
    } else td.textContent = String(n);
    return td;
  }

  function renderSummary(p, groups) {
    const table = $('pair-summary');
    const head = el('tr');
    ['', 'samples', ...LEVELS.map(l => 'breaks first at ' + l)].forEach(t => head.appendChild(el('th', null, t)));
    const body = el('tbody');
    const row = (label, cells) => {
      const tr = el('tr');
      tr.appendChild(el('th', null, label));
      cells.forEach(c => tr.appendChild(c));
      body.appendChild(tr);
    };
    const plain = key => [countCell(groups, [key], false)];
    const split = side => {
      const keys = [1, 2, 3].map(k => side + '-holds-L' + k);
      return [countCell(groups, keys, true), ...keys.map(k => countCell(groups, [k], true))];
    };
    row('both chains hold', plain('both-hold'));
    row(p.a + ' holds, ' + p.b + ' breaks', split('a'));
    row(p.b + ' holds, ' + p.a + ' breaks', split('b'));
    row('both chains break', plain('both-break'));
    row('only ' + p.a + ' answered the sample', plain('only-a'));
    row('only ' + p.b + ' answered the sample', plain('only-b'));
    row('a chain is incomplete (fewer than 3 levels)', plain('incomplete'));
    const caption = el('caption', null, p.setting + ' setting, ' + RULES[p.rule]);
    table.replaceChildren(caption, el('thead'), body);
    table.querySelector('thead').appendChild(head);
  }

  function pairElement(p, pair, group) {
    const aHolds = group.startsWith('a-');
    const [holder, breaker, broken] = aHolds ? [p.a, p.b, pair.b] : [p.b, p.a, pair.a];
    const level = broken[p.setting][p.rule === 'ours' ? 'first' : 'first_official'];
    const section = el('section', 'pair');
    section.setAttribute('data-family', String(pair.a.family));
    section.setAttribute('data-id', pair.a.id);
    section.setAttribute('data-broken', level);
    const name = pair.a.id + ' (' + [pair.a.family, pair.a.aspect].join(' · ') + ')';
    const where = LEVELS[parseInt(level.slice(1), 10) - 1];
    section.appendChild(el('h3', null, name + ': ' + holder + ' holds, ' + breaker + ' first breaks at ' + where));
    const both = el('div', 'pair-cards');
    both.appendChild(cardElement(pair.a, p.rule));
    both.appendChild(cardElement(pair.b, p.rule));
    section.appendChild(both);
    return section;
  }

  function renderPairList(p, groups, per) {
    const keys = state.pair.match(/-L\d$/) ? [state.pair] : [1, 2, 3].map(k => state.pair + '-L' + k);
    const hits = keys.flatMap(k => (groups[k] || []).map(pair => [pair, k]));
    const pages = Math.max(1, Math.ceil(hits.length / per));
    const page = Math.min(Math.max(1, parseInt(state.page, 10) || 1), pages);
    const [holder, breaker] = state.pair.startsWith('a-') ? [p.a, p.b] : [p.b, p.a];
    const level = state.pair.match(/-(L\d)$/);
    const count = $('count');
    count.replaceChildren(el('strong', null, String(hits.length)));
    const what = (hits.length === 1 ? ' sample' : ' samples') + ' where ' + holder + '\'s chain holds and ' + breaker + '\'s breaks' +
      (level ? ' first at ' + level[1] : '') + ' (' + p.setting + ' setting, ' + RULES[p.rule] + '); ';
    count.appendChild(document.createTextNode(what));
    const back = el('a', null, 'back to all cards');
    back.href = linkTo({ pair: '' });
    count.appendChild(back);
    const shownPairs = hits.slice((page - 1) * per, page * per);
    $('cards').replaceChildren(...shownPairs.map(([pair, k]) => pairElement(p, pair, k)));
    return [page, pages];
  }

  function renderPairs(per) {
    if (!hasPairs) return null;
    const p = pairChoice();
    const problem = pairProblem(p);
    $('pair-problem').hidden = !problem;
    $('pair-problem').textContent = problem || '';
    if (problem) { $('pair-summary').replaceChildren(); return null; }
    const groups = pairGroups(p);
    renderSummary(p, groups);
    return state.pair ? renderPairList(p, groups, per) : null;
  }

  function pager(nav, page, pages) {
    nav.replaceChildren();
    const go = (target, label, enabled) => {
      const button = el('button', null, label);
      button.type = 'button';
      button.disabled = !enabled;
      button.addEventListener('click', () => { state.page = String(target); writeHash(); render(); scrollTo(0, 0); });
      nav.appendChild(button);
    };
    go(page - 1, '‹ previous', page > 1);
    nav.appendChild(el('span', null, 'page ' + page + ' of ' + pages));
    go(page + 1, 'next ›', page < pages);
  }

  function render() {
    const per = Math.max(1, parseInt(state.per, 10) || 50);
    const paired = renderPairs(per);
    if (paired) {
      pager($('pager-top'), ...paired);
      pager($('pager-bottom'), ...paired);
      return;
    }
    const hits = data.cards.filter(matches);
    const pages = Math.max(1, Math.ceil(hits.length / per));
    const page = Math.min(Math.max(1, parseInt(state.page, 10) || 1), pages);
    const count = $('count');
    count.replaceChildren(el('strong', null, String(hits.length)));
    count.appendChild(document.createTextNode(' of ' + data.cards.length + ' cards shown (one per sample and model)'));
    $('cards').replaceChildren(...hits.slice((page - 1) * per, page * per).map(card => cardElement(card)));
    pager($('pager-top'), page, pages);
    pager($('pager-bottom'), page, pages);
  }

  FILTERS.forEach(f => $('f-' + f).addEventListener(f === 'id' ? 'input' : 'change', event => {
    state[f] = event.target.value;
    delete state.page;
    delete state.pair;
    writeHash();
    render();
  }));
  if (hasPairs) PAIR_FIELDS.forEach(f => $('p-' + f).addEventListener('change', event => {
    state[f] = event.target.value;
    delete state.page;
    writeHash();
    render();
  }));
  $('clear').addEventListener('click', () => {
    state = {};
    writeHash();
    readHash();
    render();
  });
  $('lightbox').addEventListener('click', () => { $('lightbox').hidden = true; });
  document.addEventListener('keydown', e => { if (e.key === 'Escape') $('lightbox').hidden = true; });
  window.addEventListener('hashchange', () => { readHash(); render(); });
  readHash();
  render();
})();
