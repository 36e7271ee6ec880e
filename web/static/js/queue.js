// Airlock console: the live queue. htmx-ext-ws owns the websocket to
// /api/v1/stream (connect, reconnect with backoff); this script turns its
// JSON messages into rows:
//   {"type":"action.created"|"action.updated","action":{...}} adds, updates
//   or removes the action's row (only pending actions that match the
//   filters are shown);
//   {"type":"resync"} reloads the rows from the server.
// After every (re)connect the rows are reloaded too, since messages may
// have been missed while disconnected; messages that arrive during a reload
// are applied after it, in order.
(function () {
  'use strict';

  var queue = document.getElementById('queue');
  if (!queue) { return; }
  var tbody = document.getElementById('queue-rows');
  var empty = document.getElementById('queue-empty');
  var live = document.getElementById('live');
  var liveText = document.getElementById('live-text');
  var filterAgent = queue.getAttribute('data-agent') || '';
  var filterRisk = queue.getAttribute('data-risk') || '';
  // "Actions I can approve": only the server knows who may approve what
  // (reviewer groups, escalation, separation of duties), so a change to an
  // action that may be shown reloads the rows instead of placing it here.
  var mine = queue.getAttribute('data-mine') === 'true';
  var rowsURL = queue.getAttribute('data-rows') + window.location.search;

  var syncing = false;
  var again = false;
  var buffered = [];

  function setLive(state, text) {
    live.setAttribute('data-state', state);
    liveText.textContent = text;
  }

  var baseTitle = queue.getAttribute('data-title') || document.title;
  var more = queue.hasAttribute('data-more');
  var search = document.getElementById('queue-search');

  // updateEmpty shows the empty note, applies the search and puts the
  // count of pending actions in the tab's title ("(3) Queue · Airlock";
  // "100+" when this page is full and more wait).
  function updateEmpty() {
    empty.hidden = tbody.rows.length > 0;
    var n = tbody.rows.length;
    document.title = n > 0 ? '(' + n + (more ? '+' : '') + ') ' + baseTitle : baseTitle;
    filterRows();
  }

  // filterRows hides the rows whose text does not hold the search.
  function filterRows() {
    var q = search ? search.value.trim().toLowerCase() : '';
    for (var i = 0; i < tbody.rows.length; i++) {
      var r = tbody.rows[i];
      r.hidden = q !== '' && r.textContent.toLowerCase().indexOf(q) < 0;
    }
  }
  if (search) { search.addEventListener('input', filterRows); }

  // Desktop notifications (opt-in, remembered in this browser): a new
  // action that this page's filters show, while the tab is not in front.
  var notifyKey = 'airlock.notify';
  var notifyButton = document.getElementById('notify-toggle');
  function notifyOn() {
    return window.Notification && Notification.permission === 'granted' &&
      window.localStorage.getItem(notifyKey) === '1';
  }
  function showNotifyState() {
    var on = notifyOn();
    notifyButton.setAttribute('aria-pressed', on ? 'true' : 'false');
    notifyButton.textContent = 'Desktop notifications: ' + (on ? 'on' : 'off');
  }
  if (notifyButton && window.Notification) {
    notifyButton.hidden = false;
    showNotifyState();
    notifyButton.addEventListener('click', function () {
      if (notifyOn()) {
        window.localStorage.removeItem(notifyKey);
        showNotifyState();
        return;
      }
      Promise.resolve(Notification.requestPermission()).then(function (perm) {
        if (perm === 'granted') { window.localStorage.setItem(notifyKey, '1'); }
        showNotifyState();
      });
    });
  }
  // notify is called once a's row is in the queue: the notification shows
  // the arguments as the row does (a row the server rendered shows each
  // hidden character as its marker, templates.Visible), never the text as
  // the agent sent it.
  function notify(a) {
    if (!notifyOn() || (!document.hidden && document.hasFocus())) { return; }
    var level = (a.risk && a.risk.level) || '';
    var tr = document.getElementById('row-' + a.id);
    var args = tr && tr.querySelector('td.args');
    if (!args) { return; }
    var n = new Notification('Airlock: ' + a.tool + ' waits for review', {
      body: a.agent_id + ' \u00b7 ' + level + ' risk \u00b7 ' + args.textContent,
      tag: 'airlock-' + a.id
    });
    n.onclick = function () {
      window.focus();
      window.location.assign('/ui/actions/' + encodeURIComponent(a.id));
    };
  }

  // exactNumbers keeps a number a double cannot hold (10000000000000001)
  // as the text the server sent, so the summary shows it unrounded.
  function exactNumbers(key, value, context) {
    if (typeof value === 'number' && context && typeof context.source === 'string' &&
        String(value) !== context.source && typeof JSON.rawJSON === 'function') {
      return JSON.rawJSON(context.source);
    }
    return value;
  }

  // summary mirrors templates.ArgsSummary (Go).
  function summary(args) {
    var keys = Object.keys(args || {}).sort();
    var parts = [];
    for (var i = 0; i < keys.length; i++) {
      parts.push(keys[i] + '=' + JSON.stringify(args[keys[i]]));
    }
    var s = parts.join(' ');
    var chars = Array.from(s);
    if (chars.length > 120) { s = chars.slice(0, 119).join('') + '\u2026'; }
    return s;
  }

  function cell(tr, cls, text) {
    var td = document.createElement('td');
    if (cls) { td.className = cls; }
    if (text !== undefined) { td.textContent = text; }
    tr.appendChild(td);
    return td;
  }

  function labelled(td, label) {
    var span = document.createElement('span');
    span.className = 'card-label';
    span.textContent = label;
    td.appendChild(span);
    return td;
  }

  // row builds the same row as templates.QueueRow, with DOM calls only
  // (never HTML from a message).
  function row(a) {
    var level = (a.risk && a.risk.level) || '';
    var tr = document.createElement('tr');
    tr.id = 'row-' + a.id;
    tr.setAttribute('data-id', a.id);
    tr.setAttribute('data-agent', a.agent_id);
    tr.setAttribute('data-risk', level);
    tr.setAttribute('data-created', a.created_at);
    var pick = document.createElement('input');
    pick.type = 'checkbox';
    pick.name = 'ids';
    pick.value = a.id;
    pick.id = 'pick-' + a.id;
    pick.setAttribute('form', 'batch-select');
    pick.setAttribute('aria-label', 'Select ' + a.tool + ' ' + String(a.id).slice(0, 8) + '\u2026' + String(a.id).slice(-4) + ' for a batch');
    var old = document.getElementById('row-' + a.id);
    var was = old && old.querySelector('input[name="ids"]');
    pick.checked = !!(was && was.checked);
    cell(tr, 'pick').appendChild(pick);
    tr.setAttribute('data-nav-item', '');
    var heading = document.createElement('h2');
    heading.className = 'queue-tool';
    var code = document.createElement('code');
    code.textContent = a.tool;
    heading.appendChild(code);
    cell(tr, 'tool').appendChild(heading);
    var badge = document.createElement('span');
    badge.className = /^(low|medium|high|critical)$/.test(level) ? 'badge risk-' + level : 'badge';
    badge.textContent = level;
    labelled(cell(tr, 'risk'), 'Risk').appendChild(badge);
    labelled(cell(tr, 'agent'), 'Agent').appendChild(document.createTextNode(a.agent_id));
    var s = summary(a.args);
    var args = cell(tr, 'args', s);
    args.title = s;
    labelled(cell(tr, 'approvals'), 'Approvals').appendChild(
      document.createTextNode((a.approvals || []).length + '/' + a.required_approvals));
    var left = document.createElement('span');
    left.className = 'left';
    labelled(cell(tr, ''), 'Time left').appendChild(left);
    if (a.expires_at) {
      left.setAttribute('data-expires', a.expires_at);
      left.textContent = window.Airlock ? window.Airlock.formatLeft(Date.parse(a.expires_at) - Date.now()) : '';
    } else {
      left.textContent = '\u2014';
    }
    var link = document.createElement('a');
    link.href = '/ui/actions/' + encodeURIComponent(a.id);
    link.className = 'open';
    link.setAttribute('role', 'button');
    link.textContent = 'Review ';
    var who = document.createElement('span');
    who.className = 'visually-hidden';
    who.textContent = a.tool + ' from ' + a.agent_id;
    link.appendChild(who);
    cell(tr, '').appendChild(link);
    return tr;
  }

  // announceNew tells screen readers (the layout's live region) and, when
  // opted in, the desktop about a new action.
  function announceNew(a) {
    if (window.Airlock) {
      window.Airlock.announce('New action: ' + a.tool + ' from ' + a.agent_id + ', ' + ((a.risk && a.risk.level) || '') + ' risk');
    }
    notify(a);
  }

  function shown(a) {
    return a.status === 'pending' &&
      (!filterAgent || a.agent_id === filterAgent) &&
      (!filterRisk || (a.risk && a.risk.level === filterRisk));
  }

  // insert places tr by creation time, newest first.
  function insert(tr, created) {
    var t = Date.parse(created);
    var rows = tbody.rows;
    for (var i = 0; i < rows.length; i++) {
      if (Date.parse(rows[i].getAttribute('data-created')) < t) {
        tbody.insertBefore(tr, rows[i]);
        return;
      }
    }
    tbody.appendChild(tr);
  }

  function apply(msg) {
    if (msg.type === 'resync') { resync(); return; }
    var a = msg.action;
    if (!a || !a.id) { return; }
    var old = document.getElementById('row-' + a.id);
    if (!shown(a)) {
      if (old) { old.remove(); }
    } else if (mine) {
      // Only the server knows whether this reviewer may approve it: the
      // rows are reloaded, and a new action is announced once it is among
      // them.
      resync(function () {
        if (!old && msg.type === 'action.created' && document.getElementById('row-' + a.id)) { announceNew(a); }
      });
    } else if (/[^\x20-\x7e]/.test(summary(a.args))) {
      // Text beyond printable ASCII may hold hidden characters (bidi
      // controls, zero-width spaces…): the server renders those rows,
      // with every hidden character shown as a marker (templates.Visible),
      // and the new action is announced from its row once it is there.
      resync(function () {
        if (!old && msg.type === 'action.created' && document.getElementById('row-' + a.id)) { announceNew(a); }
      });
    } else if (old) {
      old.replaceWith(row(a));
    } else {
      var tr = row(a);
      tr.classList.add('fresh');
      insert(tr, a.created_at);
      if (msg.type === 'action.created') { announceNew(a); }
    }
    updateEmpty();
  }

  function signedOut(resp) {
    return resp.redirected && resp.url.indexOf('/ui/login') >= 0;
  }

  // resync reloads every row from the server, then applies what arrived
  // meanwhile.
  var afterSync = [];
  function resync(then) {
    if (then) { afterSync.push(then); }
    if (syncing) { again = true; return; }
    syncing = true;
    buffered = [];
    fetch(rowsURL, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (resp) {
        if (signedOut(resp)) { window.location.assign('/ui/login'); throw new Error('signed out'); }
        if (!resp.ok) { throw new Error('queue rows: ' + resp.status); }
        return resp.text();
      })
      .then(function (html) {
        var tpl = document.createElement('template');
        tpl.innerHTML = '<table><tbody>' + html + '</tbody></table>';
        var fresh = tpl.content.querySelector('tbody');
        tbody.replaceChildren.apply(tbody, Array.from(fresh.rows));
      })
      .catch(function () { /* the next reconnect resyncs again */ })
      .then(function () {
        syncing = false;
        var pending = buffered;
        buffered = [];
        for (var i = 0; i < pending.length; i++) { apply(pending[i]); }
        updateEmpty();
        if (window.Airlock) { window.Airlock.tick(); }
        if (again) { again = false; resync(); return; }
        var done = afterSync;
        afterSync = [];
        for (var j = 0; j < done.length; j++) { done[j](); }
      });
  }

  document.body.addEventListener('htmx:wsBeforeMessage', function (e) {
    e.preventDefault(); // JSON, not HTML for htmx to swap
    var msg;
    try { msg = JSON.parse(e.detail.message, exactNumbers); } catch (err) { return; }
    if (syncing && msg.type !== 'resync') { buffered.push(msg); return; }
    apply(msg);
  });
  document.body.addEventListener('htmx:wsOpen', function () {
    setLive('open', 'live');
    resync();
  });
  document.body.addEventListener('htmx:wsClose', function () {
    setLive('closed', 'reconnecting…');
    // A closed session sends the reviewer to the login page.
    fetch(rowsURL, { credentials: 'same-origin' }).then(function (resp) {
      if (signedOut(resp)) { window.location.assign('/ui/login'); }
    }).catch(function () {});
  });
})();
