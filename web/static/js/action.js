// Airlock console: the live action page. It listens to the same websocket
// as the queue (/api/v1/stream: {"type":"action.created"|"action.updated",
// "action":{...}} and {"type":"resync"}) and, when this action changes
// (another reviewer's approval or decision, a job's output, a merge
// preview, an expiry):
//   - closes the approve and deny forms at once when the action is no
//     longer pending (every control disabled, the decision bar hidden, a
//     note saying why), keeping what the reviewer typed;
//   - reloads the page's live regions ([data-live-region], by id) from the
//     server, which renders them as on a fresh load (hidden characters
//     marked, diffs classified): no HTML is built from a message here;
//   - when that changes the preview an approval pins (#shown-pin: a
//     merge's diff, an exec's impact, a write's diff arrived or was made
//     again), clears the phrase the reviewer may have typed already and
//     says so: what they were about to approve is no longer what it was.
// After every (re)connect the regions are reloaded too, since changes may
// have been missed meanwhile.
(function () {
  'use strict';

  var root = document.getElementById('action-page');
  if (!root || !window.WebSocket) { return; }
  var id = root.getAttribute('data-id');
  var url = root.getAttribute('data-url');
  var closed = false;

  function say(text) { if (window.Airlock) { window.Airlock.announce(text); } }

  // closeForms disables the decision forms: the action was decided (or
  // expired, or cancelled) elsewhere.
  function closeForms(status, by) {
    if (closed) { return; }
    closed = true;
    root.setAttribute('data-status', status);
    var forms = document.querySelectorAll('#decide-forms form');
    for (var i = 0; i < forms.length; i++) {
      forms[i].setAttribute('aria-disabled', 'true');
      for (var j = 0; j < forms[i].elements.length; j++) { forms[i].elements[j].disabled = true; }
    }
    var bar = document.getElementById('decision-bar');
    if (bar) { bar.hidden = true; }
    var note = document.getElementById('form-closed');
    var text = 'This action is no longer pending: it is ' + status + (by ? ' (by ' + by + ')' : '') +
      '. The forms are closed; nothing you typed here was sent.';
    if (note) {
      note.textContent = text;
      note.hidden = false;
    }
    say(text);
  }

  function apply(a) {
    if (a.status && a.status !== 'pending' && forms()) {
      closeForms(a.status, a.decision && a.decision.by);
    }
  }

  function forms() { return document.getElementById('decide-forms') !== null; }

  // swap replaces a live region, keeping what the reviewer typed into its
  // fields (the stop form's reason) and the focus.
  function swap(old, fresh) {
    var active = document.activeElement;
    var focusName = old.contains(active) && active.name ? active.name : '';
    var fields = old.querySelectorAll('input[name]:not([type=hidden]), textarea[name]');
    for (var i = 0; i < fields.length; i++) {
      if (fields[i].value === fields[i].defaultValue) { continue; }
      var same = fresh.querySelector('[name="' + fields[i].name + '"]');
      if (same) { same.value = fields[i].value; }
    }
    old.replaceWith(fresh);
    if (focusName) {
      var f = fresh.querySelector('[name="' + focusName + '"]');
      if (f) { f.focus(); }
    }
  }

  // pin is the preview an approval from this page pins (null: none here).
  function pin() {
    var p = document.getElementById('shown-pin');
    return p ? p.value : null;
  }

  // previewChanged clears the phrase typed against the preview before and
  // says why, so that a reviewer typing it cannot approve, by the key that
  // ends it, what they have not read.
  function previewChanged() {
    var c = document.getElementById('confirmation');
    if (c) { c.value = ''; }
    var note = document.getElementById('preview-changed');
    if (note) {
      note.hidden = false;
      say(note.textContent);
    }
  }

  // refresh reloads the live regions from the server; one at a time, and
  // once more when a change arrived meanwhile.
  var fetching = false;
  var again = false;
  function refresh() {
    if (fetching) { again = true; return; }
    fetching = true;
    fetch(url, { credentials: 'same-origin', headers: { 'Accept': 'text/html' } })
      .then(function (resp) {
        if (resp.redirected && resp.url.indexOf('/ui/login') >= 0) {
          window.location.assign('/ui/login');
          throw new Error('signed out');
        }
        if (!resp.ok) { throw new Error('action page: ' + resp.status); }
        return resp.text();
      })
      .then(function (html) {
        var doc = new DOMParser().parseFromString(html, 'text/html');
        var pinned = pin();
        var regions = document.querySelectorAll('[data-live-region][id]');
        for (var i = 0; i < regions.length; i++) {
          var fresh = doc.getElementById(regions[i].id);
          if (fresh) { swap(regions[i], document.importNode(fresh, true)); }
        }
        if (pinned !== null && pin() !== null && pin() !== pinned) { previewChanged(); }
        var page = doc.getElementById('action-page');
        var status = page && page.getAttribute('data-status');
        if (status && status !== 'pending' && forms()) { closeForms(status, ''); }
        if (window.Airlock) { window.Airlock.tick(); window.Airlock.times(); }
      })
      .catch(function () { /* the next change or reconnect tries again */ })
      .then(function () {
        fetching = false;
        if (again) { again = false; refresh(); }
      });
  }

  // The decision bar's links bring the reviewer to the form's first field.
  function toField(link, field) {
    var a = document.getElementById(link);
    var f = document.getElementById(field);
    if (!a || !f) { return; }
    a.addEventListener('click', function (e) {
      e.preventDefault();
      f.scrollIntoView({ block: 'center' });
      f.focus({ preventScroll: true });
    });
  }
  toField('bar-approve', 'confirmation');
  toField('bar-deny', 'deny-reason');

  var backoff = 500;
  function connect() {
    var ws = new WebSocket((window.location.protocol === 'https:' ? 'wss:' : 'ws:') + '//' +
      window.location.host + '/api/v1/stream');
    ws.onopen = function () {
      backoff = 500;
      root.setAttribute('data-live', 'open');
      refresh();
    };
    ws.onmessage = function (e) {
      var msg;
      try { msg = JSON.parse(e.data); } catch (err) { return; }
      if (msg.type === 'resync') { refresh(); return; }
      if (msg.action && msg.action.id === id) {
        apply(msg.action);
        refresh();
      }
    };
    ws.onclose = function (e) {
      root.setAttribute('data-live', 'closed');
      if (e.code === 1008) { // the session ended
        window.location.assign('/ui/login');
        return;
      }
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 15000);
    };
  }
  connect();
})();
