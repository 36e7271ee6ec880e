// Airlock console: behaviour every page shares. Loaded as a static file:
// the Content-Security-Policy allows no inline script.
(function () {
  'use strict';

  // formatLeft mirrors templates.FormatLeft (Go): "14m 05s", "2h 10m".
  function formatLeft(ms) {
    if (ms <= 0) { return 'expiring'; }
    var s = Math.floor(ms / 1000);
    function two(n) { return (n < 10 ? '0' : '') + n; }
    if (s >= 3600) { return Math.floor(s / 3600) + 'h ' + two(Math.floor((s % 3600) / 60)) + 'm'; }
    if (s >= 60) { return Math.floor(s / 60) + 'm ' + two(s % 60) + 's'; }
    return s + 's';
  }

  // Every element with data-expires counts down to it.
  function tick() {
    var now = Date.now();
    var els = document.querySelectorAll('[data-expires]');
    for (var i = 0; i < els.length; i++) {
      var exp = els[i].getAttribute('data-expires');
      if (!exp) { continue; }
      var left = Date.parse(exp) - now;
      els[i].textContent = formatLeft(left);
      els[i].classList.toggle('soon', left < 60000);
    }
  }

  // The confirmation phrase must be typed: a reviewer who types it has read
  // it. Paste and drop are refused, with a note saying why.
  function refusePaste(input) {
    var note = document.getElementById('paste-note');
    function refuse(e) {
      e.preventDefault();
      if (note) { note.hidden = false; }
    }
    input.addEventListener('paste', refuse);
    input.addEventListener('drop', refuse);
    input.addEventListener('beforeinput', function (e) {
      if (e.inputType === 'insertFromPaste' || e.inputType === 'insertFromDrop' ||
          e.inputType === 'insertFromPasteAsQuotation' || e.inputType === 'insertReplacementText') {
        refuse(e);
      }
    });
  }

  // announce says text through the layout's polite live region (screen
  // readers read it without moving focus).
  function announce(text) {
    var region = document.getElementById('announce');
    if (!region) { return; }
    region.textContent = '';
    // A fresh text node after a tick is announced even when it repeats.
    setTimeout(function () { region.textContent = text; }, 50);
  }

  // Times: every <time class="when"> (UTC, as the server wrote it) gets the
  // relative time and the reader's local time beside it.
  var localFmt = null;
  try {
    localFmt = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: '2-digit', day: '2-digit',
      hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false, timeZoneName: 'short' });
  } catch (e) { localFmt = null; }
  var relFmt = null;
  try { relFmt = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto' }); } catch (e) { relFmt = null; }

  function relative(ms) {
    var s = Math.round(ms / 1000);
    var abs = Math.abs(s);
    var units = [['year', 31536000], ['month', 2592000], ['day', 86400], ['hour', 3600], ['minute', 60], ['second', 1]];
    for (var i = 0; i < units.length; i++) {
      if (abs >= units[i][1] || units[i][0] === 'second') {
        var n = Math.round(s / units[i][1]);
        if (relFmt) { return relFmt.format(n, units[i][0]); }
        return Math.abs(n) + ' ' + units[i][0] + (Math.abs(n) === 1 ? '' : 's') + (n <= 0 ? ' ago' : ' from now');
      }
    }
    return '';
  }

  function times() {
    var els = document.querySelectorAll('time.when[datetime]');
    var now = Date.now();
    for (var i = 0; i < els.length; i++) {
      var t = Date.parse(els[i].getAttribute('datetime'));
      if (isNaN(t)) { continue; }
      var side = els[i].nextElementSibling;
      if (!side || !side.classList.contains('when-local')) {
        side = document.createElement('span');
        side.className = 'when-local';
        els[i].after(side);
      }
      // The local time only where it is not UTC already.
      var text = relative(t - now);
      if (new Date(t).getTimezoneOffset() !== 0) {
        text += ' \u00b7 ' + (localFmt ? localFmt.format(new Date(t)) : new Date(t).toString());
      }
      side.textContent = '(' + text + ')';
    }
  }

  // The top bar's menu button (narrow screens; CSS hides it on wide ones).
  function menu() {
    var bar = document.getElementById('topbar');
    var button = document.getElementById('menu-toggle');
    if (!bar || !button) { return; }
    button.addEventListener('click', function () {
      var open = !bar.classList.contains('open');
      bar.classList.toggle('open', open);
      button.setAttribute('aria-expanded', open ? 'true' : 'false');
    });
  }

  // Keyboard shortcuts (listed in the ? dialog of the layout): j / k select
  // the next / previous item of the page's list ([data-nav-item], else the
  // rows of its tables that hold a link) by focusing its link, so Enter
  // opens it; / focuses the search ([data-search], else the page's first
  // text field); ? shows the list. Typing in a field is never taken.
  function navItems() {
    var items = document.querySelectorAll('main [data-nav-item]');
    if (items.length === 0) { items = document.querySelectorAll('main tbody tr'); }
    var out = [];
    for (var i = 0; i < items.length; i++) {
      if (!items[i].hidden && items[i].querySelector('a[href]')) { out.push(items[i]); }
    }
    return out;
  }

  function select(step) {
    var items = navItems();
    if (items.length === 0) { return; }
    var at = -1;
    for (var i = 0; i < items.length; i++) {
      if (items[i].classList.contains('selected')) { at = i; }
      items[i].classList.remove('selected');
    }
    var next = at < 0 ? (step > 0 ? 0 : items.length - 1) : Math.min(items.length - 1, Math.max(0, at + step));
    var item = items[next];
    item.classList.add('selected');
    var link = item.querySelector('a.open[href]') || item.querySelector('a[href]');
    link.focus();
    item.scrollIntoView({ block: 'nearest' });
  }

  function searchField() {
    return document.querySelector('main [data-search]') ||
      document.querySelector('main input[type=search], main input[type=text]:not([readonly])');
  }

  function shortcuts() {
    var dialog = document.getElementById('shortcuts');
    var link = document.getElementById('shortcuts-link');
    var close = document.getElementById('shortcuts-close');
    function show() { if (dialog && !dialog.open) { dialog.showModal(); } }
    if (link) { link.addEventListener('click', function (e) { e.preventDefault(); show(); }); }
    if (close) { close.addEventListener('click', function () { dialog.close(); }); }
    document.addEventListener('keydown', function (e) {
      if (e.ctrlKey || e.metaKey || e.altKey || e.defaultPrevented) { return; }
      var t = e.target;
      var typing = t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
      if (typing) {
        if (e.key === 'Escape' && t.matches('[data-search]')) { t.blur(); }
        return;
      }
      if (dialog && dialog.open) { return; } // the dialog handles Esc itself
      switch (e.key) {
      case 'j': e.preventDefault(); select(1); break;
      case 'k': e.preventDefault(); select(-1); break;
      case '/':
        var f = searchField();
        if (f) { e.preventDefault(); f.focus(); }
        break;
      case '?': e.preventDefault(); show(); break;
      }
    });
  }

  // Tables become cards on narrow screens (CSS, below 720 px): each cell
  // is labelled with its column's header, copied here into data-label, so
  // every table of every page reads as "Header value" lines on a phone.
  function cardTables() {
    var tables = document.querySelectorAll('main .table-wrap table:not(.queue)');
    for (var i = 0; i < tables.length; i++) {
      var heads = tables[i].querySelectorAll('thead th');
      if (heads.length === 0) { continue; }
      tables[i].classList.add('cards');
      var rows = tables[i].querySelectorAll('tbody tr');
      for (var r = 0; r < rows.length; r++) {
        for (var c = 0; c < rows[r].cells.length && c < heads.length; c++) {
          var label = heads[c].textContent.trim();
          if (label) { rows[r].cells[c].setAttribute('data-label', label); }
        }
      }
    }
  }

  window.Airlock = { formatLeft: formatLeft, tick: tick, times: times, announce: announce, cardTables: cardTables };

  document.documentElement.classList.add('js');
  document.addEventListener('DOMContentLoaded', function () {
    var inputs = document.querySelectorAll('input.no-paste');
    for (var i = 0; i < inputs.length; i++) { refusePaste(inputs[i]); }
    menu();
    shortcuts();
    cardTables();
    tick();
    times();
    setInterval(tick, 1000);
    setInterval(times, 30000);
  });
})();
