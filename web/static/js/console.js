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

  window.Airlock = { formatLeft: formatLeft, tick: tick };

  document.addEventListener('DOMContentLoaded', function () {
    var inputs = document.querySelectorAll('input.no-paste');
    for (var i = 0; i < inputs.length; i++) { refusePaste(inputs[i]); }
    tick();
    setInterval(tick, 1000);
  });
})();
