/* mianjing: the site's own behaviour, on every page (small; the search code and index load on demand).
   - question table (home) and report: combinable filters, kept in the URL (#company=Baidu&difficulty=3)
   - verifier code inside claim cards: fetched when its section is opened
   - language switch: keeps the #fragment (a claim card) the reader is at
   - search box: loads assets/mj-search.js and the compressed index the first time it is used */
(function () {
  "use strict";

  /* ---------------------------------------------------------------- filters */
  function hashParams() {
    var out = {};
    var h = location.hash.slice(1);
    if (h.indexOf("=") < 0) return out;
    h.split("&").forEach(function (kv) {
      var i = kv.indexOf("=");
      if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
    });
    return out;
  }

  function setupFilters(box, rowsOf, keepHash) {
    var form = box.querySelector(".mj-filters");
    if (!form) return;
    form.hidden = false;
    var selects = Array.prototype.slice.call(form.querySelectorAll("select[data-filter]"));
    var count = box.querySelector(".mj-filter-count");
    var none = box.querySelector(".mj-filter-none");
    var initial = keepHash ? hashParams() : {};
    selects.forEach(function (s) {
      var v = initial[s.getAttribute("data-filter")];
      if (v !== undefined && s.querySelector('option[value="' + CSS.escape(v) + '"]')) s.value = v;
    });
    function apply(write) {
      var want = {};
      selects.forEach(function (s) { if (s.value) want[s.getAttribute("data-filter")] = s.value; });
      var shown = rowsOf(want);
      if (count) {
        var total = box.getAttribute("data-total");
        count.textContent = Object.keys(want).length ? box.getAttribute("data-shown").replace("{n}", shown).replace("{total}", total) : "";
      }
      if (none) none.hidden = shown > 0;
      if (write && keepHash) {
        var h = Object.keys(want).map(function (k) { return encodeURIComponent(k) + "=" + encodeURIComponent(want[k]); }).join("&");
        history.replaceState(null, "", h ? "#" + h : location.pathname + location.search);
      }
    }
    form.addEventListener("change", function () { apply(true); });
    var reset = form.querySelector(".mj-filter-reset");
    if (reset) reset.addEventListener("click", function () { selects.forEach(function (s) { s.value = ""; }); apply(true); });
    window.addEventListener("hashchange", function () {
      var p = hashParams();
      if (!Object.keys(p).length) return;
      selects.forEach(function (s) { s.value = p[s.getAttribute("data-filter")] || ""; });
      apply(false);
    });
    apply(false);
  }

  function matchQuestion(row, want) {
    if (want.topic) {
      var tp = row.getAttribute("data-topic");
      if (tp !== want.topic && tp.indexOf(want.topic + "/") !== 0) return false;
    }
    if (want.difficulty && row.getAttribute("data-difficulty") !== want.difficulty) return false;
    if (want.verdict && (" " + row.getAttribute("data-verdicts") + " ").indexOf(" " + want.verdict + " ") < 0) return false;
    if (want.company || want.team || want.round) {
      var asked = row._asked || (row._asked = JSON.parse(row.getAttribute("data-asked")));
      /* company, team and round must hold for the same report: Baidu + AI Infra is Baidu's AI Infra team */
      return asked.some(function (a) {
        return (!want.company || (want.company === "-" ? !a[0] : a[0] === want.company)) &&
               (!want.team || (want.team === "-" ? !a[1] : a[1] === want.team)) &&
               (!want.round || String(a[2]) === want.round);
      });
    }
    return true;
  }

  function questionRows(box) {
    var rows = Array.prototype.slice.call(box.querySelectorAll("tbody tr"));
    return function (want) {
      var n = 0;
      rows.forEach(function (r) { var ok = matchQuestion(r, want); r.hidden = !ok; if (ok) n++; });
      return n;
    };
  }

  function reportRows(box) {
    var sections = Array.prototype.slice.call(box.querySelectorAll(".mj-rep"));
    box.setAttribute("data-total", box.querySelectorAll("tbody tr").length);
    return function (want) {
      var n = 0;
      sections.forEach(function (sec) {
        var any = false;
        sec.querySelectorAll("tbody tr").forEach(function (r) {
          var ok = Object.keys(want).every(function (k) { return r.getAttribute("data-" + k) === want[k]; });
          r.hidden = !ok;
          if (ok) { any = true; n++; }
        });
        sec.hidden = !any;
      });
      return n;
    };
  }

  /* ---------------------------------------------------------------- lazy code */
  function loadCode(el) {
    if (el.getAttribute("data-loaded")) return el._mjLoad || Promise.resolve();
    el.setAttribute("data-loaded", "1");
    return el._mjLoad = fetch(el.getAttribute("data-src")).then(function (r) {
      if (!r.ok) throw new Error(r.status);
      return r.text();
    }).then(function (html) {
      var held = el.querySelector(".mj-reserve");  /* the placeholder holds the listing's height: swap, nothing moves */
      if (held) held.outerHTML = html;
      else el.insertAdjacentHTML("beforeend", html);
      focusable(el);
    }).catch(function () { el.removeAttribute("data-loaded"); });
  }

  function setupLazy() {
    var lazy = document.querySelectorAll(".mj-lazy[data-src]");
    if (!lazy.length) return;
    /* a card's details opened: load its code now */
    document.addEventListener("toggle", function (ev) {
      if (ev.target.open) ev.target.querySelectorAll(".mj-lazy[data-src]").forEach(loadCode);
    }, true);
    /* details open from the start (refuted claims): load when scrolled near */
    if (!("IntersectionObserver" in window)) return;
    var io = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) { io.unobserve(e.target); loadCode(e.target); } });
    }, { rootMargin: "200px" });
    lazy.forEach(function (el) { var d = el.closest("details"); if (!d || d.open) io.observe(el); });
  }

  /* every listing of the page, loaded now (what a reader reaches by opening every card) */
  window.mjLoadAll = function () {
    return Promise.all(Array.prototype.map.call(document.querySelectorAll(".mj-lazy[data-src]"), loadCode));
  };

  /* ---------------------------------------------------------------- lazy figures */
  /* figures load as the reader scrolls near them (a screen ahead), not with the page; <noscript> keeps
     a plain <img> for readers without JS */
  function setupFigures() {
    var imgs = document.querySelectorAll("img[data-src]");
    function show(img) { img.src = img.getAttribute("data-src"); img.removeAttribute("data-src"); }
    if (!("IntersectionObserver" in window)) { imgs.forEach(show); return; }
    var io = new IntersectionObserver(function (entries) {
      entries.forEach(function (e) { if (e.isIntersecting) { io.unobserve(e.target); show(e.target); } });
    }, { rootMargin: "600px 0px" });
    imgs.forEach(function (img) { io.observe(img); });
  }

  /* ---------------------------------------------------------------- what does not fit */
  /* A piece of an inline formula wider than its column goes on a line of its own, in a box that scrolls; every
     box that scrolls sideways (formulas, tables, code) can take the keyboard's focus. mianjing.css draws a
     shadow at an edge where such a box cuts its content. */
  function column(el) {
    for (var a = el.parentElement; a; a = a.parentElement) {
      var d = getComputedStyle(a).display;
      if (d !== "inline" && d !== "contents") return a;
    }
    return document.body;
  }

  function innerRight(el) {
    var r = el.getBoundingClientRect(), cs = getComputedStyle(el);
    return r.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth);
  }

  function fitWide() {
    document.querySelectorAll("article .mj-wide").forEach(function (box) {  /* unwrap, then measure afresh */
      while (box.firstChild) box.parentNode.insertBefore(box.firstChild, box);
      box.remove();
    });
    var wide = [];
    document.querySelectorAll('article math:not([display="block"])').forEach(function (m) {
      if (m.closest(".mj-display, .mj-scroll, td, th")) return;
      var r = m.getBoundingClientRect();
      if (r.width && r.right > innerRight(column(m)) + 1) wide.push(m);
    });
    wide.forEach(function (m) {
      var box = document.createElement("span");
      box.className = "mj-wide";
      m.parentNode.insertBefore(box, m);
      box.appendChild(m);
    });
    focusable(document);
  }

  function focusable(root) {
    root.querySelectorAll(".mj-wide, .mj-display, .mj-scroll, .highlight pre > code").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth + 1) el.setAttribute("tabindex", "0");
      else if (el.getAttribute("tabindex") === "0" && !el.matches("pre > code")) el.removeAttribute("tabindex");
    });
  }

  function setupFit() {
    fitWide();
    var timer = null, width = window.innerWidth;
    window.addEventListener("resize", function () {
      if (window.innerWidth === width) return;
      width = window.innerWidth;
      clearTimeout(timer);
      timer = setTimeout(fitWide, 100);
    });
    window.mjFit = fitWide;
  }

  /* ---------------------------------------------------------------- language switch */
  /* the other language's page has the same anchors (claim cards, headings) and the same filter keys
     (#company=Baidu&difficulty=2): the #fragment travels with the switch */
  document.addEventListener("click", function (ev) {
    var a = ev.target.closest && ev.target.closest("a.md-select__link[hreflang]");
    if (a && location.hash && !a.hash) a.href = a.href.split("#")[0] + location.hash;
  }, true);

  /* ---------------------------------------------------------------- search */
  var searchLoad = null;
  function loadSearch() {
    var input = document.querySelector("[data-mj-query]");
    if (!input) return Promise.reject(new Error("no search box"));
    if (!searchLoad) {
      searchLoad = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = input.getAttribute("data-script");
        s.onload = function () { window.mjSearch.init(input).then(resolve, reject); };
        s.onerror = reject;
        document.head.appendChild(s);
      });
    }
    return searchLoad;
  }
  window.mjSearchLoad = loadSearch;

  function setupSearch() {
    var input = document.querySelector("[data-mj-query]");
    var toggle = document.getElementById("__search");
    if (!input || !toggle) return;
    function open() { if (!toggle.checked) toggle.checked = true; loadSearch(); }
    input.addEventListener("focus", open);
    input.addEventListener("pointerdown", open);
    toggle.addEventListener("change", function () {
      if (toggle.checked) { loadSearch(); setTimeout(function () { input.focus(); }, 50); } else { input.blur(); }
    });
    document.addEventListener("keydown", function (ev) {
      var el = document.activeElement;
      var typing = el && (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT" || el.isContentEditable);
      if (!typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey && (ev.key === "/" || ev.key === "s" || ev.key === "f")) {
        ev.preventDefault();
        open();
        input.focus();
      } else if (ev.key === "Escape" && toggle.checked) {
        toggle.checked = false;
        input.blur();
      }
    });
  }

  function init() {
    document.querySelectorAll(".mj-qtable").forEach(function (box) { setupFilters(box, questionRows(box), true); });
    document.querySelectorAll(".mj-report").forEach(function (box) { setupFilters(box, reportRows(box), false); });
    setupLazy();
    setupFigures();
    setupSearch();
    setupFit();
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
