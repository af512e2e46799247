function cellValue(row, i) {
  const text = row.cells[i].textContent.trim();
  if (text === '' || text === '–' || text === 'n/a') return null;
  const number = parseFloat(text.replace(/^\[|[^0-9.eE+-].*$/g, ''));
  return /^[+-]?\[?[0-9]/.test(text) && !isNaN(number) ? number : text;
}
function groupValue(body, i) {
  for (const row of body.rows) { const v = cellValue(row, i); if (v !== null) return v; }
  return null;
}
function sortTable(table, column, direction) {
  const grouped = table.tBodies.length > 1;
  const parent = grouped ? table : table.tBodies[0];
  const items = grouped ? Array.from(table.tBodies) : Array.from(table.tBodies[0].rows);
  const value = item => grouped ? groupValue(item, column) : cellValue(item, column);
  const keyed = items.map((item, index) => ({item, index, v: value(item)}));
  keyed.sort((a, b) => {
    if ((a.v === null) !== (b.v === null)) return a.v === null ? 1 : -1;
    let order = 0;
    if (a.v !== null) order = (typeof a.v === 'number' && typeof b.v === 'number') ? a.v - b.v
      : String(a.v).localeCompare(String(b.v));
    if (direction === 'desc') order = -order;
    return order || a.index - b.index;
  });
  keyed.forEach(k => parent.appendChild(k.item));
  Array.from(table.tHead.rows[0].cells).forEach((th, i) =>
    th.setAttribute('aria-sort', i === column ? (direction === 'asc' ? 'ascending' : 'descending') : 'none'));
}
document.querySelectorAll('table.sortable').forEach(table => {
  Array.from(table.tHead.rows[0].cells).forEach((th, i) => th.addEventListener('click', () =>
    sortTable(table, i, th.getAttribute('aria-sort') === 'descending' ? 'asc' : 'desc')));
});
const wanted = /^#sort=([\w-]+):(\d+):(asc|desc)$/.exec(decodeURIComponent(location.hash));
if (wanted) sortTable(document.getElementById(wanted[1]), Number(wanted[2]), wanted[3]);
