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

  const fill = (id, values) => values.forEach(([value, label]) => {
    const option = el('option', null, label);
    option.value = value;
    $(id).appendChild(option);
  });
  fill('f-model', data.models.map(m => [m, m]));
  fill('f-family', data.families);
  fill('f-aspect', data.aspects.map(([family, aspect]) => [aspect, aspect + ' (' + family + ')']));

  function readHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    state = {};
    for (const [key, value] of params) state[key] = value;
    FILTERS.forEach(f => { $('f-' + f).value = state[f] || ''; });
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

  function verdictBadge(setting, chain) {
    if (!chain) return el('span', 'badge', setting + ': not run');
    const first = chain.first;
    const text = first === 'none' ? 'all right' : first === 'incomplete' ? 'chain incomplete' : 'first wrong ' + first;
    return el('span', 'badge ' + (first === 'none' ? 'right' : 'wrong'), setting + ': ' + text);
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

  function replyCell(chain, k) {
    const td = el('td');
    if (!chain) { td.appendChild(el('span', 'empty', 'not run')); return td; }
    if (chain.parsed[k] === undefined) { td.appendChild(el('span', 'empty', 'not asked (chain cut)')); return td; }
    const right = chain.correct[k];
    const line = el('div', null);
    line.appendChild(el('span', right ? 'ok' : 'bad', right ? '✓ ' : '✗ '));
    const letters = (chain.parsed[k] || '—') + ' (authors\' ' + (chain.official[k] || '—') + ')';
    line.appendChild(document.createTextNode(letters));
    td.appendChild(line);
    const reply = chain.replies[k];
    if (chain.failed[k] && !reply) td.appendChild(el('pre', 'reply empty', '(no reply)'));
    else td.appendChild(el('pre', 'reply', reply));
    if (chain.cut[k]) {
      td.appendChild(el('p', 'note', '… ' + chain.cut[k] + ' more characters not shown (see the samples file)'));
    }
    return td;
  }

  function cardElement(card) {
    const article = el('article', 'card');
    article.setAttribute('data-model', data.models[card.model]);
    article.setAttribute('data-id', card.id);
    const head = el('h2', null, card.id);
    head.appendChild(el('span', 'meta', [card.family, card.aspect, data.models[card.model]].join(' · ')));
    SETTINGS.forEach(s => head.appendChild(verdictBadge(s, card[s])));
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
      SETTINGS.forEach(s => row.appendChild(replyCell(card[s], k)));
      body.appendChild(row);
    }
    table.appendChild(body);
    article.appendChild(table);
    const sources = SETTINGS.filter(s => card[s]).map(s => s + ': ' + card[s].source).join('   ');
    article.appendChild(el('p', 'sources', sources));
    return article;
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
    const hits = data.cards.filter(matches);
    const per = Math.max(1, parseInt(state.per, 10) || 50);
    const pages = Math.max(1, Math.ceil(hits.length / per));
    const page = Math.min(Math.max(1, parseInt(state.page, 10) || 1), pages);
    const count = $('count');
    count.replaceChildren(el('strong', null, String(hits.length)));
    count.appendChild(document.createTextNode(' of ' + data.cards.length + ' cards shown (one per sample and model)'));
    $('cards').replaceChildren(...hits.slice((page - 1) * per, page * per).map(cardElement));
    pager($('pager-top'), page, pages);
    pager($('pager-bottom'), page, pages);
  }

  FILTERS.forEach(f => $('f-' + f).addEventListener(f === 'id' ? 'input' : 'change', event => {
    state[f] = event.target.value;
    delete state.page;
    writeHash();
    render();
  }));
  $('clear').addEventListener('click', () => {
    state = {};
    FILTERS.forEach(f => { $('f-' + f).value = ''; });
    writeHash();
    render();
  });
  $('lightbox').addEventListener('click', () => { $('lightbox').hidden = true; });
  document.addEventListener('keydown', e => { if (e.key === 'Escape') $('lightbox').hidden = true; });
  window.addEventListener('hashchange', () => { readHash(); render(); });
  readHash();
  render();
})();
